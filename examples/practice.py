#!/usr/bin/env python3
"""Everyday practice whose memory surprises, for checking memdiag's diagnosis
on it (only extleak leaks). Run a case under `memdiag run`:

    memdiag run -- python3 examples/practice.py --case optpeak

  optpeak     a 537M-parameter MLP at batch 4 with AdamW (foreach, torch's default):
              the peak is in the optimizer step
  optfused    the same with AdamW(fused=True)
  extleak     every step 64 MiB from cudaMalloc (a C extension's buffer), never freed
  prune       iterative magnitude pruning (torch.nn.utils.prune) every third step
  clip        CLIP-style contrastive loss over a batch of 8192 pairs (8192 x 8192 logits)
  mhaweights  a hand-written transformer block whose nn.MultiheadAttention returns its
              attention weights (need_weights=True, the default) at 2048 tokens
"""
from __future__ import annotations

import argparse
import ctypes
import sys

CASES = ("optpeak", "optfused", "extleak", "prune", "clip", "mhaweights")


def parse() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--case", required=True, choices=CASES)
    p.add_argument("--steps", type=int, default=9)
    return p.parse_args()


ARGS = parse()

import torch  # noqa: E402
from torch import nn  # noqa: E402
from torch.nn.utils import prune as nnprune  # noqa: E402

VOCAB, WIDTH = 16384, 768


def encoder_lm(dev: torch.device) -> nn.Module:
    layer = nn.TransformerEncoderLayer(WIDTH, 12, 4 * WIDTH, dropout=0.0, batch_first=True,
                                       norm_first=True)
    return nn.Sequential(nn.Embedding(VOCAB, WIDTH), nn.TransformerEncoder(layer, 6),
                         nn.Linear(WIDTH, VOCAB, bias=False)).to(dev)


def lm_step(model: nn.Module, opt: torch.optim.Optimizer, gen: torch.Generator,
            dev: torch.device, batch: int = 8, seq: int = 512) -> None:
    ids = torch.randint(VOCAB, (batch, seq), generator=gen, device=dev)
    with torch.autocast("cuda", dtype=torch.bfloat16):
        logits = model(ids)
        loss = nn.functional.cross_entropy(logits.flatten(0, 1).float(), ids.flatten())
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)


def optimizer_peak(a: argparse.Namespace, dev: torch.device, fused: bool) -> None:
    net = nn.Sequential(*[nn.Linear(8192, 8192) for _ in range(8)]).to(dev)
    opt = torch.optim.AdamW(net.parameters(), lr=1e-4, fused=fused)
    gen = torch.Generator(device=dev).manual_seed(0)
    for _ in range(a.steps):
        x = torch.randn(4, 8192, generator=gen, device=dev)
        net(x).square().mean().backward()
        opt.step()
        opt.zero_grad(set_to_none=True)


def external_leak(a: argparse.Namespace, dev: torch.device) -> None:
    cudart = None
    for name in ("libcudart.so.13", "libcudart.so.12", "libcudart.so"):  # torch's own, loaded
        try:
            cudart = ctypes.CDLL(name)
            break
        except OSError:
            continue
    if cudart is None:
        raise RuntimeError("no libcudart to call cudaMalloc with")
    model = encoder_lm(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    gen = torch.Generator(device=dev).manual_seed(0)
    kept = []
    for _ in range(a.steps):
        lm_step(model, opt, gen, dev)
        ptr = ctypes.c_void_p()
        if cudart.cudaMalloc(ctypes.byref(ptr), ctypes.c_size_t(64 << 20)):
            raise RuntimeError("cudaMalloc failed")
        kept.append(ptr)  # a buffer the extension never frees


def pruning(a: argparse.Namespace, dev: torch.device) -> None:
    model = encoder_lm(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    gen = torch.Generator(device=dev).manual_seed(0)
    # modules called as modules (not attention's out_proj, whose weight MHA reads directly)
    linears = [m for m in model.modules() if type(m) is nn.Linear]
    for step in range(a.steps):
        if step % 3 == 2:
            for m in linears:
                nnprune.l1_unstructured(m, "weight", amount=0.2)
        lm_step(model, opt, gen, dev)


def clip(a: argparse.Namespace, dev: torch.device) -> None:
    image = nn.Sequential(nn.Linear(2048, 2048), nn.GELU(), nn.Linear(2048, 512)).to(dev)
    text = nn.Sequential(nn.Linear(1024, 2048), nn.GELU(), nn.Linear(2048, 512)).to(dev)
    scale = nn.Parameter(torch.tensor(2.659, device=dev))
    opt = torch.optim.AdamW([*image.parameters(), *text.parameters(), scale], lr=1e-4)
    gen = torch.Generator(device=dev).manual_seed(0)
    n = 8192
    labels = torch.arange(n, device=dev)
    for _ in range(a.steps):
        img = nn.functional.normalize(image(torch.randn(n, 2048, generator=gen, device=dev)), dim=1)
        txt = nn.functional.normalize(text(torch.randn(n, 1024, generator=gen, device=dev)), dim=1)
        logits = scale.exp() * img @ txt.T
        loss = (nn.functional.cross_entropy(logits, labels) +
                nn.functional.cross_entropy(logits.T, labels)) / 2
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)


class Block(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.norm1, self.norm2 = nn.LayerNorm(WIDTH), nn.LayerNorm(WIDTH)
        self.attn = nn.MultiheadAttention(WIDTH, 12, batch_first=True)
        self.mlp = nn.Sequential(nn.Linear(WIDTH, 4 * WIDTH), nn.GELU(), nn.Linear(4 * WIDTH, WIDTH))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.norm1(x)
        x = x + self.attn(h, h, h)[0]  # need_weights defaults to True
        return x + self.mlp(self.norm2(x))


def mha_weights(a: argparse.Namespace, dev: torch.device) -> None:
    model = nn.Sequential(nn.Embedding(VOCAB, WIDTH), *[Block() for _ in range(4)],
                          nn.Linear(WIDTH, VOCAB, bias=False)).to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    gen = torch.Generator(device=dev).manual_seed(0)
    for _ in range(a.steps):
        lm_step(model, opt, gen, dev, batch=4, seq=2048)


def main() -> int:
    if not torch.cuda.is_available():
        print("practice.py: CUDA is not available", file=sys.stderr)
        return 2
    dev = torch.device("cuda", 0)
    torch.cuda.set_device(dev)
    torch.manual_seed(0)
    {"optpeak": lambda a, d: optimizer_peak(a, d, False),
     "optfused": lambda a, d: optimizer_peak(a, d, True), "extleak": external_leak,
     "prune": pruning, "clip": clip, "mhaweights": mha_weights}[ARGS.case](ARGS, dev)
    torch.cuda.synchronize()
    print(f"practice.py {ARGS.case}: done", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
