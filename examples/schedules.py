#!/usr/bin/env python3
"""Loops whose memory changes over the run by design, for checking that
memdiag's diagnosis tells a schedule from a leak (none of these leaks).

The model is nn.TransformerEncoder between a token embedding and a
vocabulary head, trained on synthetic GPU tokens. Run a case under
`memdiag run`:

    memdiag run -- python3 examples/schedules.py --case oomretry

  oomretry   the process may use 3.2 GiB; the batch starts at 32 and is halved
             after each out-of-memory error (accelerate's find_executable_batch_size)
  evalpeak   every third step an evaluation under no_grad at 4 x the batch: the
             run's peak is there, not in training
  unfreeze   only the head trains for 3 steps, then every layer (the optimizer's
             state and the gradients of the rest appear at step 3)
  replaycap  a replay buffer on the GPU keeps the last 3 steps' hidden states
  lbfgs      L-BFGS (history_size 3) on a regression MLP: its history fills, then
             stays
"""
from __future__ import annotations

import argparse
import sys

CASES = ("oomretry", "evalpeak", "unfreeze", "replaycap", "lbfgs")


def parse() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--case", required=True, choices=CASES)
    p.add_argument("--steps", type=int, default=9)
    p.add_argument("--batch", type=int, default=8)
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


def tokens(n: int, seq: int, gen: torch.Generator, dev: torch.device) -> torch.Tensor:
    return torch.randint(VOCAB, (n, seq), generator=gen, device=dev)


def train_step(model: nn.Module, opt: torch.optim.Optimizer, ids: torch.Tensor) -> None:
    with torch.autocast("cuda", dtype=torch.bfloat16):
        logits = model(ids)
        loss = nn.functional.cross_entropy(logits.flatten(0, 1).float(), ids.flatten())
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)


def oom_retry(a: argparse.Namespace, dev: torch.device) -> None:
    torch.cuda.set_per_process_memory_fraction(3.2 * 2**30 / torch.cuda.get_device_properties(dev).total_memory)
    model = encoder_lm(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    gen = torch.Generator(device=dev).manual_seed(0)
    batch, done = 32, 0
    while done < a.steps:
        try:
            train_step(model, opt, tokens(batch, a.seq, gen, dev))
            done += 1
        except torch.cuda.OutOfMemoryError:
            opt.zero_grad(set_to_none=True)
            torch.cuda.empty_cache()
            batch //= 2
            print(f"schedules.py oomretry: out of memory, batch now {batch}", flush=True)


def eval_peak(a: argparse.Namespace, dev: torch.device) -> None:
    model = encoder_lm(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    gen = torch.Generator(device=dev).manual_seed(0)
    for step in range(a.steps):
        train_step(model, opt, tokens(a.batch, a.seq, gen, dev))
        if step % 3 == 2:
            model.eval()
            with torch.no_grad(), torch.autocast("cuda", dtype=torch.bfloat16):
                float(model(tokens(4 * a.batch, a.seq, gen, dev)).float().logsumexp(-1).mean())
            model.train()


def unfreeze(a: argparse.Namespace, dev: torch.device) -> None:
    model = encoder_lm(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    gen = torch.Generator(device=dev).manual_seed(0)
    for step in range(a.steps):
        for p in model[:2].parameters():
            p.requires_grad_(step >= 3)
        train_step(model, opt, tokens(a.batch, a.seq, gen, dev))


def replay_cap(a: argparse.Namespace, dev: torch.device) -> None:
    model = encoder_lm(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    gen = torch.Generator(device=dev).manual_seed(0)
    replay = []
    for _ in range(a.steps):
        ids = tokens(a.batch, a.seq, gen, dev)
        with torch.no_grad():
            replay.append(model[:2](ids))  # hidden states, replayed later
        if len(replay) > 3:
            replay.pop(0)
        train_step(model, opt, ids)


def lbfgs(a: argparse.Namespace, dev: torch.device) -> None:
    model = nn.Sequential(nn.Linear(1024, 4096), nn.Tanh(), nn.Linear(4096, 4096), nn.Tanh(),
                          nn.Linear(4096, 1)).to(dev)
    opt = torch.optim.LBFGS(model.parameters(), lr=0.5, max_iter=4, history_size=3)
    gen = torch.Generator(device=dev).manual_seed(0)
    for _ in range(a.steps):
        x = torch.randn(4096, 1024, generator=gen, device=dev)
        y = x[:, :1].sin()

        def closure() -> torch.Tensor:
            opt.zero_grad(set_to_none=True)
            loss = nn.functional.mse_loss(model(x), y)
            loss.backward()
            return loss

        opt.step(closure)


def main() -> int:
    if not torch.cuda.is_available():
        print("schedules.py: CUDA is not available", file=sys.stderr)
        return 2
    dev = torch.device("cuda", 0)
    torch.cuda.set_device(dev)
    torch.manual_seed(0)
    {"oomretry": oom_retry, "evalpeak": eval_peak, "unfreeze": unfreeze,
     "replaycap": replay_cap, "lbfgs": lbfgs}[ARGS.case](ARGS, dev)
    torch.cuda.synchronize()
    print(f"schedules.py {ARGS.case}: done", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
