#!/usr/bin/env python3
"""Checks memdiag's diagnosis of training methods from papers
(tests/data/research, captured on an H200 by
`SCRIPT=examples/research.py sh tests/gpu/patterns.sh` from examples/research.py).
Only bestleak leaks. Sharpness-aware minimization's zero_grad between its two
passes ends no step (9, not 18, in the snapshot and the capture); a
GradScaler's skipped steps still count (12). MAML's inner autograd.grad calls
and a Hessian-vector power iteration are the forward's (the backward starts at
loss.backward()), said with higher-order advice; DP-SGD's per-sample
gradients are named as 128 x the parameters; two streams' caches are the
fragmentation's cause; a memory fraction's OOM is said to be the limit's.
    python3 tests/cli/check_research.py MEMDIAG DIR"""
import sys

from runcheck import Runs

runs = Runs(sys.argv[1], sys.argv[2])
check, finding = runs.check, runs.finding
runs.leaks({"bestleak": 258.7, "sam": None, "maml": None, "dpsgd": None, "bestkeep": None,
            "moco": None, "scaler": None, "fraction": None, "twostreams": None, "hvp": None},
           tol=0.05)
for case, n in (("sam", 9), ("scaler", 12)):
    snap = runs.rank(case, "snapshot")
    check(f"{case}: {n} steps in the snapshot, found {len(snap['steps'])}", len(snap["steps"]) == n)
    out = runs.run("summary", runs.path(case, "rank0.mdcap"))
    check(f"{case}: {n} steps in the capture", f"complete, status 0, {n} optimizer steps" in out)
for case, mib in (("maml", 2084.1), ("hvp", 720.1)):
    ind = runs.rank(case, "snapshot")["indicators"]
    check(f"{case}: the forward ends at loss.backward() (largest forward {mib} MiB), found "
          f"{ind['largest_forward_increase_mib']}", abs(ind["largest_forward_increase_mib"] - mib) < 0.1)
act = finding("maml", "activations")
check("maml: 24 autograd.grad calls before the backward, higher-order advice",
      any(e.startswith("torch.autograd.grad ran before the step's backward (24 calls seen")
          for e in act["evidence"]) and act["advice"].startswith("With create_graph=True"))
act = finding("hvp", "activations")
check("hvp: the peak among autograd.grad calls, their graphs counted",
      act["summary"].startswith("the peak falls among torch.autograd.grad calls") and
      act["bytes"] > 2500 * 2**20)
act = finding("dpsgd", "activations")
check("dpsgd: per-sample gradients, 128 x the parameters",
      act["summary"].startswith("per-sample gradients are 98% of the peak") and
      act["summary"].endswith("a batch of 128") and "chunk_size" in act["advice"])
frag = finding("twostreams", "fragmentation")
check("twostreams: the cache per stream named as the cause",
      "caches blocks per stream" in frag["summary"] and "record_stream" in frag["advice"] and
      sum(e.startswith("stream 0x") for e in frag["evidence"]) == 2)
oom = finding("fraction", "oom")
check("fraction: the OOM at the process's limit (snapshot)", "process's limit" in oom["summary"])
oom = finding("fraction", "oom", "capture")
check("fraction: the limit named a memory fraction (capture)",
      "limit of 4096.0 MiB (a memory fraction)" in oom["summary"])
logits = finding("moco", "logits")
check("moco: logits made outside any module (against the queue), chunked advice",
      logits["advice"].startswith("These logits are made outside any module"))
for case in ("sam", "bestkeep", "moco", "scaler", "twostreams"):
    check(f"{case}: no per-sample or higher-order claim",
          not any(f["summary"].startswith(("per-sample", "the peak falls among"))
                  for f in runs.findings(case, "activations")))
sys.exit(runs.done())
