#!/usr/bin/env python3
"""Checks memdiag on compiled pieces beyond the model (tests/data/compiled,
captured on an H200 by `SCRIPT=examples/compiled.py sh tests/gpu/patterns.sh`
from examples/compiled.py): an optimizer step compiled with torch.compile
still reads as AdamW's 2.00 x state made at the first step, its steps from
the annotations; a causal LM on FlexAttention is not advised to use SDPA to
avoid the seq x seq matrix (FlexAttention keeps none; it was).
    python3 tests/cli/check_compiled.py MEMDIAG DIR"""
import sys

from runcheck import Runs

runs = Runs(sys.argv[1], sys.argv[2])
check, finding = runs.check, runs.finding
runs.leaks({"compiledopt": None, "flexattn": None})
opt = finding("compiledopt", "optimizer_state")
check("compiledopt: AdamW's state 2.00 x, made at the first step, sited at the compiled step",
      opt["summary"].startswith("AdamW keeps 518.5 MiB of state, 2.00 x the parameter bytes, "
                                "created at the first optimizer step") and
      opt["sites"][0]["site"].endswith("examples/compiled.py:89 opt_step"))
act = finding("flexattn", "activations")
check("flexattn: activations named, no SDPA advised (FlexAttention keeps no seq x seq matrix)",
      act["summary"].startswith("activations saved for backward are 51% of the peak") and
      "SDPA" not in act["advice"] and "scaled_dot_product" not in act["advice"] and
      "halving the batch or sequence halves it" in act["advice"])
sys.exit(runs.done())
