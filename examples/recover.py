#!/usr/bin/env python3
"""Recovering from an out-of-memory error, for checking what memdiag says
when a retry runs out of memory because the failed attempt's tensors are
still held. The process may use 3.2 GiB; the first attempt (batch 32) runs
out, the retry halves the batch. Run a case under `memdiag run`:

    memdiag run -- python3 examples/recover.py --case retryinside

  retryinside   the retry runs inside the except block: the error's
                traceback still holds the failed forward's frames, and with
                them its activations, so batch 16 runs out too and the job
                dies (batch 16 fits on its own: retryoutside)
  retrykeep     the retry runs after the except block, but each error is
                kept in a variable (`last_error = e`, for a log line later):
                its traceback holds the same tensors until the next error
                replaces it, and the last one's for the rest of the run
  retryoutside  the retry after the except block, nothing kept (the PyTorch
                FAQ's way): the control
"""
from __future__ import annotations

import argparse
import sys

CASES = ("retryinside", "retrykeep", "retryoutside")


def parse() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--case", required=True, choices=CASES)
    p.add_argument("--steps", type=int, default=6)
    p.add_argument("--seq", type=int, default=512)
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


def train_step(model: nn.Module, opt: torch.optim.Optimizer, ids: torch.Tensor) -> float:
    with torch.autocast("cuda", dtype=torch.bfloat16):
        logits = model(ids)
        loss = nn.functional.cross_entropy(logits.flatten(0, 1).float(), ids.flatten())
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)
    return loss.item()


def main() -> int:
    a = ARGS
    if not torch.cuda.is_available():
        print("recover.py: CUDA is not available", file=sys.stderr)
        return 2
    dev = torch.device("cuda", 0)
    torch.cuda.set_device(dev)
    torch.manual_seed(0)
    torch.cuda.set_per_process_memory_fraction(
        3.2 * 2**30 / torch.cuda.get_device_properties(dev).total_memory)
    model = encoder_lm(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    gen = torch.Generator(device=dev).manual_seed(0)
    batch, last_error = 32, None
    for step in range(a.steps):
        while True:
            ids = torch.randint(VOCAB, (batch, a.seq), generator=gen, device=dev)
            try:
                loss = train_step(model, opt, ids)
                break
            except torch.cuda.OutOfMemoryError as e:
                opt.zero_grad(set_to_none=True)
                torch.cuda.empty_cache()
                batch //= 2
                print(f"recover.py: out of memory, batch now {batch}", flush=True)
                if a.case == "retrykeep":
                    last_error = e  # for a log line at the end
                if a.case == "retryinside":
                    loss = train_step(model, opt, ids[:batch])
                    break
        print(f"step {step}: batch {batch}, loss {loss:.3f}", flush=True)
    if last_error is not None:
        print(f"recover.py: recovered from {type(last_error).__name__}", flush=True)
    torch.cuda.synchronize()
    print(f"recover.py {a.case}: done", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
