#!/usr/bin/env python3
"""Checks memdiag's diagnosis of memory that grows by design
(tests/data/growth, captured on an H200 by
`SCRIPT=examples/growth.py sh tests/gpu/patterns.sh` from examples/growth.py).
Layers joining the optimizer one by one (add_param_group) grow its state
every other step: no leak, from the snapshot (the kept allocations are
optimizer state, within 2 x the parameters) or the capture (each growth is
the optimizer step's own), said by the optimizer_state finding. Four
micro-batches' losses summed before one backward: no leak, and the
activations finding says the four graphs are live at once, with backward
per micro-batch as the advice.
    python3 tests/cli/check_growth.py MEMDIAG DIR"""
import sys

from runcheck import Runs

runs = Runs(sys.argv[1], sys.argv[2])
check, finding = runs.check, runs.finding
runs.leaks({"addgroups": None, "accumgraph": None})
opt = finding("addgroups", "optimizer_state")
check("addgroups: the state grew as parameters joined the optimizer, said there",
      opt["summary"].endswith("made as parameters joined the optimizer") and
      any(e.startswith("it grew by 217.1 MiB after the first step") for e in opt["evidence"]))
act = finding("accumgraph", "activations")
check("accumgraph: four micro-batches' graphs live at once; backward per micro-batch advised",
      any(e.startswith("the forward pass ran 4 times before the step's backward") for e in
          act["evidence"]) and act["advice"].startswith("Call backward on each micro-batch's loss"))
sys.exit(runs.done())
