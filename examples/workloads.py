#!/usr/bin/env python3
"""Small real training workloads that exercise every memdiag diagnosis.

Each run trains a locally built model on synthetic GPU data (no downloads)
and writes, next to each other:
  OUT.pickle  the allocator snapshot (torch.cuda.memory._dump_snapshot)
  OUT.json    torch's own counters at each phase of each step, for checking
              memdiag's replay against the allocator's real statistics

Workloads (--case):
  alpha   SGD, no momentum                      (workspace only, clean)
  beta    AdamW                                 (optimizer state)
  gamma   SGD, backward(retain_graph=True) and keeps every loss (leak)
  keptloss SGD, keeps every loss but frees the graph's buffers (no GPU leak)
  ragged  AdamW, random sequence length per step (fragmentation)
  vocab   causal LM head over a large vocabulary (logits)
  oom     grows the batch until the allocator fails (oom)

--checkpointing recomputes each block in backward; --precision fp16 uses a
GradScaler. --compile default|reduce-overhead trains the torch.compile'd model (the
latter through CUDA graphs, whose memory is a private pool of the
allocator); --devices N splits the blocks over N GPUs of one process
(naive model parallelism: one snapshot, one trace per device). Under
torchrun --out names a pair of files per rank (OUT-rankN), and --fsdp 2
(or 1) shards the model with FSDP2 (FSDP1) instead of replicating it with DDP.

    python3 examples/workloads.py --case gamma --out runs/gamma

With --plain it records nothing itself: run it under `memdiag run`, on one
GPU or with torchrun (DDP over NCCL; --rank-zero-extra N gives rank 0 a
larger batch):

    memdiag run -- python3 examples/workloads.py --case gamma --plain
    memdiag run -- torchrun --nproc-per-node 2 examples/workloads.py --case beta --plain \
        --rank-zero-extra 6
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

MIB = 1 << 20


def parse() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--case", required=True,
                   choices=("alpha", "beta", "gamma", "keptloss", "ragged", "vocab", "oom"))
    p.add_argument("--out", type=Path, help="path stem for .pickle and .json (not with --plain)")
    p.add_argument("--plain", action="store_true",
                   help="train only: no own snapshot or JSON (for memdiag run)")
    p.add_argument("--time", action="store_true", help="print the mean step time")
    p.add_argument("--record", action="store_true",
                   help="with --plain: record torch's allocator history all the same "
                        "(torch's recorder alone, for overhead measurements)")
    p.add_argument("--rank-zero-extra", type=int, default=0,
                   help="DDP: extra samples in rank 0's local batch")
    p.add_argument("--force", action="store_true", help="replace existing outputs")
    p.add_argument("--stray", type=int, default=0,
                   help="DDP: ranks above 0 also keep this many MiB on cuda:0, rank 0's GPU "
                        "(as a checkpoint loaded without map_location does)")
    p.add_argument("--stray-context", action="store_true",
                   help="DDP: ranks above 0 ask cuda:0 for its free memory, which makes a CUDA "
                        "context there (nothing allocated)")
    p.add_argument("--preset", choices=("small", "medium"), default="small")
    p.add_argument("--batch", type=int, default=2)
    p.add_argument("--steps", type=int, default=6)
    p.add_argument("--precision", choices=("fp32", "bf16", "fp16"), default="fp32",
                   help="bf16/fp16 autocast; fp16 with a GradScaler")
    p.add_argument("--checkpointing", action="store_true",
                   help="activation checkpointing of every block (recomputed in backward)")
    p.add_argument("--stacks", choices=("python", "all"), default="python")
    p.add_argument("--max-entries", type=int, default=200_000,
                   help="allocator history ring buffer (small values overflow)")
    p.add_argument("--alloc-conf", default=None, help="PYTORCH_CUDA_ALLOC_CONF for this run")
    p.add_argument("--empty-cache", action="store_true",
                   help="torch.cuda.empty_cache() at the end of each step (with expandable "
                        "segments: free pages unmapped, segment_unmap events)")
    p.add_argument("--vocab", type=int, default=131072)
    p.add_argument("--memory-fraction", type=float, default=0.02,
                   help="oom case: fraction of the GPU the process may use")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--compile", choices=("off", "default", "reduce-overhead"), default="off",
                   help="torch.compile the model (reduce-overhead: CUDA graphs)")
    p.add_argument("--devices", type=int, default=1,
                   help="split the model's blocks over this many GPUs of one process")
    p.add_argument("--device", type=int, default=None,
                   help="put everything on this GPU by name, without set_device (the current "
                        "device stays cuda:0, which gets only a CUDA context)")
    p.add_argument("--fsdp", choices=("off", "1", "2"), default="off",
                   help="under torchrun: shard the model with FSDP (1: FullyShardedDataParallel, "
                        "2: fully_shard) instead of DDP")
    a = p.parse_args()
    if a.plain:
        return a
    if a.out is None:
        p.error("--out is required unless --plain")
    if int(os.environ.get("WORLD_SIZE", "1")) > 1:  # under torchrun: a file pair per rank
        a.out = a.out.parent / f"{a.out.name}-rank{os.environ.get('RANK', '0')}"
    for suffix in (".pickle", ".json"):
        f = a.out.with_suffix(suffix)
        if f.exists() and not a.force:
            p.error(f"{f} exists; pass --force to replace it")
    if not a.out.parent.is_dir():
        p.error(f"no such directory: {a.out.parent}")
    return a


ARGS = parse()
if ARGS.alloc_conf is not None:  # must precede CUDA initialisation
    os.environ["PYTORCH_CUDA_ALLOC_CONF"] = ARGS.alloc_conf

import torch  # noqa: E402
import torch.utils.checkpoint  # noqa: E402
from torch import nn  # noqa: E402

SIZES = {  # layers, hidden, heads, ffn, seq
    "small": (4, 384, 6, 1536, 256),
    "medium": (8, 512, 8, 2048, 512),
}


class Block(nn.Module):
    def __init__(self, hidden: int, heads: int, ffn: int) -> None:
        super().__init__()
        self.ln1 = nn.LayerNorm(hidden)
        self.attn = nn.MultiheadAttention(hidden, heads, bias=False, batch_first=True)
        self.ln2 = nn.LayerNorm(hidden)
        self.mlp = nn.Sequential(nn.Linear(hidden, ffn, bias=False), nn.GELU(),
                                 nn.Linear(ffn, hidden, bias=False))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.ln1(x)
        x = x + self.attn(h, h, h, need_weights=False)[0]
        return x + self.mlp(self.ln2(x))


class Model(nn.Module):
    """Token embedding, transformer blocks, and either a small classifier
    on the first token or a full language-model head over the vocabulary."""

    def __init__(self, vocab: int, hidden: int, heads: int, ffn: int, layers: int,
                 max_seq: int, lm_head: bool) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, hidden)
        self.pos = nn.Parameter(torch.zeros(max_seq, hidden))
        self.blocks = nn.ModuleList(Block(hidden, heads, ffn) for _ in range(layers))
        self.norm = nn.LayerNorm(hidden)
        self.lm_head = lm_head
        self.out = nn.Linear(hidden, vocab if lm_head else 16, bias=False)
        self.checkpointing = False

    def place(self, devs: list) -> "Model":
        """Embedding on the first device, the blocks spread in order, the
        head on the last (one device: all of it there)."""
        self.embed.to(devs[0])
        self.pos.data = self.pos.data.to(devs[0])
        for i, b in enumerate(self.blocks):
            b.to(devs[i * len(devs) // len(self.blocks)])
        self.norm.to(devs[-1])
        self.out.to(devs[-1])
        return self

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        x = self.embed(ids) + self.pos[: ids.shape[1]]
        for b in self.blocks:
            x = x.to(b.ln1.weight.device)
            if self.checkpointing:  # keep the block's input, recompute the rest in backward
                x = torch.utils.checkpoint.checkpoint(b, x, use_reentrant=False)
            else:
                x = b(x)
        x = self.norm(x.to(self.norm.weight.device))
        return self.out(x if self.lm_head else x[:, 0])


PLAIN = False
DEVICES: list = []  # the GPUs this process trains on
STRAY = None  # --stray: a tensor on another rank's GPU


def counters(step: int, phase: str) -> list:
    """torch's counters on each device this process uses, one sample each."""
    if PLAIN:  # under memdiag run: no samples of our own, no device syncs
        return []
    out = []
    for d in DEVICES:
        torch.cuda.synchronize(d)
        free, total = torch.cuda.mem_get_info(d)
        out.append({"step": step, "phase": phase, "device": d.index,
                    "allocated_mib": torch.cuda.memory_allocated(d) / MIB,
                    "reserved_mib": torch.cuda.memory_reserved(d) / MIB,
                    "peak_allocated_mib": torch.cuda.max_memory_allocated(d) / MIB,
                    "device_used_mib": (total - free) / MIB})
    return out


def reset_peaks() -> None:
    for d in DEVICES:
        torch.cuda.reset_peak_memory_stats(d)


def loss_of(model, ids, targets, case, precision):
    dtype = torch.float16 if precision == "fp16" else torch.bfloat16
    with torch.autocast("cuda", dtype=dtype, enabled=precision != "fp32"):
        logits = model(ids)
    if case == "vocab":  # shifted next-token loss on fp32 logits, the transformers way
        logits = logits.float()
        return nn.functional.cross_entropy(logits[:, :-1].reshape(-1, logits.shape[-1]),
                                           ids[:, 1:].reshape(-1).to(logits.device))
    return nn.functional.cross_entropy(logits.float(), targets.to(logits.device))


def train(a: argparse.Namespace, samples: list, dev: torch.device, rank: int = 0,
          world: int = 1) -> dict:
    layers, hidden, heads, ffn, seq = SIZES[a.preset]
    vocab = a.vocab if a.case == "vocab" else 4096
    max_seq = seq * 4 if a.case == "ragged" else seq
    model = Model(vocab, hidden, heads, ffn, layers, max_seq, a.case == "vocab").place(DEVICES)
    model.checkpointing = a.checkpointing
    params = sum(p.numel() for p in model.parameters())
    if world > 1 and a.fsdp == "2":  # each block a unit, then the rest
        from torch.distributed.fsdp import fully_shard
        for b in model.blocks:
            fully_shard(b)
        fully_shard(model)
    elif world > 1 and a.fsdp == "1":
        from torch.distributed.fsdp import FullyShardedDataParallel, ShardingStrategy
        from torch.distributed.fsdp.wrap import ModuleWrapPolicy
        model = FullyShardedDataParallel(model, auto_wrap_policy=ModuleWrapPolicy({Block}),
                                         sharding_strategy=ShardingStrategy.FULL_SHARD,
                                         device_id=dev, use_orig_params=True)
    elif world > 1:
        model = nn.parallel.DistributedDataParallel(model, device_ids=[dev.index],
                                                    gradient_as_bucket_view=True)
    if a.compile != "off":
        model = torch.compile(model, mode=a.compile)
    global STRAY
    if a.stray and rank > 0:  # kept to the end, on another rank's GPU
        STRAY = torch.zeros(a.stray * MIB // 4, device="cuda:0")
    if a.stray_context and rank > 0:  # "how much is free on the GPU?", asked of cuda:0
        print(f"rank {rank}: cuda:0 free {torch.cuda.mem_get_info(0)[0] / MIB:.0f} MiB", flush=True)
    reset_peaks()
    samples += counters(-1, "after_model")
    opt = (torch.optim.AdamW(model.parameters(), lr=1e-4) if a.case in ("beta", "ragged")
           else torch.optim.SGD(model.parameters(), lr=1e-3))
    gen = torch.Generator(device=dev).manual_seed(a.seed + rank)
    batch = a.batch + (a.rank_zero_extra if rank == 0 else 0)
    ids = torch.randint(vocab, (batch, seq), generator=gen, device=dev)
    targets = torch.randint(16, (batch,), generator=gen, device=dev)
    samples += counters(-1, "after_input")
    scaler = torch.amp.GradScaler("cuda") if a.precision == "fp16" else None
    kept = []
    times = []
    for step in range(a.steps):
        t0 = torch.cuda.Event(enable_timing=True) if a.time else None
        if t0 is not None:
            t0.record()
        if a.case == "ragged":  # a new sequence length every step
            n = int(torch.randint(seq // 4, max_seq, (1,), generator=gen, device=dev))
            ids = torch.randint(vocab, (batch, n), generator=gen, device=dev)
        if a.case == "oom":
            batch *= 2
            ids = torch.randint(vocab, (batch, seq), generator=gen, device=dev)
            targets = torch.randint(16, (batch,), generator=gen, device=dev)
        reset_peaks()
        if a.compile == "reduce-overhead":  # a new step: graph outputs may be overwritten
            torch.compiler.cudagraph_mark_step_begin()
        loss = loss_of(model, ids, targets, a.case, a.precision)
        samples += counters(step, "after_forward")
        # gamma's bug: the retained graph's saved tensors stay on the GPU
        # because each loss is kept; keptloss keeps the loss too, but its
        # graph's buffers were freed by backward, so no GPU memory leaks
        (scaler.scale(loss) if scaler else loss).backward(retain_graph=a.case == "gamma")
        samples += counters(step, "after_backward")
        if scaler:  # unscales, skips the step on inf/NaN gradients, adapts the scale
            scaler.step(opt)
            scaler.update()
        else:
            opt.step()
        samples += counters(step, "after_optimizer_step")
        if a.case in ("gamma", "keptloss"):
            kept.append(loss)
        opt.zero_grad(set_to_none=True)
        samples += counters(step, "after_clear_gradients")
        if a.empty_cache:  # after the step's last sample: the next step's show it
            torch.cuda.empty_cache()
        if t0 is not None:
            t1 = torch.cuda.Event(enable_timing=True)
            t1.record()
            t1.synchronize()
            times.append(t0.elapsed_time(t1))
    if times:
        warm = times[len(times) // 5:] or times
        print(f"step_ms {sum(warm) / len(warm):.3f} over {len(warm)} steps", flush=True)
    return {"parameter_count": params, "parameters_fp32_mib": 4 * params / MIB,
            "final_loss": float(loss.detach())}


def main() -> int:
    a = ARGS
    if not torch.cuda.is_available():
        print("workloads.py: CUDA is not available", file=sys.stderr)
        return 2
    global PLAIN
    PLAIN = a.plain
    rank, world = int(os.environ.get("RANK", "0")), int(os.environ.get("WORLD_SIZE", "1"))
    if a.device is not None:  # named in each tensor; cuda:0 stays current
        dev = torch.device("cuda", a.device)
    else:
        dev = torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")))
        torch.cuda.set_device(dev)
    global DEVICES
    if a.devices > 1 and (world > 1 or a.devices > torch.cuda.device_count()):
        print(f"workloads.py: --devices {a.devices} needs one process and that many GPUs",
              file=sys.stderr)
        return 2
    DEVICES = [dev] if a.devices == 1 else [torch.device("cuda", i) for i in range(a.devices)]
    if world > 1:
        torch.distributed.init_process_group("nccl", device_id=dev)
    if a.precision == "bf16":  # every rank must support it, or none uses it
        ok = torch.tensor(int(torch.cuda.is_bf16_supported()), device=dev)
        if world > 1:
            torch.distributed.all_reduce(ok, op=torch.distributed.ReduceOp.MIN)
        if not ok.item():
            print("workloads.py: bf16 requested but a GPU lacks it", file=sys.stderr)
            return 2
    torch.manual_seed(a.seed)
    if a.case == "oom":
        torch.cuda.set_per_process_memory_fraction(a.memory_fraction, dev)
        a.steps = 64
    if not a.plain or a.record:
        torch.cuda.memory._record_memory_history(max_entries=a.max_entries, stacks=a.stacks)
    samples: list = []
    result = {"case": a.case, "preset": a.preset, "batch": a.batch, "steps": a.steps,
              "precision": a.precision, "stacks": a.stacks, "max_entries": a.max_entries,
              "compile": a.compile, "devices": [d.index for d in DEVICES],
              "alloc_conf": os.environ.get("PYTORCH_CUDA_ALLOC_CONF", ""),
              "torch": torch.__version__, "gpu": torch.cuda.get_device_name(dev)}
    status = 0
    try:
        result.update(train(a, samples, dev, rank, world))
    except torch.cuda.OutOfMemoryError as e:
        result["oom"] = str(e).splitlines()[0]
        status = 3
    if world > 1:
        torch.distributed.destroy_process_group()
    if a.plain:
        return status
    for d in DEVICES:
        torch.cuda.synchronize(d)
    result["end"] = {"allocated": torch.cuda.memory_allocated(dev),
                     "reserved": torch.cuda.memory_reserved(dev),
                     "max_allocated": torch.cuda.max_memory_allocated(dev),
                     "max_reserved": torch.cuda.max_memory_reserved(dev)}
    result["samples"] = samples
    torch.cuda.memory._dump_snapshot(str(a.out.with_suffix(".pickle")))
    torch.cuda.memory._record_memory_history(enabled=None)
    a.out.with_suffix(".json").write_text(json.dumps(result, indent=1) + "\n")
    print(f"{a.case}: {a.out}.pickle ({'oom' if status else 'ok'})")
    return status


if __name__ == "__main__":
    raise SystemExit(main())
