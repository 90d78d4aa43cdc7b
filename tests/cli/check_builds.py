#!/usr/bin/env python3
"""Checks memdiag on large tensors the training code builds itself
(tests/data/builds, captured on an H200 by `SCRIPT=examples/builds.py sh
tests/gpu/patterns.sh` from examples/builds.py). Pairwise distances of 1024
embeddings computed by broadcasting make a 1024 x 1024 x 768 tensor whose
gradient and saved copy are the backward's peak: its line is named, with
torch.cdist as the advice (nothing was said: the saved part alone is a third
of the peak); torch.cdist (the control) says none of it. A per-head additive
mask of (8, 16, 2048, 2048) bf16 is not counted as the logits (it was, within
the 5 % the logits' size was matched to, as 14.0 bytes per logit element).
None leaks.
    python3 tests/cli/check_builds.py MEMDIAG DIR"""
import sys

from runcheck import Runs

runs = Runs(sys.argv[1], sys.argv[2])
check, finding = runs.check, runs.finding
runs.leaks({"pairdist": None, "cdist": None, "bigmask": None, "causal": None})
act = finding("pairdist", "activations")
check("pairdist: the broadcast's line named at the backward's peak, torch.cdist advised",
      act["severity"] == "warning" and
      act["summary"].startswith("the peak falls in backward: the gradients it is computing and the "
                                "activations saved for it are 98% of the peak") and
      any(e.startswith("the step's forward made 1 tensor of that size at "
                       "/work/main/examples/builds.py:57 metric") for e in act["evidence"]) and
      "outside the model" in act["advice"] and "torch.cdist" in act["advice"])
check("cdist: no activations finding",
      not runs.findings("cdist", "activations"))
for case in ("bigmask", "causal"):
    lg = finding(case, "logits")
    check(f"{case}: the logits 6000.0 MiB, 12.0 bytes per element (the mask not among them)",
          lg["summary"].startswith("the logits and the loss over them hold 6000.0 MiB") and
          "12.0 bytes per logit element" in lg["summary"])
sys.exit(runs.done())
