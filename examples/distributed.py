#!/usr/bin/env python3
"""Data-parallel habits under torchrun (2 ranks, NCCL), for checking
memdiag's diagnosis on code it was not written against. None leaks.

    memdiag run -- torchrun --nproc-per-node 2 examples/distributed.py --case zero1

  zero1      ZeroRedundancyOptimizer over AdamW: each rank keeps the state of its
             half of the parameters
  bucketview DDP with gradient_as_bucket_view=True: the gradients are views into
             DDP's buckets, made once
  nosync     DDP, 4 micro-batches a step, the first three under no_sync()
"""
from __future__ import annotations

import argparse
import os
import sys

CASES = ("zero1", "bucketview", "nosync")


def parse() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--case", required=True, choices=CASES)
    p.add_argument("--steps", type=int, default=8)
    return p.parse_args()


ARGS = parse()

import contextlib  # noqa: E402

import torch  # noqa: E402
from torch import nn  # noqa: E402
from torch.nn.parallel import DistributedDataParallel as DDP  # noqa: E402

VOCAB, WIDTH = 16384, 768


def encoder_lm(dev: torch.device) -> nn.Module:
    layer = nn.TransformerEncoderLayer(WIDTH, 12, 4 * WIDTH, dropout=0.0, batch_first=True,
                                       norm_first=True)
    return nn.Sequential(nn.Embedding(VOCAB, WIDTH), nn.TransformerEncoder(layer, 6),
                         nn.Linear(WIDTH, VOCAB, bias=False)).to(dev)


def train(a: argparse.Namespace, dev: torch.device, rank: int) -> None:
    model = DDP(encoder_lm(dev), device_ids=[dev.index],
                gradient_as_bucket_view=a.case == "bucketview")
    if a.case == "zero1":
        from torch.distributed.optim import ZeroRedundancyOptimizer
        opt = ZeroRedundancyOptimizer(model.parameters(), optimizer_class=torch.optim.AdamW,
                                      lr=1e-4)
    else:
        opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    gen = torch.Generator(device=dev).manual_seed(rank)
    micro = 4 if a.case == "nosync" else 1
    for _ in range(a.steps):
        for m in range(micro):
            ids = torch.randint(VOCAB, (8 // micro, 512), generator=gen, device=dev)
            sync = model.no_sync() if m < micro - 1 else contextlib.nullcontext()
            with sync, torch.autocast("cuda", dtype=torch.bfloat16):
                logits = model(ids)
                loss = nn.functional.cross_entropy(logits.flatten(0, 1).float(), ids.flatten())
                (loss / micro).backward()
        opt.step()
        opt.zero_grad(set_to_none=a.case != "bucketview")


def main() -> int:
    if not torch.cuda.is_available() or int(os.environ.get("WORLD_SIZE", "1")) < 2:
        print("distributed.py: runs under torchrun with 2 ranks on GPUs", file=sys.stderr)
        return 2
    rank = int(os.environ["RANK"])
    dev = torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")))
    torch.cuda.set_device(dev)
    torch.distributed.init_process_group("nccl", device_id=dev)
    torch.manual_seed(0)
    train(ARGS, dev, rank)
    torch.cuda.synchronize()
    torch.distributed.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
