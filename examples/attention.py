#!/usr/bin/env python3
"""Attention written so that its seq x seq matrices are kept for backward,
beside the fused kernel that keeps none, for checking memdiag's activations
findings (none leaks). Run a case under `memdiag run`:

    memdiag run -- python3 examples/attention.py --case hfeager

  hfeager   a Llama from transformers with attn_implementation="eager" (what
            output_attentions=True needs), sequences of 2048, bf16 autocast
  hfsdpa    the same model and batch with attn_implementation="sdpa": the
            control, no attention matrices kept
  nanogpt   a GPT whose attention is written out as nanoGPT's fallback path
            (q @ k^T, a causal mask, softmax, @ v), sequences of 1024
"""
from __future__ import annotations

import argparse
import math
import sys

CASES = ("hfeager", "hfsdpa", "nanogpt")


def parse() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--case", required=True, choices=CASES)
    p.add_argument("--steps", type=int, default=9)
    return p.parse_args()


ARGS = parse()

import torch  # noqa: E402
from torch import nn  # noqa: E402

VOCAB = 32000


def hf_llama(attn: str, dev: torch.device, steps: int) -> None:
    import transformers
    cfg = transformers.LlamaConfig(vocab_size=VOCAB, hidden_size=768, intermediate_size=2048,
                                   num_hidden_layers=6, num_attention_heads=12,
                                   num_key_value_heads=4, max_position_embeddings=4096)
    model = transformers.AutoModelForCausalLM.from_config(cfg, attn_implementation=attn).to(dev)
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    gen = torch.Generator(device=dev).manual_seed(0)
    for _ in range(steps):
        ids = torch.randint(VOCAB, (2, 2048), generator=gen, device=dev)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = model(input_ids=ids, labels=ids).loss
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)


class Block(nn.Module):
    def __init__(self, width: int, heads: int, seq: int) -> None:
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = nn.LayerNorm(width), nn.LayerNorm(width)
        self.qkv, self.proj = nn.Linear(width, 3 * width), nn.Linear(width, width)
        self.mlp = nn.Sequential(nn.Linear(width, 4 * width), nn.GELU(), nn.Linear(4 * width, width))
        self.register_buffer("bias", torch.tril(torch.ones(seq, seq)).view(1, 1, seq, seq))

    def attend(self, x: torch.Tensor) -> torch.Tensor:
        b, t, c = x.shape
        q, k, v = self.qkv(x).split(c, dim=2)
        q, k, v = (z.view(b, t, self.heads, c // self.heads).transpose(1, 2) for z in (q, k, v))
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        att = att.masked_fill(self.bias[:, :, :t, :t] == 0, float("-inf"))
        att = nn.functional.softmax(att, dim=-1)
        y = (att @ v).transpose(1, 2).contiguous().view(b, t, c)
        return self.proj(y)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attend(self.ln1(x))
        return x + self.mlp(self.ln2(x))


def nanogpt(dev: torch.device, steps: int) -> None:
    width, heads, seq = 768, 12, 1024
    model = nn.Sequential(nn.Embedding(VOCAB, width), *[Block(width, heads, seq) for _ in range(6)],
                          nn.LayerNorm(width), nn.Linear(width, VOCAB, bias=False)).to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    gen = torch.Generator(device=dev).manual_seed(0)
    for _ in range(steps):
        ids = torch.randint(VOCAB, (4, seq), generator=gen, device=dev)
        logits = model(ids)
        loss = nn.functional.cross_entropy(logits.flatten(0, 1), ids.flatten())
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)


def main() -> int:
    if not torch.cuda.is_available():
        print("attention.py: CUDA is not available", file=sys.stderr)
        return 2
    dev = torch.device("cuda", 0)
    torch.cuda.set_device(dev)
    torch.manual_seed(0)
    if ARGS.case == "nanogpt":
        nanogpt(dev, ARGS.steps)
    else:
        hf_llama(ARGS.case[2:], dev, ARGS.steps)
    torch.cuda.synchronize()
    print(f"attention.py {ARGS.case}: done", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
