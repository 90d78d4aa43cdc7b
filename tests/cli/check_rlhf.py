#!/usr/bin/env python3
"""Checks memdiag's diagnosis of preference and RL loops (tests/data/rlhf,
captured on an H200 by `SCRIPT=examples/rlhf.py sh tests/gpu/patterns.sh`
from examples/rlhf.py), no leaks. DPO keeps a frozen reference model as
large as the policy: AdamW's state is 2 x the trained half (it read 1.00 x
all the parameters: the gradients, exactly half, missed the old
half-the-parameters cut). A rollout loop (generate() under no_grad, then a
training step): steps and no leak.
    python3 tests/cli/check_rlhf.py MEMDIAG DIR"""
import sys

from runcheck import Runs

runs = Runs(sys.argv[1], sys.argv[2])
check, finding = runs.check, runs.finding
runs.leaks({"dpo": None, "rollout": None})
opt = finding("dpo", "optimizer_state")
check("dpo: the state is 2 x the policy's parameters, the reference frozen",
      "2.00 x the trained parameter bytes" in opt["summary"] and
      any("426.5 MiB, of which 213.2 MiB get gradients" in e for e in opt["evidence"]))
opt = finding("rollout", "optimizer_state")
check("rollout: one model, all of it trained: 2.00 x the parameters",
      "2.00 x the parameter bytes" in opt["summary"])
sys.exit(runs.done())
