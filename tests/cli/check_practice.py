#!/usr/bin/env python3
"""Checks memdiag's diagnosis of everyday practice whose memory surprises
(tests/data/practice, captured on an H200 by
`SCRIPT=examples/practice.py sh tests/gpu/patterns.sh` from examples/practice.py).
A C extension's cudaMalloc every step is a leak outside PyTorch's allocator,
found from the capture's driver-level trace and named by the library (ctypes'
libffi); a CLIP loss's 8192 x 8192 logits are a contrastive similarity matrix
with advice of its own; nn.MultiheadAttention's attention weights (need_weights
left True) are named with need_weights=False as the advice; the optimizer
step's peak (foreach AdamW) and pruning's masks are no leak.
    python3 tests/cli/check_practice.py MEMDIAG DIR"""
import sys

from runcheck import Runs

runs = Runs(sys.argv[1], sys.argv[2])
check, finding = runs.check, runs.finding
runs.leaks({"optpeak": None, "optfused": None, "prune": None, "clip": None, "mhaweights": None})
leak = finding("extleak", "leak", "capture")
check("extleak: a leak outside PyTorch's allocator, 64 MiB a step, by libffi (ctypes)",
      leak["summary"] == "memory outside PyTorch's allocator grows by 64.0 MiB a step and is "
      "never freed: allocated by libffi.so.8" and leak["sites"][0]["site"].startswith("libffi.so.8 (")
      and leak["sites"][0]["count"] == 9 and "cudaFree" in leak["advice"])
check("extleak: no leak from the snapshot, which cannot see it",
      not runs.findings("extleak", "leak"))
logits = finding("clip", "logits")
check("clip: the 8192 x 8192 similarity logits of a contrastive loss",
      logits["summary"].startswith("the 8192 x 8192 similarity logits of a contrastive loss") and
      "GradCache" in logits["advice"])
for case in ("optpeak", "prune", "mhaweights"):
    check(f"{case}: no contrastive claim", all("similarity" not in f["summary"]
                                              for f in runs.findings(case, "logits")))
act = finding("mhaweights", "activations")
check("mhaweights: attention matrices of need_weights=True named, need_weights=False advised",
      any(e.startswith("4224.0 MiB in 7 attention matrices") for e in act["evidence"]) and
      act["advice"].startswith("Call nn.MultiheadAttention with need_weights=False"))
peak = runs.rank("optpeak", "snapshot")["peak"]
check("optpeak: the peak in the first optimizer step, with its state",
      peak["phase"] == "optimizer_step" and finding("optpeak", "optimizer_state")["severity"] == "warning")
sys.exit(runs.done())
