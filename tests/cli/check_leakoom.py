#!/usr/bin/env python3
"""Checks memdiag on leaks that end in an out-of-memory error
(tests/data/leakoom, captured on an H200 by `SCRIPT=examples/leakoom.py sh
tests/gpu/patterns.sh` from examples/leakoom.py; the process may use 4 GiB):
the OOM now says how much of the live memory the steps before it kept
(1537.0 MiB of logits kept over 12 steps; 1757.9 MiB of two steps' graphs),
with freeing it as the advice (it was "free 128.0 MiB of live memory ... the
largest holder is activations"). The logits leak is also the leak finding
(128 MiB a step); two steps are too few to judge one (graphoom).
    python3 tests/cli/check_leakoom.py MEMDIAG DIR"""
import sys

from runcheck import Runs

runs = Runs(sys.argv[1], sys.argv[2])
check, finding = runs.check, runs.finding
runs.leaks({"logitsoom": 128.0, "graphoom": None})
for case, kept, tensors, steps in (("logitsoom", "1537.0", 13, 12),
                                   ("graphoom", "1757.9", 228, 2)):
    f = finding(case, "oom")
    check(f"{case}: the OOM names what the steps kept, freeing it advised",
          f["severity"] == "critical" and
          any(e.startswith(f"{kept} MiB of the live memory ({tensors} tensors) was made by the "
                           f"{steps} steps before it and kept since") for e in f["evidence"]) and
          f["advice"].startswith("Free what the steps keep") and
          "room enough for this request" in f["advice"])
sys.exit(runs.done())
