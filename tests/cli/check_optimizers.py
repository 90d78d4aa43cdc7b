#!/usr/bin/env python3
"""Checks memdiag's optimizer_state finding where the state is not the
textbook multiple (tests/data/optimizers, captured on an H200 by
`SCRIPT=examples/optimizers.py sh tests/gpu/patterns.sh` from
examples/optimizers.py): Adam with amsgrad=True (3 x: max_exp_avg_sq named,
what dropping it saves), SGD replaced by AdamW mid-run (the state named as
AdamW's, not "SGD keeps 2 x, expected 1 x"), RMSprop with momentum (2 x). None
leaks.
    python3 tests/cli/check_optimizers.py MEMDIAG DIR"""
import sys

from runcheck import Runs

runs = Runs(sys.argv[1], sys.argv[2])
check, finding = runs.check, runs.finding
runs.leaks({"amsgrad": None, "optswitch": None, "rmsmoment": None})
opt = finding("amsgrad", "optimizer_state")
check("amsgrad: max_exp_avg_sq named, 258.2 MiB less without it",
      any("amsgrad=True keeps 3 x the parameters" in e for e in opt["evidence"]) and
      opt["advice"].startswith("amsgrad=True adds 1 x the parameters") and "258.2 MiB less" in opt["advice"])
opt = finding("optswitch", "optimizer_state")
check("optswitch: the state is AdamW's, the switch said",
      opt["summary"].startswith("Adam/AdamW keeps") and
      any(e.startswith("the optimizer changed during the run: SGD stepped first") for e in opt["evidence"]))
opt = finding("rmsmoment", "optimizer_state")
check("rmsmoment: momentum's buffer named",
      any("RMSprop with momentum > 0" in e for e in opt["evidence"]))
sys.exit(runs.done())
