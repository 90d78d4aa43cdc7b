#!/usr/bin/env python3
"""Checks memdiag on optimizers and their first step (tests/data/firststep,
captured on an H200 by `SCRIPT=examples/firststep.py sh tests/gpu/patterns.sh`
from examples/firststep.py): AdamW's first step running out of memory as it
makes its state is said so, with what the whole state needs (it read "AdamW
keeps 768.1 MiB, 0.37 x the parameters ... Expected for this optimizer"),
and the cut step counts as none, as in the capture; Muon beside AdamW,
stepped from one line, are iterations of 2 steps with each one's state (18
steps and "Muon keeps 1.38 x"); a Lion written in the script is said as an
optimizer memdiag does not know. None leaks.
    python3 tests/cli/check_firststep.py MEMDIAG DIR"""
import sys

from runcheck import Runs

runs = Runs(sys.argv[1], sys.argv[2])
check, finding = runs.check, runs.finding
runs.leaks({"muon": None, "lion": None})
oom = finding("optoom", "oom")
check("optoom: the OOM came as AdamW made its state, the whole state said",
      oom["summary"] == "out of memory in step 0's optimizer step: AdamW's state (768.1 MiB made "
                        "so far) did not fit beside the weights and gradients" and
      any("AdamW keeps 2 x the parameters: 4096.5 MiB beside the weights (2048.2 MiB)" in e
          for e in oom["evidence"]) and oom["advice"].startswith("The state is made at the first step"))
opt = finding("optoom", "optimizer_state")
check("optoom: the state is what was made before the error, not what AdamW keeps",
      opt["summary"].startswith("AdamW had made 768.1 MiB of its state when its step ran out of "
                                "memory; the whole is 2 x the parameter bytes, 4096.5 MiB"))
snap = runs.rank("optoom", "snapshot")
check("optoom: the cut step is no complete step (as in the capture)",
      set(snap["indicators"]) == {"maximum_peak_allocated_mib"})
cap = finding("optoom", "oom", "capture")
check("optoom: the capture says where it came",
      "the last phase point before it: after_backward of step 0 (4162.0 MiB allocated); the error "
      "came in the phase after" in cap["evidence"])
text = runs.run("summary", runs.path("muon", "rank0.pickle.xz"))
check("muon: 9 iterations of Muon then AdamW stepped from one line",
      "2 optimizers step in turn (Muon at" in text and "9 iterations of 2 steps" in text)
opt = finding("muon", "optimizer_state")
check("muon: each optimizer's state, together one state a parameter",
      opt["summary"].startswith("Adam/AdamW and Muon keep 355.2 MiB of state together") and
      "Muon: 162.8 MiB, 1 x the 162.8 MiB of parameters it steps" in opt["evidence"] and
      any(e.endswith("each has one optimizer's state, as expected") for e in opt["evidence"]))
snap = runs.rank("muon", "snapshot")["indicators"]
check("muon: no growth between iterations", abs(snap["between_step_growth_mib"]) < 0.01)
opt = finding("lion", "optimizer_state")
check("lion: an optimizer memdiag does not know, said so",
      "Lion is not an optimizer memdiag knows: 1.00 x is about 1 buffer of each parameter's size"
      in opt["evidence"] and not opt["advice"].startswith("Expected"))
sys.exit(runs.done())
