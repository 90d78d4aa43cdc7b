#!/usr/bin/env python3
"""Checks memdiag on out-of-memory errors retried (tests/data/recover,
captured on an H200 by `SCRIPT=examples/recover.py sh tests/gpu/patterns.sh`
from examples/recover.py; the process may use 3.2 GiB): a retry inside the
except block runs out again because the failed attempt's 2.6 GiB are still
held by the error's traceback; that is named, with the memory and the
FAQ's retry after the block as the advice (it was "free 24 MiB of live
memory"). The error kept in a variable holds the second attempt's tensors
for the rest of the run. The retry after the block (the control) says none
of it.
    python3 tests/cli/check_recover.py MEMDIAG DIR"""
import sys

from runcheck import Runs

runs = Runs(sys.argv[1], sys.argv[2])
check = runs.check
runs.leaks({"retryinside": None, "retrykeep": None, "retryoutside": None})
HELD = "2670.1 MiB of the live memory (112 tensors) was made by the attempt that ran out of memory before"
ADVICE = "Retry after the except block, not inside it"


def ooms(case):
    return runs.findings(case, "oom")


inside = ooms("retryinside")
check("retryinside: two OOMs, the first caught and tried again, the second fatal",
      [f["severity"] for f in inside] == ["warning", "critical"] and
      "(caught: the job tried again)" in inside[0]["summary"])
check("retryinside: the fatal OOM names the first attempt's tensors still held, and the retry "
      "after the except block as the advice",
      any(e.startswith(HELD) for e in inside[1]["evidence"]) and
      inside[1]["advice"].startswith(ADVICE) and
      "Here 2670.1 MiB would be free, room enough for this request" in inside[1]["advice"])
keep = ooms("retrykeep")
check("retrykeep: the second OOM names the first attempt's tensors held, and its own attempt's "
      "kept to the end of the run",
      len(keep) == 2 and any(e.startswith(HELD) for e in keep[1]["evidence"]) and
      any(e.startswith("231.0 MiB (23 tensors) made by the attempt that failed here were still "
                       "live at the end of step 5, the last") for e in keep[1]["evidence"]) and
      keep[1]["advice"].startswith(ADVICE))
outside = ooms("retryoutside")
check("retryoutside: two OOMs caught, nothing held from the first, no retry advice",
      len(outside) == 2 and
      not any("still held" in e or "were still live" in e
              for f in outside for e in f["evidence"]) and
      not any(f["advice"].startswith(ADVICE) for f in outside))
sys.exit(runs.done())
