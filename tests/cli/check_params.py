#!/usr/bin/env python3
"""Checks memdiag on where a model's parameters come from (tests/data/params,
captured on an H200 by `SCRIPT=examples/params.py sh tests/gpu/patterns.sh`
from examples/params.py): an ensemble's weights stacked by
torch.func.stack_module_state are parameters, AdamW's state 2 x them (they
read as inputs, the state with no multiple); nanoGPT's causal-mask buffers
are parameters without gradients, said as frozen weights or buffers (they
were said to be frozen); a model built on the meta device and to_empty'd
is parameters like any other. None leaks.
    python3 tests/cli/check_params.py MEMDIAG DIR"""
import sys

from runcheck import Runs

runs = Runs(sys.argv[1], sys.argv[2])
check, finding = runs.check, runs.finding
runs.leaks({"ensemble": None, "buffers": None, "metainit": None})
cats = runs.rank("ensemble", "snapshot")["peak"]["by_category_mib"]
check("ensemble: the stacked weights are parameters",
      abs(cats["parameters"] - 192.8) < 0.1 and cats["inputs"] < 10)
check("ensemble: AdamW's state 2 x them",
      finding("ensemble", "optimizer_state")["summary"].startswith(
          "AdamW keeps 385.5 MiB of state, 2.00 x the parameter bytes"))
for case in ("buffers", "metainit"):
    opt = finding(case, "optimizer_state")
    check(f"{case}: the state against the parameters that get gradients, buffers named",
          "2.0" in opt["summary"] and "x the trained parameter bytes" in opt["summary"] and
          any("(the rest none: frozen weights, or buffers such as attention masks)" in e
              for e in opt["evidence"]))
    cats = runs.rank(case, "snapshot")["peak"]["by_category_mib"]
    check(f"{case}: weights and buffers are parameters", abs(cats["parameters"] - 642.2) < 0.1)
sys.exit(runs.done())
