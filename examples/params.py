#!/usr/bin/env python3
"""Where a model's parameters come from, for checking memdiag's categories
and optimizer_state finding (none leaks). Run a case under `memdiag run`:

    memdiag run -- python3 examples/params.py --case ensemble

  ensemble  8 MLPs trained at once: torch.func.stack_module_state stacks their
            weights, vmap over functional_call runs them, AdamW steps the stacks
  buffers   a GPT with nanoGPT's causal-mask buffers (block 4096: 64 MiB per layer)
  metainit  a model built on the meta device, then to_empty(device="cuda") and
            initialised in place (how large models are built)
"""
from __future__ import annotations

import argparse
import copy
import sys

CASES = ("ensemble", "buffers", "metainit")


def parse() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--case", required=True, choices=CASES)
    p.add_argument("--steps", type=int, default=9)
    return p.parse_args()


ARGS = parse()

import torch  # noqa: E402
from torch import nn  # noqa: E402

VOCAB, WIDTH, BLOCK = 16384, 768, 4096


class MaskedAttention(nn.Module):
    """nanoGPT's attention without flash: a causal mask kept as a buffer."""

    def __init__(self):
        super().__init__()
        self.qkv, self.proj = nn.Linear(WIDTH, 3 * WIDTH), nn.Linear(WIDTH, WIDTH)
        self.register_buffer("bias", torch.tril(torch.ones(BLOCK, BLOCK)).view(1, 1, BLOCK, BLOCK))

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = self.qkv(x).split(WIDTH, dim=2)
        q, k, v = (z.view(b, t, 12, c // 12).transpose(1, 2) for z in (q, k, v))
        att = (q @ k.transpose(-2, -1)) * (1.0 / (c // 12) ** 0.5)
        att = att.masked_fill(self.bias[:, :, :t, :t] == 0, float("-inf")).softmax(dim=-1)
        return self.proj((att @ v).transpose(1, 2).contiguous().view(b, t, c))


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(WIDTH), nn.LayerNorm(WIDTH)
        self.attn = MaskedAttention()
        self.mlp = nn.Sequential(nn.Linear(WIDTH, 4 * WIDTH), nn.GELU(), nn.Linear(4 * WIDTH, WIDTH))

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


def gpt(layers: int) -> nn.Module:
    return nn.Sequential(nn.Embedding(VOCAB, WIDTH), *[Block() for _ in range(layers)],
                         nn.LayerNorm(WIDTH), nn.Linear(WIDTH, VOCAB, bias=False))


def lm_steps(model: nn.Module, dev: torch.device, steps: int, seq: int) -> None:
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    gen = torch.Generator(device=dev).manual_seed(0)
    for _ in range(steps):
        ids = torch.randint(VOCAB, (4, seq), generator=gen, device=dev)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            logits = model(ids)
        loss = nn.functional.cross_entropy(logits.flatten(0, 1).float(), ids.flatten())
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)


def ensemble(a: argparse.Namespace, dev: torch.device) -> None:
    models = [nn.Sequential(nn.Linear(1024, 2048), nn.GELU(), nn.Linear(2048, 2048), nn.GELU(),
                            nn.Linear(2048, 10)).to(dev) for _ in range(8)]
    params, buffers = torch.func.stack_module_state(models)
    base = copy.deepcopy(models[0]).to("meta")
    del models

    def one(p, b, x):
        return torch.func.functional_call(base, (p, b), (x,))

    opt = torch.optim.AdamW(params.values(), lr=1e-4)
    gen = torch.Generator(device=dev).manual_seed(0)
    for _ in range(a.steps):
        x = torch.randn(8, 256, 1024, generator=gen, device=dev)
        y = torch.randint(10, (8, 256), generator=gen, device=dev)
        out = torch.vmap(one)(params, buffers, x)
        loss = nn.functional.cross_entropy(out.flatten(0, 1), y.flatten())
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)


def buffers(a: argparse.Namespace, dev: torch.device) -> None:
    lm_steps(gpt(6).to(dev), dev, a.steps, 512)


def metainit(a: argparse.Namespace, dev: torch.device) -> None:
    with torch.device("meta"):
        model = gpt(6)
    model.to_empty(device=dev)
    for m in model.modules():
        if hasattr(m, "reset_parameters"):
            m.reset_parameters()
    for blk in model[1:7]:  # to_empty leaves buffers uninitialised too
        blk.attn.bias.copy_(torch.tril(torch.ones(BLOCK, BLOCK, device=dev)).view(1, 1, BLOCK, BLOCK))
    lm_steps(model, dev, a.steps, 512)


def main() -> int:
    if not torch.cuda.is_available():
        print("params.py: CUDA is not available", file=sys.stderr)
        return 2
    dev = torch.device("cuda", 0)
    torch.cuda.set_device(dev)
    torch.manual_seed(0)
    {"ensemble": ensemble, "buffers": buffers, "metainit": metainit}[ARGS.case](ARGS, dev)
    torch.cuda.synchronize()
    print(f"params.py {ARGS.case}: done", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
