#!/usr/bin/env python3
"""Checks memdiag on gradient accumulation that keeps what each micro-batch
made (tests/data/accumulate, captured on an H200 by `SCRIPT=examples/
accumulate.py sh tests/gpu/patterns.sh` from examples/accumulate.py). Eight
micro-batches a step, each backpropagated at once, every one's logits kept
in a list for a step-level metric: the seven earlier ones, live at the peak,
are named as kept after their backward, with keeping the argmax as the
advice (it read as 44.0 bytes per logit element, a fused loss advised).
Keeping the argmax (the control) says none of it. None leaks.
    python3 tests/cli/check_accumulate.py MEMDIAG DIR"""
import sys

from runcheck import Runs

runs = Runs(sys.argv[1], sys.argv[2])
check, finding = runs.check, runs.finding
runs.leaks({"accumkeep": None, "accumargmax": None})
lg = finding("accumkeep", "logits")
check("accumkeep: seven micro-batches' logits kept after their backward, argmax advised",
      lg["summary"].startswith("the logits of 7 earlier micro-batches are still live at the peak, "
                               "kept after their backward: 1750.0 MiB") and
      any(e.startswith("8 logits-sized tensors made at /work/main/examples/accumulate.py:60 main")
          for e in lg["evidence"]) and
      lg["advice"].startswith("Each micro-batch's logits stay referenced after its backward") and
      "logits.argmax(-1)" in lg["advice"])
ctl = finding("accumargmax", "logits")
check("accumargmax: the logits of one micro-batch, no kept ones",
      ctl["summary"].startswith("the logits and the loss over them hold 1000.0 MiB") and
      "kept after" not in ctl["summary"])
sys.exit(runs.done())
