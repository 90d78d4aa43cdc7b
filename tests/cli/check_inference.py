#!/usr/bin/env python3
"""Checks memdiag's call-to-call judgement of inference loops
(tests/data/inference, captured on an H200 by
`SCRIPT=examples/inference.py sh tests/gpu/patterns.sh` from
examples/inference.py). generate() on growing batches, each output kept until
the next replaces it: no leak (it was one: the first call's warm-up hid that the
held memory grows no faster than each call's own). Beam search: no leak, and no
logits finding (its log-softmax is no training loss; the KV cache matched the
logits' size). A BERT index kept on the GPU: a leak of forward outputs, 96 MiB
a call. A capture of a step-less loop has no phases: judged from the snapshot.
    python3 tests/cli/check_inference.py MEMDIAG DIR"""
import sys

from runcheck import Runs

runs = Runs(sys.argv[1], sys.argv[2])
check, finding = runs.check, runs.finding
runs.leaks({"growbatch": None, "beam": None, "embedleak": 96.0},
           snapshot_only=("growbatch", "beam", "embedleak"))
check("beam: no logits finding in generation", not runs.findings("beam", "logits"))
lg = finding("growbatch", "logits")
check("growbatch: the outputs' scores (output_scores=True) at the peak named, 45% of it",
      lg["summary"] == "generate() keeps every new token's scores (output_scores=True): "
      "119.4 MiB, 45% of the peak" and lg["severity"] == "info" and
      "output_scores" in lg["advice"] and
      lg["sites"][0]["site"].endswith("generation/logits_process.py:233 __call__"))
leak = finding("embedleak", "leak")
check("embedleak: the kept outputs, 9 of them from the encoder's last layer",
      "a few tensors made in each forward pass are kept" in leak["summary"] and
      leak["sites"][0]["count"] == 9)
sys.exit(runs.done())
