#!/usr/bin/env python3
"""Checks memdiag on metrics computed inside the training step
(tests/data/metrics, captured on an H200 by `SCRIPT=examples/metrics.py sh
tests/gpu/patterns.sh` from examples/metrics.py). A second call of the model
for an accuracy metric, outside no_grad, keeps a graph no backward uses
through the step and into the next: the line of that call is named, with
no_grad as the advice (it read as the step before's outputs alone). Under
no_grad (the control) none of it; a gradient norm computed by torch.cat of
every gradient makes its copy after the backward's peak and is no finding.
None leaks.
    python3 tests/cli/check_metrics.py MEMDIAG DIR"""
import sys

from runcheck import Runs

runs = Runs(sys.argv[1], sys.argv[2])
check, finding = runs.check, runs.finding
runs.leaks({"dblfwd": None, "dblfwdng": None, "gradcat": None})
act = finding("dblfwd", "activations")
check("dblfwd: the metric's forward named as a graph no backward uses, no_grad advised",
      act["severity"] == "warning" and
      any(e.startswith("2182.5 MiB that the forward at /work/main/examples/metrics.py:65 main made "
                       "in step 1, from many call stacks (a graph), outlive its backward")
          for e in act["evidence"]) and
      act["advice"].startswith("The forward at /work/main/examples/metrics.py:65 main records a "
                               "graph no backward uses") and "torch.no_grad()" in act["advice"])
for case in ("dblfwdng", "gradcat"):
    a = finding(case, "activations")
    check(f"{case}: no unused graph said", a["summary"].startswith("activations saved for backward")
          and not any("outlive its backward" in e for e in a["evidence"]))
sys.exit(runs.done())
