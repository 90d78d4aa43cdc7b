#!/usr/bin/env python3
"""Checks memdiag's diagnosis of habits of notebooks and hand-rolled loops
(tests/data/habits, captured on an H200 by
`SCRIPT=examples/habits.py sh tests/gpu/patterns.sh` from examples/habits.py).
fp32 master weights beside fp16 parameters: AdamW's state is 2 x the masters,
not "3.84 x the parameters, expected"; the masters are named. A second model
trained after `del model` while the first optimizer lives: the state and
parameters that no longer train are named, with dropping the optimizer as the
advice; no leak. A sweep keeping each trial's model: a leak of models (their
parameters), from the snapshot and the capture.
    python3 tests/cli/check_habits.py MEMDIAG DIR"""
import sys

from runcheck import Runs

runs = Runs(sys.argv[1], sys.argv[2])
check, finding = runs.check, runs.finding
runs.leaks({"masterfp32": None, "twomodels": None, "sweepleak": 70.8}, tol=0.05)
opt = finding("masterfp32", "optimizer_state")
check("masterfp32: AdamW's state 2 x the fp32 master weights, which are named",
      "2.00 x the fp32 master parameter bytes" in opt["summary"] and
      any("fp32 master weights beside them: 258.2 MiB in 74 tensors" in e for e in opt["evidence"])
      and opt["advice"].startswith("With torch.autocast over fp32 parameters"))
opt = finding("twomodels", "optimizer_state")
check("twomodels: the earlier model's parameters and state named as no longer training",
      any(e.startswith("only 258.2 MiB of the 516.5 MiB of parameters got gradients") for e in
          opt["evidence"]) and opt["advice"].startswith("Drop every reference to the earlier model"))
leak = finding("sweepleak", "leak")
check("sweepleak: models kept, their builder the top site, a state_dict on the CPU advised",
      leak["summary"].endswith("models built during the run are kept (their parameters)") and
      leak["sites"][0]["site"].endswith("encoder_lm") and "state_dict" in leak["advice"])
opt = finding("sweepleak", "optimizer_state")
check("sweepleak: the untrained parameters are earlier models', not frozen",
      any("the rest belong to models built earlier" in e for e in opt["evidence"]))
sys.exit(runs.done())
