#!/usr/bin/env python3
"""The caching allocator's settings and pools, for checking that memdiag's
replay follows torch's rules under them (snapshot and capture agree; none
leaks). Sequences of random lengths make blocks of many sizes. Run a case
under `memdiag run`:

    memdiag run -- python3 examples/allocconf.py --case maxsplit

  maxsplit  PYTORCH_CUDA_ALLOC_CONF=max_split_size_mb:64 (larger cached blocks never split)
  roundup   PYTORCH_CUDA_ALLOC_CONF=roundup_power2_divisions:4 (sizes rounded up to
            quarter powers of two)
  gcthresh  PYTORCH_CUDA_ALLOC_CONF=garbage_collection_threshold:0.6 in a process capped
            at 3 GiB: the allocator frees cached blocks as it nears the cap
  mempool   a 1 GiB buffer allocated in a torch.cuda.MemPool of its own beside training
"""
from __future__ import annotations

import argparse
import os
import sys

CASES = ("maxsplit", "roundup", "gcthresh", "mempool")
CONF = {"maxsplit": "max_split_size_mb:64", "roundup": "roundup_power2_divisions:4",
        "gcthresh": "garbage_collection_threshold:0.6"}


def parse() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--case", required=True, choices=CASES)
    p.add_argument("--steps", type=int, default=9)
    return p.parse_args()


ARGS = parse()
if ARGS.case in CONF:  # read by the allocator when CUDA starts: set before torch
    os.environ["PYTORCH_CUDA_ALLOC_CONF"] = CONF[ARGS.case]

import torch  # noqa: E402
from torch import nn  # noqa: E402

VOCAB, WIDTH = 16384, 768


def encoder_lm(dev: torch.device) -> nn.Module:
    layer = nn.TransformerEncoderLayer(WIDTH, 12, 4 * WIDTH, dropout=0.0, batch_first=True,
                                       norm_first=True)
    return nn.Sequential(nn.Embedding(VOCAB, WIDTH), nn.TransformerEncoder(layer, 6),
                         nn.Linear(WIDTH, VOCAB, bias=False)).to(dev)


def run(a: argparse.Namespace, dev: torch.device) -> None:
    if a.case == "gcthresh":
        cap = 3 << 30
        torch.cuda.set_per_process_memory_fraction(cap / torch.cuda.get_device_properties(dev).total_memory)
    model = encoder_lm(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    pool = buffer = None
    if a.case == "mempool":
        pool = torch.cuda.MemPool()
        with torch.cuda.use_mem_pool(pool):
            buffer = torch.zeros(1 << 30, dtype=torch.uint8, device=dev)
    gen = torch.Generator(device=dev).manual_seed(0)
    lens = torch.randint(64, 1025, (a.steps,), generator=torch.Generator().manual_seed(0))
    for step in range(a.steps):
        ids = torch.randint(VOCAB, (8, int(lens[step])), generator=gen, device=dev)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            logits = model(ids)
        loss = nn.functional.cross_entropy(logits.flatten(0, 1).float(), ids.flatten())
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
    if buffer is not None:
        buffer.add_(1)


def main() -> int:
    if not torch.cuda.is_available():
        print("allocconf.py: CUDA is not available", file=sys.stderr)
        return 2
    dev = torch.device("cuda", 0)
    torch.cuda.set_device(dev)
    torch.manual_seed(0)
    run(ARGS, dev)
    torch.cuda.synchronize()
    print(f"allocconf.py {ARGS.case}: done", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
