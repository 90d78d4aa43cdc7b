#!/usr/bin/env python3
"""A snapshot whose recording starts in the middle of training, as when one
turns torch's recorder on at step N to look at a later step: the weights
and the optimizer's state were both made before the recorded history.

    python3 examples/midrecord.py --out mid.pickle
    memdiag summary mid.pickle
"""
from __future__ import annotations

import argparse
import sys


def parse() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", required=True)
    p.add_argument("--stacks", choices=("python", "all"), default="python")
    p.add_argument("--start", type=int, default=3, help="steps before the recording starts")
    p.add_argument("--steps", type=int, default=4, help="steps recorded")
    return p.parse_args()


ARGS = parse()

import torch  # noqa: E402
from torch import nn  # noqa: E402

VOCAB, WIDTH, LAYERS, SEQ, BATCH = 32000, 768, 6, 512, 8


def main() -> int:
    if not torch.cuda.is_available():
        print("midrecord.py: CUDA is not available", file=sys.stderr)
        return 2
    dev = torch.device("cuda", 0)
    torch.cuda.set_device(dev)
    torch.manual_seed(0)
    layer = nn.TransformerEncoderLayer(WIDTH, 12, 4 * WIDTH, dropout=0.0, batch_first=True,
                                       norm_first=True)
    model = nn.Sequential(nn.Embedding(VOCAB, WIDTH), nn.TransformerEncoder(layer, LAYERS),
                          nn.Linear(WIDTH, VOCAB, bias=False)).to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    gen = torch.Generator(device=dev).manual_seed(0)
    for step in range(ARGS.start + ARGS.steps):
        if step == ARGS.start:
            torch.cuda.memory._record_memory_history(stacks=ARGS.stacks)
        ids = torch.randint(VOCAB, (BATCH, SEQ), generator=gen, device=dev)
        logits = model(ids)
        loss = nn.functional.cross_entropy(logits.flatten(0, 1).float(), ids.flatten())
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
    torch.cuda.synchronize()
    torch.cuda.memory._dump_snapshot(ARGS.out)
    print(f"midrecord.py: wrote {ARGS.out}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
