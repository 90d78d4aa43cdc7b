#!/usr/bin/env python3
"""Habits of notebooks and hand-rolled loops, for checking memdiag's diagnosis
on them (only sweepleak leaks). Run a case under `memdiag run`:

    memdiag run -- python3 examples/habits.py --case masterfp32

  masterfp32  the model in fp16 with fp32 master weights kept beside it (apex O2's
              way): AdamW steps the master copy, which is copied back each step
  twomodels   a model trained 4 steps, then `del model` and a second model trained
              5 steps; the first optimizer, still referenced, keeps the first
              model's parameters and state
  sweepleak   a learning-rate sweep in one process: 4 trials of 3 steps, each
              trial's model kept in a results list
"""
from __future__ import annotations

import argparse
import sys

CASES = ("masterfp32", "twomodels", "sweepleak")


def parse() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--case", required=True, choices=CASES)
    return p.parse_args()


ARGS = parse()

import torch  # noqa: E402
from torch import nn  # noqa: E402

VOCAB, WIDTH = 16384, 768


def encoder_lm(dev: torch.device) -> nn.Module:
    layer = nn.TransformerEncoderLayer(WIDTH, 12, 4 * WIDTH, dropout=0.0, batch_first=True,
                                       norm_first=True)
    return nn.Sequential(nn.Embedding(VOCAB, WIDTH), nn.TransformerEncoder(layer, 6),
                         nn.Linear(WIDTH, VOCAB, bias=False)).to(dev)


def loss_of(model: nn.Module, ids: torch.Tensor) -> torch.Tensor:
    logits = model(ids)
    return nn.functional.cross_entropy(logits.flatten(0, 1).float(), ids.flatten())


def train(model: nn.Module, opt: torch.optim.Optimizer, gen: torch.Generator, dev: torch.device,
          steps: int) -> None:
    for _ in range(steps):
        ids = torch.randint(VOCAB, (8, 512), generator=gen, device=dev)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = loss_of(model, ids)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)


def master_fp32(dev: torch.device) -> None:
    model = encoder_lm(dev).half()
    master = [p.detach().float().requires_grad_() for p in model.parameters()]
    opt = torch.optim.AdamW(master, lr=1e-4)
    gen = torch.Generator(device=dev).manual_seed(0)
    scale = 1024.0
    for _ in range(9):
        ids = torch.randint(VOCAB, (8, 512), generator=gen, device=dev)
        (loss_of(model, ids) * scale).backward()
        for m, p in zip(master, model.parameters()):
            m.grad = p.grad.float() / scale  # fp32 gradients for the master copy
            p.grad = None
        opt.step()
        opt.zero_grad(set_to_none=True)
        with torch.no_grad():
            for m, p in zip(master, model.parameters()):
                p.copy_(m)


def two_models(dev: torch.device) -> None:
    gen = torch.Generator(device=dev).manual_seed(0)
    model = encoder_lm(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    train(model, opt, gen, dev, 4)
    del model  # the optimizer still holds its parameters and state
    model = encoder_lm(dev)
    opt2 = torch.optim.AdamW(model.parameters(), lr=1e-4)
    train(model, opt2, gen, dev, 5)
    print(f"habits.py twomodels: {len(opt.param_groups)} stale optimizer kept", flush=True)


def sweep(dev: torch.device) -> None:
    gen = torch.Generator(device=dev).manual_seed(0)
    results = []
    for lr in (3e-4, 1e-4, 3e-5, 1e-5):
        model = encoder_lm(dev)
        opt = torch.optim.AdamW(model.parameters(), lr=lr)
        train(model, opt, gen, dev, 3)
        results.append((lr, model))  # the model, not its score, kept


def main() -> int:
    if not torch.cuda.is_available():
        print("habits.py: CUDA is not available", file=sys.stderr)
        return 2
    dev = torch.device("cuda", 0)
    torch.cuda.set_device(dev)
    torch.manual_seed(0)
    {"masterfp32": master_fp32, "twomodels": two_models, "sweepleak": sweep}[ARGS.case](dev)
    torch.cuda.synchronize()
    print(f"habits.py {ARGS.case}: done", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
