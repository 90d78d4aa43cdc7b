#!/usr/bin/env python3
"""Parameters that come into being during training, for checking memdiag's
categories and optimizer_state finding (none leaks). Run a case under
`memdiag run`:

    memdiag run -- python3 examples/lazy.py --case lazy

  lazy        an MLP of nn.LazyLinear layers: the weights are made by the first
              forward pass (their shapes come from its input), the optimizer
              made before it
  buildfirst  the model and its optimizer built inside the loop, at its first
              iteration (a training loop that builds what it trains on demand)
"""
from __future__ import annotations

import argparse
import sys

CASES = ("lazy", "buildfirst")


def parse() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--case", required=True, choices=CASES)
    p.add_argument("--steps", type=int, default=9)
    return p.parse_args()


ARGS = parse()

import torch  # noqa: E402
from torch import nn  # noqa: E402

WIDTH, CLASSES, BATCH = 4096, 1000, 512


def lazy_mlp(dev: torch.device) -> nn.Module:
    return nn.Sequential(nn.LazyLinear(WIDTH), nn.GELU(), nn.LazyLinear(WIDTH), nn.GELU(),
                         nn.LazyLinear(WIDTH), nn.GELU(), nn.LazyLinear(CLASSES)).to(dev)


def mlp(dev: torch.device) -> nn.Module:
    return nn.Sequential(nn.Linear(2048, WIDTH), nn.GELU(), nn.Linear(WIDTH, WIDTH), nn.GELU(),
                         nn.Linear(WIDTH, WIDTH), nn.GELU(), nn.Linear(WIDTH, CLASSES)).to(dev)


def batch(gen: torch.Generator, dev: torch.device):
    x = torch.randn(BATCH, 2048, generator=gen, device=dev)
    return x, torch.randint(CLASSES, (BATCH,), generator=gen, device=dev)


def lazy(a: argparse.Namespace, dev: torch.device) -> None:
    model = lazy_mlp(dev)
    gen = torch.Generator(device=dev).manual_seed(0)
    x, y = batch(gen, dev)
    model(x)  # the dry run LazyModules need before an optimizer sees their weights
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    for _ in range(a.steps):
        x, y = batch(gen, dev)
        loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)


def buildfirst(a: argparse.Namespace, dev: torch.device) -> None:
    gen = torch.Generator(device=dev).manual_seed(0)
    model = opt = None
    for _ in range(a.steps):
        x, y = batch(gen, dev)
        if model is None:
            model = mlp(dev)
            opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
        loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)


def main() -> int:
    if not torch.cuda.is_available():
        print("lazy.py: CUDA is not available", file=sys.stderr)
        return 2
    dev = torch.device("cuda", 0)
    torch.cuda.set_device(dev)
    torch.manual_seed(0)
    {"lazy": lazy, "buildfirst": buildfirst}[ARGS.case](ARGS, dev)
    torch.cuda.synchronize()
    print(f"lazy.py {ARGS.case}: done", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
