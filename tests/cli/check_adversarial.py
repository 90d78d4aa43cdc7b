#!/usr/bin/env python3
"""Checks memdiag on adversarial training (tests/data/adversarial, captured
on an H200 by `SCRIPT=examples/adversarial.py sh tests/gpu/patterns.sh` from
examples/adversarial.py). A PGD attack runs its forward passes after one
optimizer step and before the zero_grad that closes it (the model's
zero_grad comes after the attack): those passes' saved tensors are
activations (they read as 5.2 GiB of "other", and no finding named the
peak), the peak is said to fall in that attack; "free" adversarial training
(4 optimizer steps a batch) likewise. The capture samples the same phases:
the zero_grad after the attack closes the step (it closed none, so the
capture had no indicators), and the step's forward is the training one.
None leaks.
    python3 tests/cli/check_adversarial.py MEMDIAG DIR"""
import sys

from runcheck import Runs

runs = Runs(sys.argv[1], sys.argv[2])
check, finding = runs.check, runs.finding
runs.leaks({"pgd": None, "pgdbwd": None, "free": None})
for case in ("pgd", "pgdbwd", "free"):
    act = finding(case, "activations")
    snap = runs.rank(case, "snapshot")
    check(f"{case}: the attack's and the training's forwards are activations, 90% of the peak",
          act["summary"].startswith("activations saved for backward are 90% of the peak") and
          snap["peak"]["by_category_mib"]["activations"] > 5000 and
          snap["peak"]["by_category_mib"]["other"] < 300)
    cap = runs.rank(case, "capture")
    check(f"{case}: the capture's indicators are the snapshot's",
          all(abs(cap["indicators"].get(k, -1) - v) < 0.01 for k, v in snap["indicators"].items()))
pgd = finding("pgd", "activations")
check("pgd: the peak named in the attack's forward, before the step's zero_grad",
      any("in a forward pass after its optimizer step and before the zero_grad that closes it"
          in e for e in pgd["evidence"]))
sys.exit(runs.done())
