#!/usr/bin/env python3
"""Checks memdiag on memory a job's set-up decides (tests/data/launch,
captured on an H200 by `SCRIPT=examples/launch.py sh tests/gpu/patterns.sh`
from examples/launch.py): torch.compile's max-autotune (its first step
benchmarks kernels; the run was cut by the script's timeout during exit,
its files complete); 40 GiB allocated and freed before training to hold
the GPU, said as the set-up's peak beside the training's own, its memory
a temporary, the cache that keeps it noted; two DDP ranks over gloo that
never chose a device, both on cuda:0, named as ranks sharing one GPU. None
leaks.
    python3 tests/cli/check_launch.py MEMDIAG DIR"""
import sys

from runcheck import Runs

runs = Runs(sys.argv[1], sys.argv[2])
check, finding = runs.check, runs.finding
runs.leaks({"autotune": None, "prealloc": None})

snap = runs.rank("prealloc", "snapshot")
peak = snap["peak"]
check("prealloc: the peak is the set-up's, the training's own beside it",
      peak["phase"] == "setup" and abs(peak["training_peak_mib"] - 2358.1) < 0.1 and
      abs(peak["allocated_mib"] - 40960.0) < 0.1)
check("prealloc: the freed 40 GiB is a temporary, no input",
      abs(peak["by_category_mib"]["temporaries"] - 40960.0) < 0.1 and
      peak["by_category_mib"]["inputs"] == 0)
text = runs.run("summary", runs.path("prealloc", "rank0.pickle.xz"))
check("prealloc: the text says set-up, and that the cache kept it",
      "(before the first forward pass: set-up; the training's own peak is 2358.1 MiB)" in text and
      "note        the cache kept what the set-up freed: 40964.0 MiB reserved to the end" in text)

d = runs.diagnosis("samegpu")
check("samegpu: no leak", not [f for r in d["ranks"] for f in r["findings"] if f["kind"] == "leak"])
shared = [f for f in d["findings"] if "run on one GPU" in f["summary"]]
check("samegpu: ranks 0 and 1 named on one GPU, with set_device as the advice",
      len(shared) == 1 and shared[0]["kind"] == "rank_imbalance" and
      shared[0]["summary"].startswith("ranks 0 and 1 run on one GPU, cuda:0 of vm") and
      "rank 1's local rank is 1, yet its process runs on cuda:0" in shared[0]["evidence"] and
      shared[0]["advice"].startswith("Give each rank its own GPU: torch.cuda.set_device"))
sibling = [f for r in d["ranks"] if r["kind"] == "capture" for f in r["findings"]
           if f["kind"] == "non_framework"]
check("samegpu: each rank's own finding names the other's process",
      len(sibling) == 2 and all("of it by another process started by this one's parent" in
                                f["summary"] for f in sibling))
sys.exit(runs.done())
