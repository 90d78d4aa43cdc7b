#!/usr/bin/env python3
"""Optimizer choices whose state is not the textbook multiple, for checking
memdiag's optimizer_state finding (none leaks). Run a case under `memdiag run`:

    memdiag run -- python3 examples/optimizers.py --case amsgrad

  amsgrad    Adam(amsgrad=True): a third buffer, the running maximum (max_exp_avg_sq)
  optswitch  SGD with momentum for 4 steps (a warm-up), then AdamW from step 4 on
  rmsmoment  RMSprop with momentum=0.9: a second buffer beside square_avg
"""
from __future__ import annotations

import argparse
import sys

CASES = ("amsgrad", "optswitch", "rmsmoment")


def parse() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--case", required=True, choices=CASES)
    p.add_argument("--steps", type=int, default=9)
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


def run(a: argparse.Namespace, dev: torch.device) -> None:
    model = encoder_lm(dev)
    if a.case == "amsgrad":
        opt = torch.optim.Adam(model.parameters(), lr=1e-4, amsgrad=True)
    elif a.case == "rmsmoment":
        opt = torch.optim.RMSprop(model.parameters(), lr=1e-4, momentum=0.9)
    else:
        opt = torch.optim.SGD(model.parameters(), lr=1e-2, momentum=0.9)
    gen = torch.Generator(device=dev).manual_seed(0)
    for step in range(a.steps):
        if a.case == "optswitch" and step == 4:  # the warm-up is over
            opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
        ids = torch.randint(VOCAB, (8, 512), generator=gen, device=dev)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            logits = model(ids)
            loss = nn.functional.cross_entropy(logits.flatten(0, 1).float(), ids.flatten())
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)


def main() -> int:
    if not torch.cuda.is_available():
        print("optimizers.py: CUDA is not available", file=sys.stderr)
        return 2
    dev = torch.device("cuda", 0)
    torch.cuda.set_device(dev)
    torch.manual_seed(0)
    run(ARGS, dev)
    torch.cuda.synchronize()
    print(f"optimizers.py {ARGS.case}: done", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
