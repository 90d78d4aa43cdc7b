#!/usr/bin/env python3
"""Checks the cross-device imbalance of nn.DataParallel (tests/data/runs/
trainer-dp: the HF Trainer on 2 H200s of one process): cuda:0 holds the
module, its gradients and the optimizer state, and the replicas' gathered
outputs; DistributedDataParallel is the advice (it was to move layers from
cuda:0 to cuda:1, a model split's remedy). A model split over two GPUs
(tests/data/runs/split) keeps the split's advice.
    python3 tests/cli/check_dpimbalance.py MEMDIAG RUNS"""
import json
import subprocess
import sys


def cross(memdiag, run):
    out = subprocess.run([memdiag, "diagnose", "--json", run], capture_output=True, text=True,
                         check=True).stdout
    return json.loads(out)["findings"]


memdiag, runs = sys.argv[1], sys.argv[2]
bad = 0
dp = cross(memdiag, f"{runs}/trainer-dp")
f = dp[0] if dp else {"advice": "", "evidence": []}
checks = {
    "DataParallel named as the cause, DDP advised":
        f["advice"].startswith("nn.DataParallel keeps the module") and
        "DistributedDataParallel" in f["advice"] and "move layers" not in f["advice"],
    "cuda:0's module, gradients and state at its peak":
        any(e.startswith("nn.DataParallel (its frames in the stacks): cuda:0 holds the module (at "
                         "its peak: parameters 170.8 MiB, gradients 170.8 MiB, optimizer state "
                         "345.6 MiB)")
            for e in f["evidence"]),
    "the gathered outputs":
        any(e.startswith("the replicas' outputs gathered onto cuda:0: 500.0 MiB live at its peak")
            for e in f["evidence"]),
    "a model split keeps its advice":
        any(x["advice"].startswith("One process spreads the model over these devices")
            for x in cross(memdiag, f"{runs}/split")),
}
for what, ok in checks.items():
    if not ok:
        bad += 1
        print(f"failed: {what}", file=sys.stderr)
sys.exit(1 if bad else 0)
