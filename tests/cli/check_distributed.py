#!/usr/bin/env python3
"""Checks memdiag's diagnosis of data-parallel habits on 2 GPUs
(tests/data/distributed, captured on 2 x H200 by
`SCRIPT=examples/distributed.py sh tests/gpu/patterns.sh` from
examples/distributed.py). No leaks. DDP's gradient buckets are gradients
(with gradient_as_bucket_view they are the gradients), not activations;
ZeroRedundancyOptimizer keeps half of AdamW's state on each of 2 ranks and
says so, its step counted once by the capture (the AdamW it wraps steps
inside it); no_sync accumulation's steps are the optimizer's; tensor
parallelism's DTensor shards are parameters, the state 2 x them; FSDP2 with
bf16 mixed precision keeps 2 x its fp32 shards, and with CPU offload none
of the state or the weights on the GPU.
    python3 tests/cli/check_distributed.py MEMDIAG DIR"""
import sys

from runcheck import Runs

runs = Runs(sys.argv[1], sys.argv[2])
check, run = runs.check, runs.run
for case in ("zero1", "bucketview", "nosync"):
    ranks = runs.ranks(case)
    check(f"{case}: two ranks, each a snapshot and a capture",
          sorted((r["rank"], r["kind"]) for r in ranks) ==
          [(0, "capture"), (0, "snapshot"), (1, "capture"), (1, "snapshot")])
    check(f"{case}: no leak", not [f for r in ranks for f in r["findings"] if f["kind"] == "leak"])
    for r in ranks:
        cats = r.get("peak", {}).get("by_category_mib", {})
        if r["kind"] == "snapshot" and case != "nosync":  # the one forward's activations only
            check(f"{case} rank {r['rank']}: DDP's buckets (258.2 MiB; twice where the peak "
                  f"came as they were rebuilt) are gradients at the peak, not activations",
                  min(abs(cats["gradients"] - 258.2), abs(cats["gradients"] - 516.5)) < 0.1 and
                  abs(cats["activations"] - 1005.5) < 0.5)
        elif r["kind"] == "snapshot":  # buckets and the gradients accumulated beside them
            check(f"nosync rank {r['rank']}: gradients at the peak are the buckets and the "
                  f"accumulated gradients", abs(cats["gradients"] - 522.2) < 0.1)
for r in runs.ranks("zero1"):
    if r["kind"] != "snapshot":
        continue
    opt = [f for f in r["findings"] if f["kind"] == "optimizer_state"]
    check(f"zero1 rank {r['rank']}: this rank's share of AdamW's state, and ZeRO in the advice",
          len(opt) == 1 and opt[0]["summary"].startswith(
              "ZeroRedundancyOptimizer keeps 261.4 MiB of state, 1.00 x") and
          any("this rank keeps its share, 1.00 x, about 1/2 of it" in e for e in opt[0]["evidence"])
          and "ZeroRedundancyOptimizer already shards it" in opt[0]["advice"])
for r in runs.ranks("tp"):
    if r["kind"] != "snapshot":
        continue
    opt = [f for f in r["findings"] if f["kind"] == "optimizer_state"]
    check(f"tp rank {r['rank']}: DTensor shards are parameters (they were inputs: 32774 x), "
          f"the state 2 x them, known to be sharded",
          abs(r["peak"]["by_category_mib"]["parameters"] - 1024.2) < 0.1 and len(opt) == 1 and
          "2.00 x the parameter bytes" in opt[0]["summary"] and
          "tensor parallelism already shards it" in opt[0]["advice"])
check("tp: no leak", not [f for r in runs.ranks("tp") for f in r["findings"] if f["kind"] == "leak"])
for case in ("fsdpmp", "fsdpoffload"):
    ranks = runs.ranks(case)
    check(f"{case}: no leak", not [f for r in ranks for f in r["findings"] if f["kind"] == "leak"])
    for r in ranks:
        if r["kind"] != "snapshot":
            continue
        opt = [f for f in r["findings"] if f["kind"] == "optimizer_state"]
        cats = r["peak"]["by_category_mib"]
        if case == "fsdpmp":  # bf16 gathers for compute, fp32 shards and state
            check(f"fsdpmp rank {r['rank']}: the state 2 x this rank's fp32 shards, known sharded",
                  len(opt) == 1 and "2.00 x the parameter bytes" in opt[0]["summary"] and
                  "already shards it" in opt[0]["advice"] and
                  abs(cats["parameters"] - 256.2) < 0.1)
        else:  # parameters, gradients and state on the CPU
            check(f"fsdpoffload rank {r['rank']}: nothing of the state or the weights on the GPU",
                  not opt and cats["parameters"] == 0 and cats["optimizer_state"] == 0)
text = run("summary", runs.path("zero1"))
check("zero1: the capture counts the wrapper's step once",
      text.count("capture     complete, status 0, 8 optimizer steps") == 2)
check("nosync: 8 steps of 4 micro-batches", "steps       8, found from optimizer annotations" in
      run("summary", runs.path("nosync", "rank0.pickle.xz")))
sys.exit(runs.done())
