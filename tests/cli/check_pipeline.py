#!/usr/bin/env python3
"""Checks memdiag's diagnosis of work split over 2 GPUs (tests/data/pipeline,
captured on 2 x H200 by `SCRIPT=examples/pipeline.py sh tests/gpu/patterns.sh`
from examples/pipeline.py). A model split over cuda:0 and cuda:1 in one
process: the devices compared, cuda:1 (the vocabulary head) named as the
heavier with advice to move the split; each device's snapshot and capture
series labelled with its device. Keeping the second half's outputs leaks on
cuda:1 alone, from the snapshot and the capture. DDP contrastive learning with
keys gathered from every rank: logits made outside any module, no leak.
    python3 tests/cli/check_pipeline.py MEMDIAG DIR"""
import json
import sys

from runcheck import Runs

runs = Runs(sys.argv[1], sys.argv[2])
check, finding = runs.check, runs.finding
d = json.loads(runs.run("diagnose", "--json", runs.path("pipeleak")))
leaks = sorted((r["kind"], r["device"]) for r in d["ranks"]
               for f in r["findings"] if f["kind"] == "leak")
check(f"pipeleak: a leak on cuda:1 alone, from both files, found {leaks}",
      leaks == [("capture", 1), ("snapshot", 1)] and
      all(abs(f["bytes"] / 2**20 - 12.0) < 0.05 for r in d["ranks"] for f in r["findings"]
          if f["kind"] == "leak"))
d = json.loads(runs.run("diagnose", "--json", runs.path("pipe")))
check("pipe: no leak on either device",
      not any(f["kind"] == "leak" for r in d["ranks"] for f in r["findings"]))
imb = [f for f in d["findings"] if f["kind"] == "rank_imbalance"]
check("pipe: cuda:1 the heavier device, the split point advised",
      len(imb) == 1 and imb[0]["summary"].startswith("cuda:1 peaks 803.0 MiB") and
      "move layers from cuda:1 to cuda:0" in imb[0]["advice"])
text = runs.run("summary", runs.path("pipe"))
check("pipe: the capture's own series is cuda:1's, labelled so; the further one cuda:0",
      "== rank 0 (local 0) cuda:1  " in text and "== rank 0 cuda:0  " in text)
gather = runs.ranks("gather")
check("gather: two ranks' snapshots and captures, no leak",
      sorted(r["kind"] for r in gather) == ["capture"] * 2 + ["snapshot"] * 2 and
      not any(f["kind"] == "leak" for r in gather for f in r["findings"]))
for rank in gather:
    if rank["kind"] == "snapshot":
        lg = [f for f in rank["findings"] if f["kind"] == "logits"]
        check(f"gather rank {rank['rank']}: logits made outside any module",
              len(lg) == 1 and lg[0]["advice"].startswith("These logits are made outside any module"))
sys.exit(runs.done())
