#!/usr/bin/env python3
"""Checks memdiag on models whose weights are made on the GPU itself
(tests/data/ondevice, captured on an H200 by `SCRIPT=examples/ondevice.py sh
tests/gpu/patterns.sh` from examples/ondevice.py): a model built inside
`with torch.device("cuda")`, raw tensors made with requires_grad, a Llama
loaded by from_pretrained(device_map="cuda") and Lightning Fabric's
init_module(). Their weights read as inputs, and AdamW's state had no
multiple (2.08 x where the allocator rounded the state's blocks); the raw
tensors' first step began before they were made. None leaks.
    python3 tests/cli/check_ondevice.py MEMDIAG DIR"""
import sys

from runcheck import Runs

runs = Runs(sys.argv[1], sys.argv[2])
check, finding = runs.check, runs.finding
runs.leaks({"ctxdevice": None, "handmade": None, "hfload": None, "fabric": None})
for case, params, opt, state in (("ctxdevice", 350.2, "AdamW", 700.2),
                                 ("handmade", 176.4, "Adam", 351.7),
                                 ("hfload", 305.0, "AdamW", 633.1),
                                 ("fabric", 177.5, "AdamW", 353.0)):
    cats = runs.rank(case, "snapshot")["peak"]["by_category_mib"]
    check(f"{case}: the weights are parameters, not inputs",
          abs(cats["parameters"] - params) < 0.1 and cats["inputs"] < 0.1)
    f = finding(case, "optimizer_state")
    check(f"{case}: {opt}'s state 2 x the parameters",
          f["summary"].startswith(f"{opt} keeps {state} MiB of state, 2.00 x the parameter bytes"))
f = finding("hfload", "optimizer_state")
check("hfload: the state's tensors against its rounded blocks",
      "its tensors are 610.1 MiB: the allocator's blocks round them up by 23.0 MiB" in f["evidence"][1])
ind = runs.rank("handmade", "snapshot")["indicators"]
check("handmade: the first step starts after the weights are made (no module marks its forward)",
      abs(ind["first_step_persistent_change_mib"] - 421.7) < 0.1 and
      abs(ind["largest_forward_increase_mib"] - 63.9) < 0.1)
sys.exit(runs.done())
