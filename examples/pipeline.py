#!/usr/bin/env python3
"""Work split over 2 GPUs, for checking memdiag's diagnosis across devices
(only pipeleak leaks). Run a case under `memdiag run`:

    memdiag run -- python3 examples/pipeline.py --case pipe
    memdiag run -- torchrun --nproc-per-node 2 examples/pipeline.py --case gather

  pipe      one process, the model split over cuda:0 and cuda:1 (naive model
            parallelism): embedding and 3 layers on the first, 3 layers and the
            vocabulary head on the second
  pipeleak  the same, each step's second-half hidden states kept in a list (cuda:1)
  gather    DDP contrastive learning: each rank's embeddings gathered from every rank
            (torch.distributed.nn.all_gather, with gradients) before an InfoNCE loss
"""
from __future__ import annotations

import argparse
import os
import sys

CASES = ("pipe", "pipeleak", "gather")


def parse() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--case", required=True, choices=CASES)
    p.add_argument("--steps", type=int, default=9)
    return p.parse_args()


ARGS = parse()

import torch  # noqa: E402
from torch import nn  # noqa: E402

VOCAB, WIDTH = 16384, 768


def layers(n: int, dev: torch.device) -> nn.TransformerEncoder:
    layer = nn.TransformerEncoderLayer(WIDTH, 12, 4 * WIDTH, dropout=0.0, batch_first=True,
                                       norm_first=True)
    return nn.TransformerEncoder(layer, n).to(dev)


def split_model(a: argparse.Namespace) -> None:
    d0, d1 = torch.device("cuda", 0), torch.device("cuda", 1)
    first = nn.Sequential(nn.Embedding(VOCAB, WIDTH), layers(3, d0)).to(d0)
    second = nn.Sequential(layers(3, d1), nn.Linear(WIDTH, VOCAB, bias=False)).to(d1)
    opt = torch.optim.AdamW([*first.parameters(), *second.parameters()], lr=1e-4)
    gen = torch.Generator(device=d0).manual_seed(0)
    kept = []
    for _ in range(a.steps):
        ids = torch.randint(VOCAB, (8, 512), generator=gen, device=d0)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            h = first(ids).to(d1)
            if a.case == "pipeleak":
                kept.append(second[0](h).detach().float())  # the second half's states, kept
            logits = second(h)
            loss = nn.functional.cross_entropy(logits.flatten(0, 1).float(), ids.to(d1).flatten())
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)


def gather(a: argparse.Namespace) -> None:
    import torch.distributed as dist
    import torch.distributed.nn as dnn
    from torch.nn.parallel import DistributedDataParallel as DDP
    rank = dist.get_rank()
    dev = torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")))
    net = DDP(nn.Sequential(nn.Linear(1024, 4096), nn.GELU(), nn.Linear(4096, 256)).to(dev),
              device_ids=[dev.index])
    opt = torch.optim.AdamW(net.parameters(), lr=1e-4)
    gen = torch.Generator(device=dev).manual_seed(rank)
    n = 4096
    for _ in range(a.steps):
        x = torch.randn(n, 1024, generator=gen, device=dev)
        q = nn.functional.normalize(net(x + 0.1 * torch.randn(x.shape, generator=gen, device=dev)), dim=1)
        k = nn.functional.normalize(net(x + 0.1 * torch.randn(x.shape, generator=gen, device=dev)), dim=1)
        keys = torch.cat(dnn.all_gather(k))  # every rank's keys, gradients flowing back
        logits = q @ keys.T / 0.07
        labels = torch.arange(n, device=dev) + rank * n
        nn.functional.cross_entropy(logits, labels).backward()
        opt.step()
        opt.zero_grad(set_to_none=True)


def main() -> int:
    if torch.cuda.device_count() < 2:
        print("pipeline.py: needs 2 GPUs", file=sys.stderr)
        return 2
    torch.manual_seed(0)
    if ARGS.case == "gather":
        if int(os.environ.get("WORLD_SIZE", "1")) < 2:
            print("pipeline.py: gather runs under torchrun with 2 ranks", file=sys.stderr)
            return 2
        dev = torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")))
        torch.cuda.set_device(dev)
        torch.distributed.init_process_group("nccl", device_id=dev)
        gather(ARGS)
        torch.cuda.synchronize()
        torch.distributed.destroy_process_group()
    else:
        torch.cuda.set_device(0)
        split_model(ARGS)
        torch.cuda.synchronize(0)
        torch.cuda.synchronize(1)
    print(f"pipeline.py {ARGS.case}: done", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
