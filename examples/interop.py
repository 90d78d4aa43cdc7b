#!/usr/bin/env python3
"""PyTorch beside other GPU libraries in one process, for checking memdiag's
diagnosis of memory PyTorch's allocator does not hold (only cupyleak leaks).
Run a case under `memdiag run`:

    memdiag run -- python3 examples/interop.py --case jaxgrab

  jaxgrab   JAX runs one op on the GPU first: its allocator takes 75% of the device
            up front (XLA_PYTHON_CLIENT_PREALLOCATE's default), then PyTorch trains
  cupypool  each step CuPy makes and drops 512 MiB of scratch arrays (its memory pool
            keeps the blocks), then PyTorch trains
  cupyleak  each step 64 MiB of CuPy arrays appended to a list
  odeint    a neural ODE (torchdiffeq.odeint, dopri5, no adjoint): every solver
            step's graph is kept for the backward
"""
from __future__ import annotations

import argparse
import sys

CASES = ("jaxgrab", "cupypool", "cupyleak", "odeint")


def parse() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--case", required=True, choices=CASES)
    p.add_argument("--steps", type=int, default=9)
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


def lm_steps(a: argparse.Namespace, dev: torch.device, each=None) -> None:
    model = encoder_lm(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    gen = torch.Generator(device=dev).manual_seed(0)
    for step in range(a.steps):
        if each:
            each(step)
        ids = torch.randint(VOCAB, (8, 512), generator=gen, device=dev)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            logits = model(ids)
            loss = nn.functional.cross_entropy(logits.flatten(0, 1).float(), ids.flatten())
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)


def jax_first(a: argparse.Namespace, dev: torch.device) -> None:
    import jax
    import jax.numpy as jnp
    x = jnp.ones((1024, 1024))
    print(f"interop.py jaxgrab: JAX on {jax.devices()[0]}, sum {float((x @ x).sum()):.0f}",
          flush=True)
    lm_steps(a, dev)


def cupy_pool(a: argparse.Namespace, dev: torch.device, keep: bool) -> None:
    import cupy as cp
    kept = []

    def scratch(step: int) -> None:
        with cp.cuda.Device(dev.index):
            if keep:
                kept.append(cp.full((16 << 20,), step, dtype=cp.float32))  # 64 MiB, kept
            else:
                xs = [cp.random.random((32 << 20,), dtype=cp.float32) for _ in range(4)]
                float(sum(x.sum() for x in xs))  # 512 MiB made and dropped: the pool keeps it
    lm_steps(a, dev, scratch)


def neural_ode(a: argparse.Namespace, dev: torch.device) -> None:
    from torchdiffeq import odeint

    class Field(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.net = nn.Sequential(nn.Linear(64, 1024), nn.Tanh(), nn.Linear(1024, 64))

        def forward(self, t: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
            return self.net(y)

    field = Field().to(dev)
    opt = torch.optim.Adam(field.parameters(), lr=1e-3)
    gen = torch.Generator(device=dev).manual_seed(0)
    t = torch.linspace(0, 1, 8, device=dev)
    for _ in range(a.steps):
        y0 = torch.randn(4096, 64, generator=gen, device=dev)
        target = torch.sin(y0)
        ys = odeint(field, y0, t, method="dopri5", rtol=1e-5, atol=1e-6)
        loss = nn.functional.mse_loss(ys[-1], target)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)


def main() -> int:
    if not torch.cuda.is_available():
        print("interop.py: CUDA is not available", file=sys.stderr)
        return 2
    dev = torch.device("cuda", 0)
    torch.cuda.set_device(dev)
    torch.manual_seed(0)
    {"jaxgrab": jax_first, "cupypool": lambda a, d: cupy_pool(a, d, False),
     "cupyleak": lambda a, d: cupy_pool(a, d, True), "odeint": neural_ode}[ARGS.case](ARGS, dev)
    torch.cuda.synchronize()
    print(f"interop.py {ARGS.case}: done", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
