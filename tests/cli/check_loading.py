#!/usr/bin/env python3
"""Checks memdiag on ways weights reach the GPU before training
(tests/data/loading, captured on an H200 by `SCRIPT=examples/loading.py sh
tests/gpu/patterns.sh` from examples/loading.py): under
torch.set_default_device("cuda") the model is parameters and its inputs are
not; a safetensors checkpoint loaded onto the GPU and kept is inputs at the
script's load_file line (it was safetensors' own file); a meta-device model
given torch.load's tensors with assign=True is parameters. None leaks.
    python3 tests/cli/check_loading.py MEMDIAG DIR"""
import sys

from runcheck import Runs

runs = Runs(sys.argv[1], sys.argv[2])
check, finding = runs.check, runs.finding
runs.leaks({"defaultdev": None, "safekept": None, "assignload": None})
for case, inputs in (("defaultdev", 0), ("safekept", 350.2), ("assignload", 0)):
    cats = runs.rank(case, "snapshot")["peak"]["by_category_mib"]
    check(f"{case}: the weights are parameters; inputs {inputs} MiB",
          abs(cats["parameters"] - 350.2) < 0.1 and abs(cats["inputs"] - inputs) < 0.1)
    opt = finding(case, "optimizer_state")
    check(f"{case}: AdamW's state 2 x the parameters",
          "2.00 x the parameter bytes" in opt["summary"])
sites = runs.rank("safekept", "snapshot")["peak"]["sites"]
check("safekept: the kept checkpoint's site is the script's load_file line",
      any(s["site"].endswith("examples/loading.py:71 safekept") and s["category"] == "inputs"
          for s in sites))
sys.exit(runs.done())
