#!/usr/bin/env python3
"""A leak that ends in an out-of-memory error, for checking that memdiag's
OOM finding says what the leak had kept by then ("it ran fine for hours,
then died"). The process may use 4 GiB. Run a case under `memdiag run`:

    memdiag run -- python3 examples/leakoom.py --case logitsoom

  logitsoom  each step's logits kept (detached, for metrics at the end of
             the epoch): 128 MiB a step, until a step runs out of memory
  graphoom   each step's loss kept with its graph (total.append(loss)): the
             step's saved activations stay too, out of memory within a few
             steps
"""
from __future__ import annotations

import argparse
import sys

CASES = ("logitsoom", "graphoom")


def parse() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--case", required=True, choices=CASES)
    p.add_argument("--steps", type=int, default=30)
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


def main() -> int:
    a = ARGS
    if not torch.cuda.is_available():
        print("leakoom.py: CUDA is not available", file=sys.stderr)
        return 2
    dev = torch.device("cuda", 0)
    torch.cuda.set_device(dev)
    torch.manual_seed(0)
    torch.cuda.set_per_process_memory_fraction(
        4 * 2**30 / torch.cuda.get_device_properties(dev).total_memory)
    model = encoder_lm(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    gen = torch.Generator(device=dev).manual_seed(0)
    kept = []
    for step in range(a.steps):
        ids = torch.randint(VOCAB, (a.batch, a.seq), generator=gen, device=dev)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            logits = model(ids)
            loss = nn.functional.cross_entropy(logits.flatten(0, 1).float(), ids.flatten())
        loss.backward(retain_graph=a.case == "graphoom")
        opt.step()
        opt.zero_grad(set_to_none=True)
        kept.append(logits.detach() if a.case == "logitsoom" else loss)
        print(f"step {step}: {torch.cuda.memory_allocated() / 2**20:.0f} MiB allocated",
              flush=True)
    print(f"leakoom.py {a.case}: done", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
