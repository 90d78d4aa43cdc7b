#!/usr/bin/env python3
"""Checks memdiag's step counting under fp16 GradScalers (tests/data/amp,
captured on an H200 by `SCRIPT=examples/amp.py sh tests/gpu/patterns.sh` from
examples/amp.py): accelerate and PyTorch Lightning with the first 4 steps
skipped (overflowing scale), the HF Trainer with its own scaler. 9 steps in
each snapshot as in each capture; Lightning's 16-mixed runs forward, zero_grad
and backward outside the optimizer step (the snapshot counted 4 steps).
    python3 tests/cli/check_amp.py MEMDIAG DIR"""
import sys

from runcheck import Runs

runs = Runs(sys.argv[1], sys.argv[2])
check = runs.check
runs.leaks({"accelfp16": None, "plfp16": None, "trainerfp16": None})
for case in ("accelfp16", "plfp16", "trainerfp16"):
    snap = runs.rank(case, "snapshot")
    check(f"{case}: 9 steps in the snapshot, found {len(snap['steps'])}", len(snap["steps"]) == 9)
    out = runs.run("summary", runs.path(case, "rank0.mdcap"))
    check(f"{case}: 9 steps in the capture", "complete, status 0, 9 optimizer steps" in out)
for case in ("accelfp16", "plfp16"):
    steps = runs.rank(case, "snapshot")["steps"]
    check(f"{case}: the optimizer's state appears at step 4, after 4 skipped steps",
          len(steps) > 4 and steps[3]["after_optimizer_step_mib"] == steps[3]["after_backward_mib"] and
          steps[4]["after_optimizer_step_mib"] > steps[4]["after_backward_mib"] + 250)
sys.exit(runs.done())
