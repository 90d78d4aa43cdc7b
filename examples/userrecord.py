#!/usr/bin/env python3
"""Snapshots a user records with torch's own API, not `memdiag run`, for
checking what memdiag makes of a history that misses the set-up. Each case
trains an encoder LM with AdamW for a few steps and dumps a snapshot:

    python3 examples/userrecord.py --case late --out late.pickle
    memdiag summary late.pickle

  late   _record_memory_history() called after the model and optimizer were
         made, right before the training loop (as many guides show it)
  ring   recording from the start with max_entries=3000: the ring buffer
         overflows and keeps only the last steps
"""
from __future__ import annotations

import argparse
import sys

CASES = ("late", "ring")


def parse() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--case", required=True, choices=CASES)
    p.add_argument("--out", required=True)
    p.add_argument("--steps", type=int, default=6)
    return p.parse_args()


ARGS = parse()

import torch  # noqa: E402
from torch import nn  # noqa: E402

VOCAB, WIDTH, LAYERS, SEQ, BATCH = 32000, 768, 6, 512, 8


def encoder_lm(dev: torch.device) -> nn.Module:
    layer = nn.TransformerEncoderLayer(WIDTH, 12, 4 * WIDTH, dropout=0.0, batch_first=True,
                                       norm_first=True)
    return nn.Sequential(nn.Embedding(VOCAB, WIDTH), nn.TransformerEncoder(layer, LAYERS),
                         nn.Linear(WIDTH, VOCAB, bias=False)).to(dev)


def main() -> int:
    if not torch.cuda.is_available():
        print("userrecord.py: CUDA is not available", file=sys.stderr)
        return 2
    dev = torch.device("cuda", 0)
    torch.cuda.set_device(dev)
    torch.manual_seed(0)
    if ARGS.case == "ring":
        torch.cuda.memory._record_memory_history(max_entries=3000)
    model = encoder_lm(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    if ARGS.case == "late":
        torch.cuda.memory._record_memory_history()
    gen = torch.Generator(device=dev).manual_seed(0)
    for _ in range(ARGS.steps):
        ids = torch.randint(VOCAB, (BATCH, SEQ), generator=gen, device=dev)
        logits = model(ids)
        loss = nn.functional.cross_entropy(logits.flatten(0, 1).float(), ids.flatten())
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
    torch.cuda.synchronize()
    torch.cuda.memory._dump_snapshot(ARGS.out)
    print(f"userrecord.py {ARGS.case}: wrote {ARGS.out}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
