#!/usr/bin/env python3
"""FSDP2 (fully_shard) settings under torchrun (2 ranks, NCCL), for checking
memdiag's diagnosis on code it was not written against. Neither leaks.

    memdiag run -- torchrun --nproc-per-node 2 examples/fsdp.py --case fsdpmp

  fsdpmp       bf16 mixed precision (MixedPrecisionPolicy): fp32 shards, each layer
               gathered in bf16 for its forward and backward
  fsdpoffload  parameters, gradients and optimizer state offloaded to the CPU
               (CPUOffloadPolicy): the GPU holds a layer at a time
"""
from __future__ import annotations

import argparse
import os
import sys

import torch
from torch import nn

VOCAB, WIDTH = 16384, 1024


def parse() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--case", required=True, choices=("fsdpmp", "fsdpoffload"))
    p.add_argument("--steps", type=int, default=6)
    return p.parse_args()


def main() -> int:
    a = parse()
    if not torch.cuda.is_available() or int(os.environ.get("WORLD_SIZE", "1")) < 2:
        print("fsdp.py: runs under torchrun with 2 ranks on GPUs", file=sys.stderr)
        return 2
    from torch.distributed.fsdp import CPUOffloadPolicy, MixedPrecisionPolicy, fully_shard
    local = int(os.environ.get("LOCAL_RANK", "0"))
    dev = torch.device("cuda", local)
    torch.cuda.set_device(dev)
    torch.distributed.init_process_group("nccl", device_id=dev)
    torch.manual_seed(0)
    layers = [nn.TransformerEncoderLayer(WIDTH, 16, 4 * WIDTH, dropout=0.0, batch_first=True,
                                         norm_first=True) for _ in range(8)]
    model = nn.Sequential(nn.Embedding(VOCAB, WIDTH), *layers, nn.Linear(WIDTH, VOCAB))
    if a.case == "fsdpmp":
        model.to(dev)
        kw = {"mp_policy": MixedPrecisionPolicy(param_dtype=torch.bfloat16,
                                                reduce_dtype=torch.float32)}
    else:
        kw = {"offload_policy": CPUOffloadPolicy()}
    for layer in layers:
        fully_shard(layer, **kw)
    fully_shard(model, **kw)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    gen = torch.Generator(device=dev).manual_seed(int(os.environ["RANK"]))
    for _ in range(a.steps):
        ids = torch.randint(VOCAB, (4, 512), generator=gen, device=dev)
        logits = model(ids)
        nn.functional.cross_entropy(logits.flatten(0, 1).float(), ids.flatten()).backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
    torch.cuda.synchronize()
    torch.distributed.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
