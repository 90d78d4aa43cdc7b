#!/usr/bin/env python3
"""Inference done right, beside examples/nograd.py's: for checking that
memdiag's "graphs no backward uses" finding and advice stay away from loops
that already run under no_grad or inference_mode. Run a case under
`memdiag run`:

    memdiag run -- python3 examples/inferctl.py --case nogradinfer

  nogradinfer  nograd.py's gradinfer loop under torch.no_grad(): each output
               is assigned again, the predictions kept (a small leak, as
               there): no activations finding
  inferkeep    the same under torch.inference_mode(), every output kept: a
               leak of outputs, whose advice is not inference_mode
"""
from __future__ import annotations

import argparse
import sys

CASES = ("nogradinfer", "inferkeep")


def parse() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--case", required=True, choices=CASES)
    p.add_argument("--batches", type=int, default=8)
    return p.parse_args()


ARGS = parse()

import torch  # noqa: E402
from torch import nn  # noqa: E402

WIDTH, LAYERS, SEQ, BATCH = 1024, 8, 1024, 8


def encoder(dev: torch.device) -> nn.Module:
    layer = nn.TransformerEncoderLayer(WIDTH, 16, 4 * WIDTH, dropout=0.0, batch_first=True,
                                       norm_first=True)
    return nn.Sequential(nn.TransformerEncoder(layer, LAYERS), nn.Linear(WIDTH, 10)).to(dev)


def run(a: argparse.Namespace, dev: torch.device, keep: bool) -> None:
    model = encoder(dev).eval()
    gen = torch.Generator(device=dev).manual_seed(0)
    preds, outs = [], []
    guard = torch.inference_mode if keep else torch.no_grad
    with guard():
        for _ in range(a.batches):
            x = torch.randn(BATCH, SEQ, WIDTH, generator=gen, device=dev)
            out = model(x)
            preds.append(out.argmax(-1))
            if keep:
                outs.append(out)
    print("predictions:", sum(int(p.sum()) for p in preds), flush=True)


def main() -> int:
    if not torch.cuda.is_available():
        print("inferctl.py: CUDA is not available", file=sys.stderr)
        return 2
    dev = torch.device("cuda", 0)
    torch.cuda.set_device(dev)
    torch.manual_seed(0)
    run(ARGS, dev, ARGS.case == "inferkeep")
    torch.cuda.synchronize()
    print(f"inferctl.py {ARGS.case}: done", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
