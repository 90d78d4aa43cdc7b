#!/usr/bin/env python3
"""Checks memdiag's diagnosis of more data-parallel training
(tests/data/dataparallel, captured on 2 x H200 by
`SCRIPT=examples/dataparallel.py sh tests/gpu/patterns.sh` from
examples/dataparallel.py). None leaks. Under DDP with activation
checkpointing rank 1 peaks higher once, in step 1 (gradients: DDP's buckets
rebuilt), said as a one-off with its category; rank 1's 4 x longer sequences
make a lasting imbalance, not called a one-off; FSDP2 with checkpointing and
DDP with unused parameters show no imbalance.
    python3 tests/cli/check_dataparallel.py MEMDIAG DIR"""
import json
import sys

from runcheck import Runs

runs = Runs(sys.argv[1], sys.argv[2])
check = runs.check
for case in ("ddpckpt", "fsdpckpt", "uneven", "unused"):
    d = json.loads(runs.run("diagnose", "--json", runs.path(case)))
    check(f"{case}: two ranks' snapshots and captures, no leak",
          sorted(r["kind"] for r in d["ranks"]) == ["capture"] * 2 + ["snapshot"] * 2 and
          not any(f["kind"] == "leak" for r in d["ranks"] for f in r["findings"]))
    imb = [f for f in d["findings"] if f["kind"] == "rank_imbalance"]
    if case == "ddpckpt":
        check("ddpckpt: a one-off imbalance in gradients",
              len(imb) == 1 and "rank 1 holds 258.2 MiB more gradients" in " ".join(imb[0]["evidence"])
              and any(e.startswith("a one-off") for e in imb[0]["evidence"]) and
              imb[0]["advice"].startswith("It happens once"))
    elif case == "uneven":
        check("uneven: a lasting imbalance, rank 1 above",
              len(imb) == 1 and imb[0]["summary"].startswith("rank 1 peaks 4220.8 MiB") and
              not any(e.startswith("a one-off") for e in imb[0]["evidence"]))
    else:
        check(f"{case}: no imbalance", not imb)
sys.exit(runs.done())
