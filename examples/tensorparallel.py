#!/usr/bin/env python3
"""Tensor parallelism under torchrun (2 ranks, NCCL), for checking
memdiag's diagnosis on code it was not written against:

    memdiag run -- torchrun --nproc-per-node 2 examples/tensorparallel.py --case tp

  tp    an MLP stack split column-wise then row-wise over 2 GPUs
        (torch.distributed.tensor.parallel.parallelize_module): each rank holds half
        of every weight as a DTensor shard, AdamW over the shards
"""
from __future__ import annotations

import argparse
import os
import sys

import torch
from torch import nn


def parse() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--case", required=True, choices=("tp",))
    p.add_argument("--steps", type=int, default=8)
    return p.parse_args()


class Block(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.up, self.down = nn.Linear(4096, 16384), nn.Linear(16384, 4096)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.down(nn.functional.gelu(self.up(x)))


def main() -> int:
    a = parse()
    if not torch.cuda.is_available() or int(os.environ.get("WORLD_SIZE", "1")) < 2:
        print("tensorparallel.py: runs under torchrun with 2 ranks on GPUs", file=sys.stderr)
        return 2
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor.parallel import (ColwiseParallel, RowwiseParallel,
                                                   parallelize_module)
    local = int(os.environ.get("LOCAL_RANK", "0"))
    torch.cuda.set_device(local)
    mesh = init_device_mesh("cuda", (int(os.environ["WORLD_SIZE"]),))
    torch.manual_seed(0)
    model = nn.Sequential(*[Block() for _ in range(4)]).cuda()
    for block in model:
        parallelize_module(block, mesh, {"up": ColwiseParallel(), "down": RowwiseParallel()})
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    gen = torch.Generator(device="cuda").manual_seed(0)  # the same batch on both ranks
    for _ in range(a.steps):
        x = torch.randn(8, 512, 4096, generator=gen, device="cuda")
        model(x).pow(2).mean().backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
    torch.cuda.synchronize()
    torch.distributed.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
