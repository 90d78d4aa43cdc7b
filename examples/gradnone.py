#!/usr/bin/env python3
"""Gradients cleared without zero_grad, for checking memdiag's steps and
indicators where no zero_grad call marks a step's end. Run a case under
`memdiag run`:

    memdiag run -- python3 examples/gradnone.py --case gradnone

  gradnone  forward, backward, step, then `for p in params: p.grad = None`
            (what zero_grad(set_to_none=True) does, by hand)
  gradkeep  the same with the gradients never cleared, accumulated into in
            place each step (a bug: every step's update uses the sum so far)
"""
from __future__ import annotations

import argparse
import sys

CASES = ("gradnone", "gradkeep")


def parse() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--case", required=True, choices=CASES)
    p.add_argument("--steps", type=int, default=6)
    return p.parse_args()


ARGS = parse()

import torch  # noqa: E402
from torch import nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

VOCAB, WIDTH, LAYERS, BATCH, SEQ = 32000, 768, 6, 8, 512


def lm(dev: torch.device) -> nn.Module:
    layer = nn.TransformerEncoderLayer(WIDTH, 12, 4 * WIDTH, dropout=0.0, batch_first=True,
                                       norm_first=True)
    return nn.Sequential(nn.Embedding(VOCAB, WIDTH), nn.TransformerEncoder(layer, LAYERS),
                         nn.Linear(WIDTH, VOCAB, bias=False)).to(dev)


def main() -> int:
    a = ARGS
    if not torch.cuda.is_available():
        print("gradnone.py: CUDA is not available", file=sys.stderr)
        return 2
    dev = torch.device("cuda", 0)
    torch.cuda.set_device(dev)
    torch.manual_seed(0)
    model = lm(dev)
    params = list(model.parameters())
    opt = torch.optim.AdamW(params, lr=1e-4)
    gen = torch.Generator(device=dev).manual_seed(0)
    for step in range(a.steps):
        ids = torch.randint(VOCAB, (BATCH, SEQ), generator=gen, device=dev)
        loss = F.cross_entropy(model(ids).flatten(0, 1), ids.flatten())
        loss.backward()
        opt.step()
        if a.case == "gradnone":
            for p in params:
                p.grad = None
        print(f"step {step}: loss {loss.item():.3f}", flush=True)
    torch.cuda.synchronize()
    print(f"gradnone.py {a.case}: done", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
