#!/usr/bin/env python3
"""Checks memdiag where parameters come into being during training
(tests/data/lazy, captured on an H200 by `SCRIPT=examples/lazy.py sh
tests/gpu/patterns.sh` from examples/lazy.py): nn.LazyLinear's weights, made
by a dry-run forward pass, are parameters (they read as 177 MiB of
activations, and AdamW's state had no multiple); a model built at the
loop's first iteration likewise. None leaks.
    python3 tests/cli/check_lazy.py MEMDIAG DIR"""
import sys

from runcheck import Runs

runs = Runs(sys.argv[1], sys.argv[2])
check, finding = runs.check, runs.finding
runs.leaks({"lazy": None, "buildfirst": None})
for case in ("lazy", "buildfirst"):
    cats = runs.rank(case, "snapshot")["peak"]["by_category_mib"]
    check(f"{case}: the weights are parameters, not activations",
          abs(cats["parameters"] - 176.1) < 0.1 and cats["activations"] < 2)
    opt = finding(case, "optimizer_state")
    check(f"{case}: AdamW's state 2 x the parameters",
          opt["summary"].startswith("AdamW keeps 351.4 MiB of state, 2.00 x the parameter bytes"))
sys.exit(runs.done())
