#!/usr/bin/env python3
"""Steady-state steps under data parallelism, per rank, for `memdiag predict`
(issue 5: DDP with and without gradient_as_bucket_view, ZeRO-1 through
torch's ZeroRedundancyOptimizer, FSDP2's fully_shard per decoder layer with
and without resharding after forward: ZeRO-3 and ZeRO-2). Run on 2 GPUs:

    SNAPSHOTS=dir torchrun --nproc-per-node 2 bench/predict_dist.py > dist.jsonl

CASESET=more runs the second set (DDP bucket sizes, ZeRO-1 with Adam and
SGD with momentum, FSDP with checkpointing; "set": "more").
Rows carry "set": "fit" (the cases the model is built from) or "final"
(other architectures, shapes, optimizers: compared only once the model is
done). With SNAPSHOTS set, the first two fit cases of each mode also write an
allocator snapshot per rank there (history of its three steps).

One JSON object per rank and case (rank 0 prints all): the same step as
bench/predict_grid.py (third step, peak reset at its start, labels = ids,
the output kept until after optimizer.step()).
"""
import gc
import json
import os
import sys
import time

import torch
import torch.distributed as dist
import transformers

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import predict_grid as g  # noqa: E402

# The measured step: the eighth. At the third, about half of the DDP and
# ZeRO-1 ranks still held a second gradient-sized buffer (2026-11-29,
# 2 x H200); every step's (start, peak to backward, peak) is kept.
STEPS = int(os.environ.get("STEPS", "8"))
MODES = ["ddp", "ddp-bucket-view", "zero1", "fsdp", "fsdp-no-reshard"]
CASES = [("fit", arch, b, s, opt, prec) for arch in ("llama", "qwen2", "gpt2")
         for (b, s) in ((2, 1024), (8, 256))
         for opt, prec in (("adamw", "fp32"), ("adamw", "bf16-autocast"), ("sgd", "bf16-pure"))]
FINAL_COMBOS = [("adam", "fp32"), ("sgd-momentum", "bf16-autocast"), ("adamw", "bf16-pure"),
                ("adamw", "bf16-autocast")]
CASES += [("final", arch, b, s) + FINAL_COMBOS[(i + j) % 4]
          for i, arch in enumerate(("mistral", "qwen3", "phi3", "gemma"))
          for j, (b, s) in enumerate(((4, 512), (1, 2048)))]
# (case, mode, options) triples: every case in every mode ...
RUNS = [(case, mode, {}) for case in CASES for mode in MODES]
# ... and, with CASESET=more, what the first run left out: DDP's bucket
# size, ZeRO-1 with Adam and SGD with momentum, FSDP with checkpointing.
MORE = [(("more", arch, 4, 512, opt, prec), mode, opts)
        for arch in ("llama", "qwen2", "mistral", "gemma")
        for opt, prec, mode, opts in (
            ("adamw", "fp32", "ddp", {"bucket_mb": 5}),
            ("adamw", "bf16-autocast", "ddp-bucket-view", {"bucket_mb": 100}),
            ("adam", "fp32", "zero1", {}),
            ("sgd-momentum", "bf16-autocast", "zero1", {}),
            ("adamw", "bf16-autocast", "fsdp", {"gc": "default"}),
            ("adamw", "fp32", "fsdp-no-reshard", {"gc": "default"}),
            ("sgd", "bf16-pure", "fsdp", {"gc": "default"}))]


def wrap(model, mode, opt_name, dev, opts):
    if opts.get("gc"):
        model = g.with_options(model, {"gc": opts["gc"]})
    if mode.startswith("ddp"):
        model = torch.nn.parallel.DistributedDataParallel(
            model, device_ids=[dev.index], gradient_as_bucket_view=mode == "ddp-bucket-view",
            bucket_cap_mb=opts.get("bucket_mb", 25))
        return model, g.make_optimizer(opt_name, model.parameters())
    if mode == "zero1":
        from torch.distributed.optim import ZeroRedundancyOptimizer
        model = torch.nn.parallel.DistributedDataParallel(model, device_ids=[dev.index])
        cls, kw = g.OPTIMIZERS[opt_name]
        return model, ZeroRedundancyOptimizer(model.parameters(), optimizer_class=cls, **kw)
    from torch.distributed.fsdp import fully_shard
    reshard = mode == "fsdp"
    for layer in model.model.layers if hasattr(model, "model") else model.transformer.h:
        fully_shard(layer, reshard_after_forward=reshard)
    fully_shard(model, reshard_after_forward=reshard)
    return model, g.make_optimizer(opt_name, model.parameters())


def one(which, arch, batch, seq, opt_name, prec, mode, opts, dev, snapshot=None):
    cfg = g.build(arch, g.ARCHS if arch in ("llama", "qwen2", "gpt2") else g.HELDOUT)
    torch.manual_seed(0)
    with dev:  # initialised on the GPU: seconds saved per case
        model = transformers.AutoModelForCausalLM.from_config(cfg)
    if prec == "bf16-pure":
        model = model.to(torch.bfloat16)
    model = model.train()
    params = sum(p.numel() for p in model.parameters())
    model, opt = wrap(model, mode, opt_name, dev, opts)
    ids = torch.randint(cfg.vocab_size, (batch, seq), device=dev)
    if snapshot:
        torch.cuda.memory._record_memory_history(max_entries=200000)
    trace = []
    before, to_backward, peak = g.steady_steps(model, opt, ids, prec, STEPS, trace)
    if snapshot:
        torch.cuda.memory._dump_snapshot(snapshot)
        torch.cuda.memory._record_memory_history(enabled=None)
    row = {"set": which, "arch": arch, "batch": batch, "seq": seq, "optimizer": opt_name, "precision": prec,
           "options": dict(opts, parallel=mode, world=dist.get_world_size()), "steps_run": STEPS,
           "rank": dist.get_rank(), "params": params,
           "peak_allocated": peak, "steps": trace,
           "allocated_before_step": before, "peak_to_backward": to_backward, "max_reserved": torch.cuda.max_memory_reserved(),
           "config": cfg.to_dict()}
    del model, opt, ids
    gc.collect()
    torch.cuda.empty_cache()
    return row


def main():
    dist.init_process_group("nccl")
    rank = dist.get_rank()
    dev = torch.device("cuda", int(os.environ.get("LOCAL_RANK", 0)))
    torch.cuda.set_device(dev)
    budget = float(os.environ.get("BUDGET", "400"))
    snapdir = os.environ.get("SNAPSHOTS")
    t0 = time.time()
    runs = MORE if os.environ.get("CASESET") == "more" else RUNS
    for k, (case, mode, opts) in enumerate(runs):
        # every rank stops together (a lone rank would hang the collectives)
        late = torch.tensor([float(time.time() - t0 > budget)], device=dev)
        dist.all_reduce(late, op=dist.ReduceOp.MAX)
        if late.item():
            break
        try:
            snap = (f"{snapdir}/{mode}-{k // len(MODES)}-{case[1]}-r{rank}.pickle"
                    if snapdir and runs is RUNS and k < 2 * len(MODES) else None)
            row = one(*case, mode, opts, dev, snap)
        except Exception as e:  # a failing case is data too
            row = {"case": list(case), "mode": mode, "rank": rank,
                   "error": f"{type(e).__name__}: {e}"[:300]}
            gc.collect()
            torch.cuda.empty_cache()
        rows = [None] * dist.get_world_size()
        dist.all_gather_object(rows, row)
        if rank == 0:
            for r in rows:
                print(json.dumps(r), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
