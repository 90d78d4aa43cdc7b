#!/usr/bin/env python3
"""Checks memdiag's diagnosis of training part of a model
(tests/data/finetune, captured on an H200 by
`SCRIPT=examples/finetune.py sh tests/gpu/patterns.sh` from
examples/finetune.py), no leaks. A frozen backbone under no_grad: AdamW's
state is 2 x the trained head's parameters, the peak a pass freed before
the backward. Sparse embeddings with SparseAdam beside AdamW: two
optimizers step back to back, their gradients cleared after both; both
files count iterations of 2 steps and agree (the capture's indicators had
no first iteration's end; the snapshot's ended it at the first zero_grad).
    python3 tests/cli/check_finetune.py MEMDIAG DIR"""
import sys

from runcheck import Runs

runs = Runs(sys.argv[1], sys.argv[2])
check, finding, rank = runs.check, runs.finding, runs.rank
runs.leaks({"frozen": None, "sparseemb": None})
opt = finding("frozen", "optimizer_state")
check("frozen: the state is 2 x the trained head's parameters",
      "2.00 x the trained parameter bytes" in opt["summary"] and
      any("224.1 MiB, of which 13.8 MiB get gradients" in e for e in opt["evidence"]))
check("frozen: the peak is the backbone's no_grad pass",
      "(step 1, forward: in a pass all freed before the backward" in
      runs.run("summary", runs.path("frozen", "rank0.pickle.xz")))
snap, cap = rank("sparseemb", "snapshot"), rank("sparseemb", "capture")
check("sparseemb: 2 optimizers in turn, iterations of 2 steps",
      len(snap.get("optimizers_in_turn", [])) == 2 and len(snap["steps"]) == 16)
check("sparseemb: the capture's indicators, from the first iteration's end, as the snapshot's",
      "first_step_persistent_change_mib" in cap["indicators"] and
      abs(cap["indicators"]["first_step_persistent_change_mib"] -
          snap["indicators"]["first_step_persistent_change_mib"]) < 0.01)
opt = finding("sparseemb", "optimizer_state")
check("sparseemb: SparseAdam's state, 2 x the embedding",
      opt["summary"].startswith("SparseAdam keeps 2050.0 MiB of state, 2.00 x"))
sys.exit(runs.done())
