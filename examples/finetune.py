#!/usr/bin/env python3
"""Training only part of a model, for checking memdiag's diagnosis on code
it was not written against. None leaks.

    memdiag run -- python3 examples/finetune.py --case frozen

  frozen     a frozen backbone run under no_grad, only a classifier head trained
             with AdamW: state for the head alone, few activations
  sparseemb  a large embedding with sparse gradients (SparseAdam) beside dense layers
             (AdamW): two optimizers step each iteration
"""
from __future__ import annotations

import argparse
import sys

import torch
from torch import nn

VOCAB, WIDTH = 16384, 768


def parse() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--case", required=True, choices=("frozen", "sparseemb"))
    p.add_argument("--steps", type=int, default=8)
    return p.parse_args()


def encoder(dev: torch.device) -> nn.Module:
    layer = nn.TransformerEncoderLayer(WIDTH, 12, 4 * WIDTH, dropout=0.0, batch_first=True,
                                       norm_first=True)
    return nn.TransformerEncoder(layer, 6).to(dev)


def frozen(a: argparse.Namespace, dev: torch.device) -> None:
    embed, backbone = nn.Embedding(VOCAB, WIDTH).to(dev), encoder(dev)
    head = nn.Sequential(nn.Linear(WIDTH, 2048), nn.GELU(), nn.Linear(2048, 1000)).to(dev)
    embed.requires_grad_(False)
    backbone.requires_grad_(False)
    opt = torch.optim.AdamW(head.parameters(), lr=1e-3)
    gen = torch.Generator(device=dev).manual_seed(0)
    for _ in range(a.steps):
        ids = torch.randint(VOCAB, (32, 512), generator=gen, device=dev)
        with torch.no_grad(), torch.autocast("cuda", dtype=torch.bfloat16):
            features = backbone(embed(ids)).mean(1)
        labels = torch.randint(1000, (32,), generator=gen, device=dev)
        nn.functional.cross_entropy(head(features.float()), labels).backward()
        opt.step()
        opt.zero_grad(set_to_none=True)


def sparse_embeddings(a: argparse.Namespace, dev: torch.device) -> None:
    embed = nn.Embedding(1 << 20, 256, sparse=True).to(dev)  # 1 GiB of fp32 rows
    tower = nn.Sequential(nn.Linear(256, 1024), nn.ReLU(), nn.Linear(1024, 1)).to(dev)
    sparse_opt = torch.optim.SparseAdam(embed.parameters(), lr=1e-3)
    dense_opt = torch.optim.AdamW(tower.parameters(), lr=1e-3)
    gen = torch.Generator(device=dev).manual_seed(0)
    for _ in range(a.steps):
        ids = torch.randint(1 << 20, (4096, 16), generator=gen, device=dev)
        y = torch.rand(4096, 1, generator=gen, device=dev)
        loss = nn.functional.mse_loss(tower(embed(ids).mean(1)), y)
        loss.backward()
        sparse_opt.step()
        dense_opt.step()
        sparse_opt.zero_grad(set_to_none=True)
        dense_opt.zero_grad(set_to_none=True)


def main() -> int:
    a = parse()
    if not torch.cuda.is_available():
        print("finetune.py: CUDA is not available", file=sys.stderr)
        return 2
    dev = torch.device("cuda", 0)
    torch.cuda.set_device(dev)
    torch.manual_seed(0)
    (frozen if a.case == "frozen" else sparse_embeddings)(a, dev)
    torch.cuda.synchronize()
    return 0


if __name__ == "__main__":
    sys.exit(main())
