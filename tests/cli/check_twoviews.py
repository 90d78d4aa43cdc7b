#!/usr/bin/env python3
"""Checks memdiag on training steps that run a model twice, each time for
the loss (tests/data/twoviews, captured on an H200 by `SCRIPT=examples/
twoviews.py sh tests/gpu/patterns.sh` from examples/twoviews.py). R-Drop's
two passes over one batch, coupled by a KL term, are not micro-batches whose
losses could be backpropagated one at a time (they were, and that was the
advice); a mean teacher's no_grad pass and SimCLR's two views are no graph
the backward leaves unused. None leaks.
    python3 tests/cli/check_twoviews.py MEMDIAG DIR"""
import sys

from runcheck import Runs

runs = Runs(sys.argv[1], sys.argv[2])
check, finding = runs.check, runs.finding
runs.leaks({"rdrop": None, "meanteacher": None, "simclr": None})
act = finding("rdrop", "activations")
check("rdrop: two coupled passes, not micro-batches; checkpointing advised",
      act["summary"].startswith("activations saved for backward are 68% of the peak") and
      not any("micro-batches" in e for e in act["evidence"]) and
      act["advice"].startswith("Activation checkpointing of the repeated blocks"))
for case in ("rdrop", "meanteacher", "simclr"):
    a = finding(case, "activations")
    check(f"{case}: no forward called unused, no micro-batches",
          a["summary"].startswith("activations saved for backward") and
          not any("outlive its backward" in e or "micro-batches" in e for e in a["evidence"]))
sys.exit(runs.done())
