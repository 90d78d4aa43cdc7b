#!/usr/bin/env python3
"""An out-of-memory error at a later step, for checking what memdiag says
of the classic "it trained fine for hours, then died at step N": one batch
far longer than the others (sequences padded to the longest in the batch).
The process may use 6 GiB. Run a case under `memdiag run`:

    memdiag run -- python3 examples/outlier.py --case longbatch

  longbatch    5 steps at sequence 512, then a batch at 4096: its forward
               runs out of memory and the job dies
  longskip     the same, the error caught and the batch skipped (a common
               guard): training goes on at 512
"""
from __future__ import annotations

import argparse
import sys

CASES = ("longbatch", "longskip")


def parse() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--case", required=True, choices=CASES)
    p.add_argument("--steps", type=int, default=9)
    p.add_argument("--batch", type=int, default=8)
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


def main() -> int:
    a = ARGS
    if not torch.cuda.is_available():
        print("outlier.py: CUDA is not available", file=sys.stderr)
        return 2
    dev = torch.device("cuda", 0)
    torch.cuda.set_device(dev)
    torch.manual_seed(0)
    torch.cuda.set_per_process_memory_fraction(
        6 * 2**30 / torch.cuda.get_device_properties(dev).total_memory)
    model = encoder_lm(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    gen = torch.Generator(device=dev).manual_seed(0)
    for step in range(a.steps):
        seq = 4096 if step == 5 else 512  # the longest sample of this batch
        ids = torch.randint(VOCAB, (a.batch, seq), generator=gen, device=dev)
        try:
            with torch.autocast("cuda", dtype=torch.bfloat16):
                logits = model(ids)
                loss = nn.functional.cross_entropy(logits.flatten(0, 1).float(), ids.flatten())
            loss.backward()
            opt.step()
        except torch.cuda.OutOfMemoryError:
            if a.case == "longbatch":
                raise
            print(f"outlier.py: out of memory at step {step} (sequence {seq}), batch skipped",
                  flush=True)
        opt.zero_grad(set_to_none=True)
        print(f"step {step}: sequence {seq}", flush=True)
    torch.cuda.synchronize()
    print(f"outlier.py {a.case}: done", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
