#!/usr/bin/env python3
"""Checks memdiag's diagnosis of mid-run changes (tests/data/resume,
captured on an H200 by `SCRIPT=examples/resume.py sh tests/gpu/patterns.sh`
from examples/resume.py), none a leak. A run resumed from a checkpoint
loaded onto the GPU and kept referenced: the new model's weights, built
between steps, are parameters (they were "other"), and the checkpoint's
copy is the largest site at the peak, at the torch.load line; AdamW's state
that load_state_dict took over from it is named as loaded (no finding said
it), with the weights the checkpoint still holds. A model cast
to bf16 mid-run and CUDA graphs over several batch sizes: no leak.
    python3 tests/cli/check_resume.py MEMDIAG DIR"""
import sys

from runcheck import Runs

runs = Runs(sys.argv[1], sys.argv[2])
check, rank = runs.check, runs.rank
runs.leaks({"resume": None, "todtype": None, "cgshapes": None})
peak = rank("resume", "snapshot")["peak"]
check("resume: the model built after the first run's steps is parameters",
      abs(peak["by_category_mib"]["parameters"] - 384.1) < 0.1)
top = peak["sites"][0]
check("resume: the checkpoint kept on the GPU is the largest site, at torch.load's line",
      top["site"].endswith("examples/resume.py:53 resume") and top["bytes"] > 1152 << 20)
opt = runs.finding("resume", "optimizer_state")
check("resume: AdamW's state loaded from the checkpoint is named, the weights it still holds too",
      opt["summary"].startswith("AdamW keeps 768.1 MiB of state, 2.00 x the parameter bytes, "
                                "loaded from a checkpoint (torch.load at") and
      any(e.startswith("that checkpoint holds 384.1 MiB more, still live") for e in opt["evidence"])
      and opt["advice"].startswith("del the checkpoint once loaded"))
sys.exit(runs.done())
