#!/usr/bin/env python3
"""Snapshots written with each of torch's recording modes, not `memdiag run`,
for checking what memdiag makes of what each mode keeps. Each case trains an
encoder LM with AdamW for a few steps (every step's logits kept for metrics:
a leak) and writes one snapshot:

    python3 examples/snapmodes.py --case state --out state.pickle
    memdiag summary state.pickle

  state      _record_memory_history(enabled="state"): each block's stack, no trace
  norecord   no recording at all: _dump_snapshot() of the segments and blocks,
             no stacks, no trace
  public     torch.cuda.memory_snapshot() pickled: the bare list of segments
  allocctx   _record_memory_history(context="alloc"): frees carry no stack
  pystacks   _record_memory_history(stacks="python")
  oomdump    the recipe of PyTorch's memory blog: an out-of-memory observer that
             dumps the snapshot when an allocation fails (a batch of 64 after
             the steps, under set_per_process_memory_fraction)
"""
from __future__ import annotations

import argparse
import pickle
import sys

CASES = ("state", "norecord", "public", "allocctx", "pystacks", "oomdump")


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


def record(case: str) -> None:
    if case == "state":
        torch.cuda.memory._record_memory_history(enabled="state")
    elif case == "allocctx":
        torch.cuda.memory._record_memory_history(context="alloc")
    elif case == "pystacks":
        torch.cuda.memory._record_memory_history(stacks="python")
    elif case == "oomdump":
        torch.cuda.memory._record_memory_history()

        def observer(device, alloc, device_alloc, device_free):
            torch.cuda.memory._dump_snapshot(ARGS.out)
        torch._C._cuda_attach_out_of_memory_observer(observer)


def step(model: nn.Module, opt: torch.optim.Optimizer, ids: torch.Tensor) -> torch.Tensor:
    logits = model(ids)
    loss = nn.functional.cross_entropy(logits.flatten(0, 1).float(), ids.flatten())
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)
    return logits.detach()


def main() -> int:
    if not torch.cuda.is_available():
        print("snapmodes.py: CUDA is not available", file=sys.stderr)
        return 2
    dev = torch.device("cuda", 0)
    torch.cuda.set_device(dev)
    torch.manual_seed(0)
    record(ARGS.case)
    model = encoder_lm(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    gen = torch.Generator(device=dev).manual_seed(0)
    kept = []
    for _ in range(ARGS.steps):
        ids = torch.randint(VOCAB, (BATCH, SEQ), generator=gen, device=dev)
        kept.append(step(model, opt, ids))  # for metrics later: 500 MiB a step
    torch.cuda.synchronize()
    if ARGS.case == "oomdump":
        torch.cuda.set_per_process_memory_fraction(12 * 2**30 / torch.cuda.get_device_properties(dev).total_memory)
        try:
            step(model, opt, torch.randint(VOCAB, (64, SEQ), generator=gen, device=dev))
        except torch.OutOfMemoryError:
            print("snapmodes.py oomdump: out of memory, as planned", flush=True)
    elif ARGS.case == "public":
        with open(ARGS.out, "wb") as f:
            pickle.dump(torch.cuda.memory_snapshot(), f)
    else:
        torch.cuda.memory._dump_snapshot(ARGS.out)
    print(f"snapmodes.py {ARGS.case}: wrote {ARGS.out}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
