#!/usr/bin/env python3
"""A loop that clears gradients first and validates after each optimizer
step, for checking memdiag's phases where an evaluation runs between a
step and the zero_grad that closes it. Run a case under `memdiag run`:

    memdiag run -- python3 examples/evalzero.py --case evalkeep

  evalkeep  zero_grad, forward, backward, step, then a validation batch under
            no_grad whose predictions (fp32 logits, 250 MiB) are appended to a
            list for an epoch-end metric, on the GPU: a leak
  evaldrop  the same keeping predictions.argmax(-1) (the control)
"""
from __future__ import annotations

import argparse
import sys

CASES = ("evalkeep", "evaldrop")


def parse() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--case", required=True, choices=CASES)
    p.add_argument("--steps", type=int, default=8)
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
        print("evalzero.py: CUDA is not available", file=sys.stderr)
        return 2
    dev = torch.device("cuda", 0)
    torch.cuda.set_device(dev)
    torch.manual_seed(0)
    model = lm(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    gen = torch.Generator(device=dev).manual_seed(0)
    preds = []
    for step in range(a.steps):
        opt.zero_grad(set_to_none=True)
        ids = torch.randint(VOCAB, (BATCH, SEQ), generator=gen, device=dev)
        loss = F.cross_entropy(model(ids).flatten(0, 1), ids.flatten())
        loss.backward()
        opt.step()
        with torch.no_grad():
            val = torch.randint(VOCAB, (BATCH, SEQ), generator=gen, device=dev)
            logits = model(val)
            preds.append(logits if a.case == "evalkeep" else logits.argmax(-1))
        print(f"step {step}: loss {loss.item():.3f}", flush=True)
    torch.cuda.synchronize()
    print(f"evalzero.py {a.case}: done, {len(preds)} predictions kept", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
