#!/usr/bin/env python3
"""Checks memdiag on the OOM retry, teacher and optimizer cases written
another way (tests/data/variants, captured on an H200 by
`SCRIPT=examples/variants.py sh tests/gpu/patterns.sh` from
examples/variants.py): a retry that recurses from its except block holds
every failed attempt's tensors, summed over the attempts at each OOM after
the first (they read one attempt's, then nothing), and its attempts are no
leak (they were "a leak every call"); transformers' GPT-2 teacher left
trainable has its kept gradients named; AdamW made anew every 3 steps is
not called the per-step mistake.
    python3 tests/cli/check_variants.py MEMDIAG DIR"""
import sys

from runcheck import Runs

runs = Runs(sys.argv[1], sys.argv[2])
check, finding = runs.check, runs.finding
runs.leaks({"retryrecurse": None, "hfteacher": None, "optperepoch": None})
ooms = runs.findings("retryrecurse", "oom")
held = [next((e for e in f["evidence"] if "of the live memory" in e), "") for f in ooms]
check("retryrecurse: six OOMs, the last fatal; each after the first names every earlier "
      "attempt's tensors still held",
      len(ooms) == 6 and ooms[-1]["severity"] == "critical" and not held[0] and
      held[2].startswith("2901.1 MiB of the live memory (135 tensors) was made by the 2 attempts "
                         "that ran out of memory before, the first at") and
      held[5].startswith("2965.0 MiB of the live memory (149 tensors) was made by the 5 attempts") and
      all(f["advice"].startswith("Retry after the except block") for f in ooms[1:]))
act = finding("hfteacher", "activations")
check("hfteacher: the GPT-2 teacher's kept gradients named, no_grad advised",
      any(e.startswith("213.2 MiB of gradients (76 tensors) made in step 0's backward are kept")
          for e in act["evidence"]) and act["advice"].startswith("Run the model no optimizer trains"))
opt = finding("optperepoch", "optimizer_state")
check("optperepoch: AdamW remade every 3 steps is not the per-step mistake",
      opt["summary"].startswith("AdamW keeps") and "anew" not in opt["summary"])
sys.exit(runs.done())
