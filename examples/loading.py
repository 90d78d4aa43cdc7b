#!/usr/bin/env python3
"""Ways weights reach the GPU before training, for checking memdiag's
categories and what it says of a loaded checkpoint (none leaks). Run a case
under `memdiag run`:

    memdiag run -- python3 examples/loading.py --case defaultdev

  defaultdev   torch.set_default_device("cuda") before anything is built: the
               model, its inputs and every factory call land on the GPU
  safekept     a safetensors checkpoint loaded straight onto the GPU
               (load_file(device="cuda")) into a model already there, the
               loaded dict still referenced while training
  assignload   a model built on the meta device and given a checkpoint's
               tensors with load_state_dict(assign=True) (torch.load with
               map_location="cuda"): the loaded tensors are the parameters
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile

CASES = ("defaultdev", "safekept", "assignload")


def parse() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--case", required=True, choices=CASES)
    p.add_argument("--steps", type=int, default=9)
    return p.parse_args()


ARGS = parse()

import torch  # noqa: E402
from torch import nn  # noqa: E402

VOCAB, WIDTH, LAYERS, SEQ, BATCH = 32000, 768, 6, 512, 8


def encoder_lm() -> nn.Module:
    layer = nn.TransformerEncoderLayer(WIDTH, 12, 4 * WIDTH, dropout=0.0, batch_first=True,
                                       norm_first=True)
    return nn.Sequential(nn.Embedding(VOCAB, WIDTH), nn.TransformerEncoder(layer, LAYERS),
                         nn.Linear(WIDTH, VOCAB, bias=False))


def train(model: nn.Module, dev: torch.device, steps: int) -> None:
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    gen = torch.Generator(device=dev).manual_seed(0)
    for _ in range(steps):
        ids = torch.randint(VOCAB, (BATCH, SEQ), generator=gen, device=dev)
        logits = model(ids)
        loss = nn.functional.cross_entropy(logits.flatten(0, 1).float(), ids.flatten())
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)


def defaultdev(a: argparse.Namespace, dev: torch.device) -> None:
    torch.set_default_device(dev)
    train(encoder_lm(), dev, a.steps)


def safekept(a: argparse.Namespace, dev: torch.device, d: str) -> None:
    from safetensors.torch import load_file, save_file
    path = os.path.join(d, "model.safetensors")
    save_file(encoder_lm().state_dict(), path)
    model = encoder_lm().to(dev)
    state = load_file(path, device="cuda:0")
    model.load_state_dict(state)
    train(model, dev, a.steps)


def assignload(a: argparse.Namespace, dev: torch.device, d: str) -> None:
    path = os.path.join(d, "model.pt")
    torch.save(encoder_lm().state_dict(), path)
    with torch.device("meta"):
        model = encoder_lm()
    model.load_state_dict(torch.load(path, map_location=dev), assign=True)
    train(model, dev, a.steps)


def main() -> int:
    if not torch.cuda.is_available():
        print("loading.py: CUDA is not available", file=sys.stderr)
        return 2
    dev = torch.device("cuda", 0)
    torch.cuda.set_device(dev)
    torch.manual_seed(0)
    if ARGS.case == "defaultdev":
        defaultdev(ARGS, dev)
    else:
        with tempfile.TemporaryDirectory() as d:
            {"safekept": safekept, "assignload": assignload}[ARGS.case](ARGS, dev, d)
    torch.cuda.synchronize()
    print(f"loading.py {ARGS.case}: done", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
