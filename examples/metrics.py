#!/usr/bin/env python3
"""Metrics and logging computed inside the training step, for checking
memdiag's diagnosis on code it was not written against (none leaks). Run a
case under `memdiag run`:

    memdiag run -- python3 examples/metrics.py --case dblfwd

  dblfwd    the model is called a second time for a training-accuracy metric,
            without no_grad, and its output kept until the metric is logged after
            backward: that forward's graph lives through the step's backward
  dblfwdng  the same second forward under torch.no_grad() (the control)
  gradcat   the gradient norm logged by hand every step as
            torch.cat([p.grad.flatten() for p in params]).norm(): a copy of every
            gradient made after backward
"""
from __future__ import annotations

import argparse
import sys

CASES = ("dblfwd", "dblfwdng", "gradcat")


def parse() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--case", required=True, choices=CASES)
    p.add_argument("--steps", type=int, default=6)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--seq", type=int, default=512)
    return p.parse_args()


ARGS = parse()

import torch  # noqa: E402
from torch import nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

VOCAB, WIDTH, LAYERS = 32000, 1024, 8


def lm(dev: torch.device) -> nn.Module:
    layer = nn.TransformerEncoderLayer(WIDTH, 16, 4 * WIDTH, dropout=0.0, batch_first=True,
                                       norm_first=True)
    return nn.Sequential(nn.Embedding(VOCAB, WIDTH), nn.TransformerEncoder(layer, LAYERS),
                         nn.Linear(WIDTH, VOCAB, bias=False)).to(dev)


def main() -> int:
    a = ARGS
    if not torch.cuda.is_available():
        print("metrics.py: CUDA is not available", file=sys.stderr)
        return 2
    dev = torch.device("cuda", 0)
    torch.cuda.set_device(dev)
    torch.manual_seed(0)
    model = lm(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    gen = torch.Generator(device=dev).manual_seed(0)
    for step in range(a.steps):
        ids = torch.randint(VOCAB, (a.batch, a.seq), generator=gen, device=dev)
        logits = model(ids)
        loss = F.cross_entropy(logits.flatten(0, 1), ids.flatten())
        if a.case == "dblfwd":
            probe = model(ids)  # for the accuracy below; records a graph
        elif a.case == "dblfwdng":
            with torch.no_grad():
                probe = model(ids)
        loss.backward()
        note = ""
        if a.case == "gradcat":
            norm = torch.cat([p.grad.flatten() for p in model.parameters()]).norm()
            note = f", grad norm {norm.item():.3f}"
        else:
            acc = (probe.argmax(-1) == ids).float().mean()
            note = f", accuracy {acc.item():.4f}"
        opt.step()
        opt.zero_grad(set_to_none=True)
        print(f"step {step}: loss {loss.item():.3f}{note}", flush=True)
    torch.cuda.synchronize()
    print(f"metrics.py {a.case}: done", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
