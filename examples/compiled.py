#!/usr/bin/env python3
"""Training with compiled pieces beyond the model, for checking what
memdiag says when the optimizer step or the attention is compiled code.
Run a case under `memdiag run`:

    memdiag run -- python3 examples/compiled.py --case compiledopt

  compiledopt  the optimizer step compiled (PyTorch's "compiling the
               optimizer" recipe: @torch.compile around opt.step()), AdamW's
               state made inside compiled code
  flexattn     a causal LM whose attention is FlexAttention (a compiled
               flex_attention with a causal block mask): no seq x seq matrix
               is kept, and none should be advised away
"""
from __future__ import annotations

import argparse
import sys

CASES = ("compiledopt", "flexattn")


def parse() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--case", required=True, choices=CASES)
    p.add_argument("--steps", type=int, default=6)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--seq", type=int, default=1024)
    return p.parse_args()


ARGS = parse()

import torch  # noqa: E402
from torch import nn  # noqa: E402

VOCAB, WIDTH, HEADS, LAYERS = 16384, 768, 12, 6


def encoder_lm(dev: torch.device) -> nn.Module:
    layer = nn.TransformerEncoderLayer(WIDTH, HEADS, 4 * WIDTH, dropout=0.0, batch_first=True,
                                       norm_first=True)
    return nn.Sequential(nn.Embedding(VOCAB, WIDTH), nn.TransformerEncoder(layer, LAYERS),
                         nn.Linear(WIDTH, VOCAB, bias=False)).to(dev)


class FlexBlock(nn.Module):
    def __init__(self, attend) -> None:
        super().__init__()
        self.attend = attend
        self.norm1, self.norm2 = nn.LayerNorm(WIDTH), nn.LayerNorm(WIDTH)
        self.qkv, self.out = nn.Linear(WIDTH, 3 * WIDTH), nn.Linear(WIDTH, WIDTH)
        self.mlp = nn.Sequential(nn.Linear(WIDTH, 4 * WIDTH), nn.GELU(), nn.Linear(4 * WIDTH, WIDTH))

    def forward(self, x: torch.Tensor, mask) -> torch.Tensor:
        b, s, _ = x.shape
        q, k, v = self.qkv(self.norm1(x)).view(b, s, 3, HEADS, WIDTH // HEADS).unbind(2)
        y = self.attend(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), block_mask=mask)
        x = x + self.out(y.transpose(1, 2).reshape(b, s, WIDTH))
        return x + self.mlp(self.norm2(x))


class FlexLM(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        from torch.nn.attention.flex_attention import flex_attention
        attend = torch.compile(flex_attention)
        self.embed = nn.Embedding(VOCAB, WIDTH)
        self.blocks = nn.ModuleList(FlexBlock(attend) for _ in range(LAYERS))
        self.head = nn.Linear(WIDTH, VOCAB, bias=False)

    def forward(self, ids: torch.Tensor, mask) -> torch.Tensor:
        x = self.embed(ids)
        for blk in self.blocks:
            x = blk(x, mask)
        return self.head(x)


def loss_of(logits: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
    return nn.functional.cross_entropy(logits.flatten(0, 1).float(), ids.flatten())


def compiled_opt(a: argparse.Namespace, dev: torch.device) -> None:
    model = encoder_lm(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=torch.tensor(1e-4))

    @torch.compile(fullgraph=False)
    def opt_step() -> None:
        opt.step()

    gen = torch.Generator(device=dev).manual_seed(0)
    for step in range(a.steps):
        ids = torch.randint(VOCAB, (a.batch, a.seq // 2), generator=gen, device=dev)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = loss_of(model(ids), ids)
        loss.backward()
        opt_step()
        opt.zero_grad(set_to_none=True)
        print(f"step {step}: loss {loss.item():.3f}", flush=True)


def flex(a: argparse.Namespace, dev: torch.device) -> None:
    from torch.nn.attention.flex_attention import create_block_mask
    model = FlexLM().to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    mask = create_block_mask(lambda b, h, q, kv: q >= kv, B=None, H=None, Q_LEN=a.seq,
                             KV_LEN=a.seq, device=dev)
    gen = torch.Generator(device=dev).manual_seed(0)
    for step in range(a.steps):
        ids = torch.randint(VOCAB, (a.batch, a.seq), generator=gen, device=dev)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = loss_of(model(ids, mask), ids)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        print(f"step {step}: loss {loss.item():.3f}", flush=True)


def main() -> int:
    if not torch.cuda.is_available():
        print("compiled.py: CUDA is not available", file=sys.stderr)
        return 2
    dev = torch.device("cuda", 0)
    torch.cuda.set_device(dev)
    torch.manual_seed(0)
    (compiled_opt if ARGS.case == "compiledopt" else flex)(ARGS, dev)
    torch.cuda.synchronize()
    print(f"compiled.py {ARGS.case}: done", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
