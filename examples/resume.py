#!/usr/bin/env python3
"""Mid-run changes to a model or its state, for checking memdiag's
diagnosis on code it was not written against (none leaks):

    memdiag run -- python3 examples/resume.py --case resume

  resume    training resumed from a checkpoint loaded onto the GPU
            (torch.load(map_location="cuda")), the loaded dict still referenced
            after load_state_dict: a second copy of the weights and optimizer state
  todtype   the model cast to bfloat16 after 3 steps (a new optimizer for it)
  cgshapes  torch.compile(mode="reduce-overhead") (CUDA graphs) over 4 batch sizes
            in turn: one graph recorded per size
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile

import torch
from torch import nn


def parse() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--case", required=True, choices=("resume", "todtype", "cgshapes"))
    p.add_argument("--steps", type=int, default=8)
    return p.parse_args()


def mlp(dev: torch.device) -> nn.Module:
    return nn.Sequential(nn.Linear(2048, 8192), nn.GELU(), nn.Linear(8192, 8192), nn.GELU(),
                         nn.Linear(8192, 2048)).to(dev)


def step(model: nn.Module, opt: torch.optim.Optimizer, x: torch.Tensor) -> None:
    nn.functional.mse_loss(model(x), x).backward()
    opt.step()
    opt.zero_grad(set_to_none=True)


def resume(a: argparse.Namespace, dev: torch.device, gen: torch.Generator) -> None:
    model = mlp(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    for _ in range(2):  # the run that wrote the checkpoint
        step(model, opt, torch.randn(256, 2048, generator=gen, device=dev))
    path = os.path.join(tempfile.mkdtemp(), "ckpt.pt")
    torch.save({"model": model.state_dict(), "opt": opt.state_dict()}, path)
    del model, opt
    model = mlp(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    ckpt = torch.load(path, map_location="cuda")  # kept referenced below
    model.load_state_dict(ckpt["model"])
    opt.load_state_dict(ckpt["opt"])
    for _ in range(a.steps):
        step(model, opt, torch.randn(256, 2048, generator=gen, device=dev))
    print(f"resume.py: resumed at step {ckpt['opt']['state'][0]['step']}", flush=True)


def todtype(a: argparse.Namespace, dev: torch.device, gen: torch.Generator) -> None:
    model = mlp(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    for k in range(a.steps):
        if k == 3:
            model = model.to(torch.bfloat16)
            opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
        x = torch.randn(256, 2048, generator=gen, device=dev, dtype=next(model.parameters()).dtype)
        step(model, opt, x)


def cgshapes(a: argparse.Namespace, dev: torch.device, gen: torch.Generator) -> None:
    model = mlp(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    fwd = torch.compile(model, mode="reduce-overhead")
    for k in range(a.steps):
        torch.compiler.cudagraph_mark_step_begin()
        x = torch.randn(64 * (1 + k % 4), 2048, generator=gen, device=dev)
        nn.functional.mse_loss(fwd(x), x).backward()
        opt.step()
        opt.zero_grad(set_to_none=True)


def main() -> int:
    a = parse()
    if not torch.cuda.is_available():
        print("resume.py: CUDA is not available", file=sys.stderr)
        return 2
    dev = torch.device("cuda", 0)
    torch.cuda.set_device(dev)
    torch.manual_seed(0)
    gen = torch.Generator(device=dev).manual_seed(0)
    {"resume": resume, "todtype": todtype, "cgshapes": cgshapes}[a.case](a, dev, gen)
    torch.cuda.synchronize()
    return 0


if __name__ == "__main__":
    sys.exit(main())
