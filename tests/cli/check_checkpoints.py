#!/usr/bin/env python3
"""Checks memdiag on checkpoints in data-parallel training (tests/data/checkpoints,
captured on 2 H200s by `SCRIPT=examples/checkpoints.py sh tests/gpu/patterns.sh`
from examples/checkpoints.py): FSDP2 gathering a full state dict every 3
steps stays under the training's peak, no imbalance, no leak; a checkpoint
only rank 0 loaded onto its GPU and kept is the imbalance, named at its
torch.load line with map_location="cpu" as the advice (it said "inputs" and
"rank-0 logging/evaluation").
    python3 tests/cli/check_checkpoints.py MEMDIAG DIR"""
import sys

from runcheck import Runs

runs = Runs(sys.argv[1], sys.argv[2])
check = runs.check
for case in ("fsdpsave", "rank0load"):
    d = runs.diagnosis(case)
    check(f"{case}: no leak", not [f for r in d["ranks"] for f in r["findings"]
                                   if f["kind"] == "leak"])
    check(f"{case}: two snapshots and two captures",
          sorted(r["kind"] for r in d["ranks"]) == ["capture", "capture", "snapshot", "snapshot"])
    if case == "fsdpsave":
        check("fsdpsave: no cross-rank finding", d["findings"] == [])
        continue
    imb = [f for f in d["findings"] if f["kind"] == "rank_imbalance"]
    check("rank0load: the imbalance is rank 0's checkpoint, at its torch.load line",
          len(imb) == 1 and imb[0]["summary"].startswith("rank 0 peaks 512.4 MiB") and
          "they part before step 0's forward: rank 0 holds 512.4 MiB more as it begins"
          in imb[0]["evidence"] and
          any(e.endswith("512.4 MiB of it made at /work/main/examples/checkpoints.py:88 rank0load")
              for e in imb[0]["evidence"]) and
          imb[0]["advice"].startswith("rank 0 keeps a checkpoint it loaded onto its GPU (torch.load "
                                      "at /work/main/examples/checkpoints.py:88 rank0load)"))
sys.exit(runs.done())
