#!/usr/bin/env python3
"""Memory that grows by design, for checking that memdiag tells it from a
leak (neither case leaks). Run a case under `memdiag run`:

    memdiag run -- python3 examples/growth.py --case addgroups

  accumgraph  4 micro-batches a step whose losses are summed before one backward:
              every micro-batch's graph is live at once (accumulation saves nothing)
  addgroups   layer-wise unfreezing: every other step one more block's parameters
              join the optimizer (add_param_group), whose state grows with them
"""
from __future__ import annotations

import argparse
import sys

import torch
from torch import nn

VOCAB, WIDTH = 16384, 768


def parse() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--case", required=True, choices=("accumgraph", "addgroups"))
    p.add_argument("--steps", type=int, default=9)
    return p.parse_args()


def blocks(dev: torch.device) -> nn.ModuleList:
    return nn.ModuleList(nn.TransformerEncoderLayer(WIDTH, 12, 4 * WIDTH, dropout=0.0,
                                                    batch_first=True, norm_first=True)
                         for _ in range(6)).to(dev)


def run(a: argparse.Namespace, dev: torch.device) -> None:
    embed, layers = nn.Embedding(VOCAB, WIDTH).to(dev), blocks(dev)
    head = nn.Linear(WIDTH, VOCAB, bias=False).to(dev)
    if a.case == "addgroups":  # the head first, then the blocks from the top down
        layers.requires_grad_(False)
        embed.requires_grad_(False)
        opt = torch.optim.AdamW(head.parameters(), lr=1e-4)
    else:
        opt = torch.optim.AdamW([*embed.parameters(), *layers.parameters(), *head.parameters()],
                                lr=1e-4)
    gen = torch.Generator(device=dev).manual_seed(0)
    micro = 4 if a.case == "accumgraph" else 1
    unfrozen = 0
    for step in range(a.steps):
        if a.case == "addgroups" and step % 2 == 1 and unfrozen < len(layers):
            block = layers[len(layers) - 1 - unfrozen]
            block.requires_grad_(True)
            opt.add_param_group({"params": list(block.parameters())})
            unfrozen += 1
        losses = []
        for _ in range(micro):
            ids = torch.randint(VOCAB, (8 // micro if micro > 1 else 8, 512), generator=gen,
                                device=dev)
            with torch.autocast("cuda", dtype=torch.bfloat16):
                x = embed(ids)
                for layer in layers:
                    x = layer(x)
                losses.append(nn.functional.cross_entropy(head(x).flatten(0, 1).float(),
                                                          ids.flatten()))
        (sum(losses) / micro).backward()  # one backward over every micro-batch's graph
        opt.step()
        opt.zero_grad(set_to_none=True)


def main() -> int:
    a = parse()
    if not torch.cuda.is_available():
        print("growth.py: CUDA is not available", file=sys.stderr)
        return 2
    dev = torch.device("cuda", 0)
    torch.cuda.set_device(dev)
    torch.manual_seed(0)
    run(a, dev)
    torch.cuda.synchronize()
    return 0


if __name__ == "__main__":
    sys.exit(main())
