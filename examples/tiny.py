#!/usr/bin/env python3
"""A dataset kept on the GPU as many small tensors, for checking what
memdiag says when the allocator's block rounding, not the data, is most of
the memory ("memory_allocated says 1 GB, my tensors add up to 100 MB").
Every block is a multiple of 512 bytes, so a tensor of a few bytes takes 512.
Run a case under `memdiag run`:

    memdiag run -- python3 examples/tiny.py --case tinylabels

  tinylabels  100 000 samples, each a token sequence of 64 int16 (128 bytes)
              and a label, moved to the GPU one sample at a time and kept in
              Python lists; an MLP trains on batches gathered from them
  packed      the same data as two tensors (the control)
"""
from __future__ import annotations

import argparse
import sys

CASES = ("tinylabels", "packed")


def parse() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--case", required=True, choices=CASES)
    p.add_argument("--samples", type=int, default=100_000)
    p.add_argument("--steps", type=int, default=6)
    p.add_argument("--batch", type=int, default=256)
    return p.parse_args()


ARGS = parse()

import torch  # noqa: E402
from torch import nn  # noqa: E402

SEQ, VOCAB, CLASSES = 64, 8192, 10


def main() -> int:
    a = ARGS
    if not torch.cuda.is_available():
        print("tiny.py: CUDA is not available", file=sys.stderr)
        return 2
    dev = torch.device("cuda", 0)
    torch.cuda.set_device(dev)
    torch.manual_seed(0)
    tokens = torch.randint(VOCAB, (a.samples, SEQ), dtype=torch.int16)
    labels = torch.randint(CLASSES, (a.samples,))
    if a.case == "tinylabels":  # a Dataset that caches each sample on the GPU
        xs = [t.to(dev) for t in tokens]
        ys = [y.to(dev) for y in labels]
    else:
        xs, ys = tokens.to(dev), labels.to(dev)
    model = nn.Sequential(nn.EmbeddingBag(VOCAB, 512), nn.Linear(512, 1024), nn.ReLU(),
                          nn.Linear(1024, CLASSES)).to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    gen = torch.Generator().manual_seed(0)
    for step in range(a.steps):
        idx = torch.randint(a.samples, (a.batch,), generator=gen)
        if a.case == "tinylabels":
            x = torch.stack([xs[i] for i in idx.tolist()]).long()
            y = torch.stack([ys[i] for i in idx.tolist()])
        else:
            x, y = xs[idx.to(dev)].long(), ys[idx.to(dev)]
        loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        print(f"step {step}: loss {loss.item():.3f}", flush=True)
    torch.cuda.synchronize()
    print(f"tiny.py {a.case}: done", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
