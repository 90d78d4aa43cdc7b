#!/usr/bin/env python3
"""Checkpoints in data-parallel training on 2 GPUs, for checking memdiag's
peak and rank_imbalance findings (none leaks). Run a case under `memdiag run`
with torchrun:

    memdiag run -- torchrun --nproc-per-node 2 examples/checkpoints.py --case fsdpsave

  fsdpsave   FSDP2 training that saves a full state dict every 3 steps
             (get_model_state_dict(full_state_dict=True), kept on the GPU until saved)
  rank0load  DDP resumed from a checkpoint that rank 0 loads onto its GPU
             (map_location="cuda") and keeps referenced, the others getting the
             weights by DDP's broadcast
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile

CASES = ("fsdpsave", "rank0load")


def parse() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--case", required=True, choices=CASES)
    p.add_argument("--steps", type=int, default=9)
    return p.parse_args()


ARGS = parse()

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
from torch import nn  # noqa: E402

VOCAB, WIDTH = 16384, 1024


def encoder_lm() -> nn.Module:
    layer = nn.TransformerEncoderLayer(WIDTH, 16, 4 * WIDTH, dropout=0.0, batch_first=True,
                                       norm_first=True)
    return nn.Sequential(nn.Embedding(VOCAB, WIDTH), nn.TransformerEncoder(layer, 8),
                         nn.Linear(WIDTH, VOCAB, bias=False))


def train(model: nn.Module, dev: torch.device, steps: int, every=None) -> None:
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    gen = torch.Generator(device=dev).manual_seed(dist.get_rank())
    for step in range(steps):
        ids = torch.randint(VOCAB, (4, 512), generator=gen, device=dev)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            logits = model(ids)
        loss = nn.functional.cross_entropy(logits.flatten(0, 1).float(), ids.flatten())
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        if every:
            every(step)


def fsdpsave(a: argparse.Namespace, dev: torch.device) -> None:
    from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict
    from torch.distributed.fsdp import fully_shard
    model = encoder_lm().to(dev)
    for layer in model[1].layers:
        fully_shard(layer)
    fully_shard(model)
    out = tempfile.mkdtemp()

    def save(step: int) -> None:
        if step % 3 == 2:
            full = get_model_state_dict(model, options=StateDictOptions(full_state_dict=True))
            if dist.get_rank() == 0:
                torch.save(full, os.path.join(out, f"step{step}.pt"))
            del full
    train(model, dev, a.steps, save)


def rank0load(a: argparse.Namespace, dev: torch.device) -> None:
    path = os.path.join(tempfile.gettempdir(), "checkpoints-rank0load.pt")
    model = encoder_lm().to(dev)
    if dist.get_rank() == 0:
        torch.save(model.state_dict(), path)
    dist.barrier()
    ckpt = None
    if dist.get_rank() == 0:  # the usual resume: rank 0 reads, DDP broadcasts
        ckpt = torch.load(path, map_location="cuda")
        model.load_state_dict(ckpt)
    ddp = nn.parallel.DistributedDataParallel(model, device_ids=[dev.index])
    train(ddp, dev, a.steps)
    del ckpt


def main() -> int:
    if not torch.cuda.is_available():
        print("checkpoints.py: CUDA is not available", file=sys.stderr)
        return 2
    local = int(os.environ.get("LOCAL_RANK", "0"))
    dev = torch.device("cuda", local)
    torch.cuda.set_device(dev)
    dist.init_process_group("nccl", device_id=dev)
    torch.manual_seed(0)
    {"fsdpsave": fsdpsave, "rank0load": rank0load}[ARGS.case](ARGS, dev)
    torch.cuda.synchronize()
    dist.destroy_process_group()
    print(f"checkpoints.py {ARGS.case} (rank {dist.get_rank() if dist.is_initialized() else local}):"
          " done", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
