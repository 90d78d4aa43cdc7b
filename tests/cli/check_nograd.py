#!/usr/bin/env python3
"""Checks memdiag on inference and evaluation written without no_grad
(tests/data/nograd, captured on an H200 by `SCRIPT=examples/nograd.py sh
tests/gpu/patterns.sh` from examples/nograd.py): forward passes recording
graphs that no backward uses are named as activations with inference_mode as
the advice (93% of the peak had no finding); outputs and loss tensors kept
with their graphs are leaks whose advice is inference_mode (it was to store
loss.item()). The predictions kept each call are a small leak, as elsewhere.
    python3 tests/cli/check_nograd.py MEMDIAG DIR"""
import sys

from runcheck import Runs

runs = Runs(sys.argv[1], sys.argv[2])
check, finding = runs.check, runs.finding
runs.leaks({"gradinfer": 0.0625, "gradinferleak": 3365.4, "pplleak": 3176.8}, tol=0.1,
           snapshot_only=("gradinfer", "gradinferleak", "pplleak"))
act = finding("gradinfer", "activations")
check("gradinfer: the graphs no backward uses named, inference_mode advised",
      act["summary"].startswith("forward passes record autograd graphs though no backward runs: "
                                "6763.3 MiB") and
      any(e.startswith("3333.3 MiB of them were made by the call before the peak's")
          for e in act["evidence"]) and "torch.inference_mode()" in act["advice"])
for case in ("gradinferleak", "pplleak"):
    leak = finding(case, "leak")
    check(f"{case}: kept graphs, with inference_mode as the advice (no backward runs)",
          "autograd graph" in leak["summary"] and
          leak["advice"].startswith("No backward runs in this trace") and
          not runs.findings(case, "activations"))
sys.exit(runs.done())
