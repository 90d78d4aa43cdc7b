#!/usr/bin/env python3
"""Checks memdiag on one torch.autocast block around the whole training loop
(tests/data/carryover, captured on an H200 by `SCRIPT=examples/carryover.py
sh tests/gpu/patterns.sh` from examples/carryover.py). Autocast's cache of
casts lives until its block exits: held across optimizer steps, it keeps the
first forward's bf16 (or fp16) copies of the fp32 weights and hands them to
every later forward, so the model trains on stale weights (the run's loss
stays at 11.3 where the control's falls to 10.6). Nothing was said: 254.6 MiB
kept, no growth. Now a warning naming the cache; autocast around each step's
forward, or around one step's micro-batches, says nothing of it. None leaks.
    python3 tests/cli/check_carryover.py MEMDIAG DIR"""
import sys

from runcheck import EMPTY, Runs

runs = Runs(sys.argv[1], sys.argv[2])
check, finding = runs.check, runs.finding
runs.leaks({c: None for c in ("autocastloop", "autocastfp16", "autocaststep", "autocastaccum")})


def cast_findings(case):
    return [f for f in runs.findings(case, "activations") if "autocast's cache" in f["summary"]]


for case in ("autocastloop", "autocastfp16"):
    f = cast_findings(case)
    f = f[0] if f else EMPTY
    check(f"{case}: the cast cache kept through every step, a warning, 254.6 MiB of 65 copies",
          f["severity"] == "warning" and abs(f["bytes"] / 2**20 - 254.6) < 0.1 and
          f["summary"].startswith("autocast's cache keeps the first forward's 16-bit copies") and
          any(e.startswith("65 tensors made by step 0's forward, each half a parameter's size")
              and "80% of the parameters' 634.4 MiB" in e for e in f["evidence"]) and
          any(e.startswith("no later forward makes them again") for e in f["evidence"]) and
          "freed only after the last step (as the autocast block exits)" in f["evidence"] and
          "optimizer.step() outside it" in f["advice"] and "cache_enabled=False" in f["advice"])
for case in ("autocaststep", "autocastaccum"):
    check(f"{case}: no cast cache said", not cast_findings(case))
sys.exit(runs.done())
