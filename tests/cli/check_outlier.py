#!/usr/bin/env python3
"""Checks memdiag on an out-of-memory error at a later step (tests/data/
outlier, captured on an H200 by `SCRIPT=examples/outlier.py sh
tests/gpu/patterns.sh` from examples/outlier.py; the process may use 6 GiB):
five steps at sequence 512, then a batch at 4096 runs out of memory. The
error now says the failed work had made 4.1 x the steps' largest forward
pass and its input is 8.0 x the last step's, with capping or splitting such
batches as the advice (it was "free 992 MiB of live memory"); the same
with the error caught and the batch skipped. Neither is a leak. The model's
attention (nn.MultiheadAttention with need_weights=False, which calls SDPA
from C++) is not advised to use SDPA (it was).
    python3 tests/cli/check_outlier.py MEMDIAG DIR"""
import sys

from runcheck import Runs

runs = Runs(sys.argv[1], sys.argv[2])
check, finding = runs.check, runs.finding
runs.leaks({"longbatch": None, "longskip": None})
for case, sev in (("longbatch", "critical"), ("longskip", "warning")):
    f = finding(case, "oom")
    check(f"{case}: the outsized batch named, against the steps before it",
          f["severity"] == sev and
          "the work that failed had made 4299.1 MiB by then, 4.1 x the largest forward pass of "
          "the 5 steps before it (1038.6 MiB), and was not done: this batch needs far more than "
          "theirs" in f["evidence"] and
          any(e.startswith("its input is 8.0 x the last step's (256.0 KiB against 32.0 KiB, "
                           "made at /work/main/examples/outlier.py:60 main)")
              for e in f["evidence"]) and
          f["advice"].startswith("This batch needs far more than the ones before it") and
          "peaked at 2359.8 MiB" in f["advice"])
act = finding("longbatch", "activations")
check("longbatch: nn.TransformerEncoder's attention (MultiheadAttention, need_weights=False: SDPA "
      "inside) is not advised to use SDPA",
      act["advice"].startswith("Activation checkpointing") and "SDPA" not in act["advice"])
sys.exit(runs.done())
