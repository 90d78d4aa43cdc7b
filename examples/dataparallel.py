#!/usr/bin/env python3
"""More data-parallel training under torchrun (2 ranks, NCCL), for checking
memdiag's diagnosis on it. None leaks.

    memdiag run -- torchrun --nproc-per-node 2 examples/dataparallel.py --case ddpckpt

  ddpckpt      DDP with every encoder layer under activation checkpointing
               (torch.utils.checkpoint, use_reentrant=False)
  fsdpckpt     FSDP2 (fully_shard per layer) with activation checkpointing
  uneven       DDP where rank 1's batches are 4 x longer sequences than rank 0's
  unused       DDP(find_unused_parameters=True), a branch used on even steps only
"""
from __future__ import annotations

import argparse
import os
import sys

CASES = ("ddpckpt", "fsdpckpt", "uneven", "unused")


def parse() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--case", required=True, choices=CASES)
    p.add_argument("--steps", type=int, default=8)
    return p.parse_args()


ARGS = parse()

import torch  # noqa: E402
from torch import nn  # noqa: E402
from torch.nn.parallel import DistributedDataParallel as DDP  # noqa: E402
from torch.utils.checkpoint import checkpoint  # noqa: E402

VOCAB, WIDTH = 16384, 768


class LM(nn.Module):
    def __init__(self, ckpt: bool, branch: bool = False) -> None:
        super().__init__()
        self.embed = nn.Embedding(VOCAB, WIDTH)
        self.layers = nn.ModuleList(
            nn.TransformerEncoderLayer(WIDTH, 12, 4 * WIDTH, dropout=0.0, batch_first=True,
                                       norm_first=True) for _ in range(6))
        self.branch = nn.Linear(WIDTH, WIDTH) if branch else None
        self.head = nn.Linear(WIDTH, VOCAB, bias=False)
        self.ckpt = ckpt

    def forward(self, ids: torch.Tensor, use_branch: bool = False) -> torch.Tensor:
        x = self.embed(ids)
        for layer in self.layers:
            x = checkpoint(layer, x, use_reentrant=False) if self.ckpt else layer(x)
        if self.branch is not None and use_branch:
            x = x + self.branch(x)
        return self.head(x)


def wrap(a: argparse.Namespace, dev: torch.device) -> nn.Module:
    model = LM(a.case in ("ddpckpt", "fsdpckpt"), a.case == "unused").to(dev)
    if a.case == "fsdpckpt":
        from torch.distributed.fsdp import fully_shard
        for layer in model.layers:
            fully_shard(layer)
        return fully_shard(model)
    return DDP(model, device_ids=[dev.index], find_unused_parameters=a.case == "unused")


def train(a: argparse.Namespace, dev: torch.device, rank: int) -> None:
    model = wrap(a, dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    gen = torch.Generator(device=dev).manual_seed(rank)
    seq = 2048 if a.case == "uneven" and rank == 1 else 512
    for step in range(a.steps):
        ids = torch.randint(VOCAB, (8, seq), generator=gen, device=dev)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            kw = {"use_branch": step % 2 == 0} if a.case == "unused" else {}
            logits = model(ids, **kw)
            loss = nn.functional.cross_entropy(logits.flatten(0, 1).float(), ids.flatten())
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)


def main() -> int:
    if not torch.cuda.is_available() or int(os.environ.get("WORLD_SIZE", "1")) < 2:
        print("dataparallel.py: runs under torchrun with 2 ranks on GPUs", file=sys.stderr)
        return 2
    rank = int(os.environ["RANK"])
    dev = torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")))
    torch.cuda.set_device(dev)
    torch.distributed.init_process_group("nccl", device_id=dev)
    torch.manual_seed(0)
    train(ARGS, dev, rank)
    torch.cuda.synchronize()
    torch.distributed.destroy_process_group()
    print(f"dataparallel.py {ARGS.case}: rank {rank} done", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
