#!/usr/bin/env python3
"""Checks that memdiag's "graphs no backward uses" finding and advice stay
away from inference done right (tests/data/inferctl, captured on an H200 by
`SCRIPT=examples/inferctl.py sh tests/gpu/patterns.sh` from
examples/inferctl.py, the controls of examples/nograd.py): the same loop
under no_grad has no activations finding (its peak is 706 MiB, against
7244 MiB without), and outputs kept under inference_mode are a leak of
outputs advised as such.
    python3 tests/cli/check_inferctl.py MEMDIAG DIR"""
import sys

from runcheck import Runs

runs = Runs(sys.argv[1], sys.argv[2])
check, finding = runs.check, runs.finding
runs.leaks({"nogradinfer": 0.0625, "inferkeep": 0.375}, tol=0.01,
           snapshot_only=("nogradinfer", "inferkeep"))
for case in ("nogradinfer", "inferkeep"):
    check(f"{case}: no activations finding, no inference_mode advice",
          not runs.findings(case, "activations") and
          "inference_mode" not in finding(case, "leak")["advice"])
check("inferkeep: the kept outputs said as outputs",
      finding("inferkeep", "leak")["advice"].startswith("Outputs of the forward pass"))
sys.exit(runs.done())
