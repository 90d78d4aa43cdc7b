#!/usr/bin/env python3
"""Checks memdiag on loop mistakes that memory shows (tests/data/mistakes,
captured on an H200 by `SCRIPT=examples/mistakes.py sh tests/gpu/patterns.sh`
from examples/mistakes.py): AdamW constructed inside the loop makes its
state anew every step (freed before each forward), named as such with
"construct it once" as the advice; it read "keeps 832.6 MiB of state ...
created at the first optimizer step", "expected". The optimizer made once
(the control) keeps the usual finding. Neither is a leak.
    python3 tests/cli/check_mistakes.py MEMDIAG DIR"""
import sys

from runcheck import Runs

runs = Runs(sys.argv[1], sys.argv[2])
check, finding = runs.check, runs.finding
runs.leaks({"optinloop": None, "optonce": None})
f = finding("optinloop", "optimizer_state")
check("optinloop: the state made anew every step, the optimizer made once advised",
      f["severity"] == "warning" and
      f["summary"] == ("AdamW makes its 832.6 MiB of state anew at every step: the optimizer is "
                       "constructed inside the loop, and its state restarts each step") and
      "in each of steps 1 to 5 the optimizer step made the whole state again, and none of the "
      "step before's was live as its forward began" in f["evidence"] and
      f["advice"].startswith("Construct the optimizer once, before the loop"))
f = finding("optonce", "optimizer_state")
check("optonce: the state kept, made at the first step, expected",
      f["summary"].startswith("AdamW keeps 832.6 MiB of state, 2.00 x the parameter bytes, "
                              "created at the first optimizer step") and
      f["advice"].startswith("Expected for this optimizer"))
sys.exit(runs.done())
