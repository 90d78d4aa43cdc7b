#!/usr/bin/env python3
"""Large tensors the training code builds itself, outside the model, for
checking memdiag's diagnosis on code it was not written against (none
leaks). Run a case under `memdiag run`:

    memdiag run -- python3 examples/builds.py --case pairdist

  pairdist  metric learning with in-batch negatives: the pairwise distances of
            1024 embeddings computed by broadcasting, (a[:, None] - b[None]).norm(-1),
            which makes a 1024 x 1024 x 768 tensor (3 GiB) and saves it for backward
  cdist     the same distances with torch.cdist (the control)
  bigmask   a transformer trained with an additive float attention mask built in
            the loop for every head, (batch, heads, seq, seq) in bf16 (1 GiB), passed
            to scaled_dot_product_attention
  causal    the same model with is_causal=True and no mask (the control)
"""
from __future__ import annotations

import argparse
import sys

CASES = ("pairdist", "cdist", "bigmask", "causal")


def parse() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--case", required=True, choices=CASES)
    p.add_argument("--steps", type=int, default=6)
    return p.parse_args()


ARGS = parse()

import torch  # noqa: E402
from torch import nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402


class Encoder(nn.Module):
    def __init__(self, width: int = 768) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(2048, 2048), nn.GELU(), nn.Linear(2048, 2048),
                                 nn.GELU(), nn.Linear(2048, width))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.normalize(self.net(x), dim=-1)


def metric(a: argparse.Namespace, dev: torch.device) -> None:
    model = Encoder().to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    gen = torch.Generator(device=dev).manual_seed(0)
    for step in range(a.steps):
        x = torch.randn(1024, 2048, generator=gen, device=dev)
        anchor, positive = model(x), model(x + 0.1 * torch.randn_like(x))
        if a.case == "pairdist":
            dist = (anchor[:, None, :] - positive[None, :, :]).norm(dim=-1)
        else:
            dist = torch.cdist(anchor, positive)
        loss = F.cross_entropy(-dist / 0.1, torch.arange(1024, device=dev))
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        print(f"step {step}: loss {loss.item():.3f}", flush=True)


class Block(nn.Module):
    def __init__(self, width: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.norm1, self.norm2 = nn.LayerNorm(width), nn.LayerNorm(width)
        self.qkv, self.out = nn.Linear(width, 3 * width), nn.Linear(width, width)
        self.mlp = nn.Sequential(nn.Linear(width, 4 * width), nn.GELU(), nn.Linear(4 * width, width))

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
        b, s, w = x.shape
        q, k, v = self.qkv(self.norm1(x)).view(b, s, 3, self.heads, w // self.heads).unbind(2)
        y = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2),
                                           attn_mask=mask, is_causal=mask is None)
        x = x + self.out(y.transpose(1, 2).reshape(b, s, w))
        return x + self.mlp(self.norm2(x))


def masked(a: argparse.Namespace, dev: torch.device) -> None:
    vocab, width, heads, batch, seq = 32000, 1024, 16, 8, 2048
    emb, head = nn.Embedding(vocab, width).to(dev), nn.Linear(width, vocab, bias=False).to(dev)
    blocks = nn.ModuleList(Block(width, heads) for _ in range(6)).to(dev)
    params = [*emb.parameters(), *blocks.parameters(), *head.parameters()]
    opt = torch.optim.AdamW(params, lr=1e-4)
    gen = torch.Generator(device=dev).manual_seed(0)
    for step in range(a.steps):
        ids = torch.randint(vocab, (batch, seq), generator=gen, device=dev)
        mask = None
        if a.case == "bigmask":
            mask = torch.full((batch, heads, seq, seq), float("-inf"), device=dev,
                              dtype=torch.bfloat16).triu(1)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            x = emb(ids)
            for blk in blocks:
                x = blk(x, mask)
            loss = F.cross_entropy(head(x).flatten(0, 1).float(), ids.flatten())
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        print(f"step {step}: loss {loss.item():.3f}", flush=True)


def main() -> int:
    if not torch.cuda.is_available():
        print("builds.py: CUDA is not available", file=sys.stderr)
        return 2
    dev = torch.device("cuda", 0)
    torch.cuda.set_device(dev)
    torch.manual_seed(0)
    (metric if ARGS.case in ("pairdist", "cdist") else masked)(ARGS, dev)
    torch.cuda.synchronize()
    print(f"builds.py {ARGS.case}: done", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
