#!/usr/bin/env python3
"""How a job is set up, for checking memdiag's findings on memory that its
set-up, not its model, decides (none leaks). Run a case under `memdiag run`:

    memdiag run -- python3 examples/launch.py --case autotune

  autotune  torch.compile(mode="max-autotune-no-cudagraphs"): the first step
            benchmarks kernel choices on the GPU
  prealloc  40 GiB allocated and freed at the start, to hold the GPU for the job
  samegpu   DDP over gloo on 2 processes that never chose a device: both on cuda:0
            (torchrun --nproc-per-node 2)
"""
from __future__ import annotations

import argparse
import os
import sys

CASES = ("autotune", "prealloc", "samegpu")


def parse() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--case", required=True, choices=CASES)
    p.add_argument("--steps", type=int, default=9)
    return p.parse_args()


ARGS = parse()

import torch  # noqa: E402
from torch import nn  # noqa: E402

VOCAB, WIDTH, SEQ = 16384, 768, 512


def encoder_lm(dev: torch.device) -> nn.Module:
    layer = nn.TransformerEncoderLayer(WIDTH, 12, 4 * WIDTH, dropout=0.0, batch_first=True,
                                       norm_first=True)
    return nn.Sequential(nn.Embedding(VOCAB, WIDTH), nn.TransformerEncoder(layer, 6),
                         nn.Linear(WIDTH, VOCAB, bias=False)).to(dev)


def train(model: nn.Module, params, dev: torch.device, steps: int) -> None:
    opt = torch.optim.AdamW(params, lr=1e-4)
    gen = torch.Generator(device=dev).manual_seed(0)
    for _ in range(steps):
        ids = torch.randint(VOCAB, (8, SEQ), generator=gen, device=dev)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            logits = model(ids)
            loss = nn.functional.cross_entropy(logits.flatten(0, 1).float(), ids.flatten())
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)


def autotune(a: argparse.Namespace, dev: torch.device) -> None:
    model = encoder_lm(dev)
    compiled = torch.compile(model, mode="max-autotune-no-cudagraphs")
    train(compiled, model.parameters(), dev, a.steps)


def prealloc(a: argparse.Namespace, dev: torch.device) -> None:
    hold = torch.empty(40 << 30, dtype=torch.uint8, device=dev)  # "reserve the GPU"
    del hold
    model = encoder_lm(dev)
    train(model, model.parameters(), dev, a.steps)


def samegpu(a: argparse.Namespace, dev: torch.device) -> None:
    torch.distributed.init_process_group("gloo")
    model = encoder_lm(dev)
    ddp = nn.parallel.DistributedDataParallel(model)
    train(ddp, ddp.parameters(), dev, a.steps)
    torch.distributed.destroy_process_group()


def main() -> int:
    if not torch.cuda.is_available():
        print("launch.py: CUDA is not available", file=sys.stderr)
        return 2
    dev = torch.device("cuda")  # samegpu: LOCAL_RANK never read
    if ARGS.case != "samegpu":
        dev = torch.device("cuda", 0)
        torch.cuda.set_device(dev)
    torch.manual_seed(0)
    {"autotune": autotune, "prealloc": prealloc, "samegpu": samegpu}[ARGS.case](ARGS, dev)
    torch.cuda.synchronize()
    print(f"launch.py {ARGS.case} (rank {os.environ.get('RANK', '0')}): done", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
