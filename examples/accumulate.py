#!/usr/bin/env python3
"""Gradient accumulation that keeps what each micro-batch made, for checking
memdiag's diagnosis on code it was not written against (none leaks across
steps). Run a case under `memdiag run`:

    memdiag run -- python3 examples/accumulate.py --case accumkeep

  accumkeep    8 micro-batches a step, each backpropagated at once, but every
               micro-batch's logits appended to a list for a step-level metric:
               the step ends holding all eight (fp32, 250 MiB each)
  accumargmax  the same keeping logits.argmax(-1) (the control)
"""
from __future__ import annotations

import argparse
import sys

CASES = ("accumkeep", "accumargmax")


def parse() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--case", required=True, choices=CASES)
    p.add_argument("--steps", type=int, default=5)
    p.add_argument("--micro", type=int, default=8)
    return p.parse_args()


ARGS = parse()

import torch  # noqa: E402
from torch import nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

VOCAB, WIDTH, LAYERS, BATCH, SEQ = 32000, 768, 6, 4, 512


def lm(dev: torch.device) -> nn.Module:
    layer = nn.TransformerEncoderLayer(WIDTH, 12, 4 * WIDTH, dropout=0.0, batch_first=True,
                                       norm_first=True)
    return nn.Sequential(nn.Embedding(VOCAB, WIDTH), nn.TransformerEncoder(layer, LAYERS),
                         nn.Linear(WIDTH, VOCAB, bias=False)).to(dev)


def main() -> int:
    a = ARGS
    if not torch.cuda.is_available():
        print("accumulate.py: CUDA is not available", file=sys.stderr)
        return 2
    dev = torch.device("cuda", 0)
    torch.cuda.set_device(dev)
    torch.manual_seed(0)
    model = lm(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    gen = torch.Generator(device=dev).manual_seed(0)
    for step in range(a.steps):
        kept, labels = [], []
        for _ in range(a.micro):
            ids = torch.randint(VOCAB, (BATCH, SEQ), generator=gen, device=dev)
            logits = model(ids)
            loss = F.cross_entropy(logits.flatten(0, 1), ids.flatten()) / a.micro
            loss.backward()
            kept.append(logits.detach() if a.case == "accumkeep" else logits.argmax(-1))
            labels.append(ids)
        opt.step()
        opt.zero_grad(set_to_none=True)
        if a.case == "accumkeep":
            acc = torch.cat([k.argmax(-1) for k in kept]).eq(torch.cat(labels)).float().mean()
        else:
            acc = torch.cat(kept).eq(torch.cat(labels)).float().mean()
        print(f"step {step}: accuracy {acc.item():.4f}", flush=True)
    torch.cuda.synchronize()
    print(f"accumulate.py {a.case}: done", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
