#!/usr/bin/env python3
"""Optimizers beyond torch's classics, and the first step that makes their
state, for checking memdiag's optimizer_state and oom findings (none leaks).
Run a case under `memdiag run`:

    memdiag run -- python3 examples/firststep.py --case optoom

  optoom  a wide MLP, batch 16, in a process capped to what the weights, their
          gradients and the activations need: AdamW's first step, which makes
          its state (2 x the weights), runs out of memory
  muon    torch.optim.Muon for the hidden matrices and AdamW for the embedding,
          head, norms and biases (Muon's recipe), both stepped every iteration
  lion    a Lion optimizer written in the script (one buffer a parameter)
"""
from __future__ import annotations

import argparse
import sys

CASES = ("optoom", "muon", "lion")


def parse() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--case", required=True, choices=CASES)
    p.add_argument("--steps", type=int, default=9)
    return p.parse_args()


ARGS = parse()

import torch  # noqa: E402
from torch import nn  # noqa: E402

VOCAB, WIDTH = 16384, 768


class Lion(torch.optim.Optimizer):
    """Lion (Chen et al. 2023): the sign of an interpolated momentum."""

    def __init__(self, params, lr=1e-4, betas=(0.9, 0.99), weight_decay=0.0):
        super().__init__(params, dict(lr=lr, betas=betas, weight_decay=weight_decay))

    @torch.no_grad()
    def step(self, closure=None):
        for group in self.param_groups:
            b1, b2 = group["betas"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                state = self.state[p]
                if not state:
                    state["exp_avg"] = torch.zeros_like(p)
                m = state["exp_avg"]
                p.mul_(1 - group["lr"] * group["weight_decay"])
                p.add_(torch.sign(m * b1 + p.grad * (1 - b1)), alpha=-group["lr"])
                m.mul_(b2).add_(p.grad, alpha=1 - b2)


def encoder_lm(dev: torch.device) -> nn.Module:
    layer = nn.TransformerEncoderLayer(WIDTH, 12, 4 * WIDTH, dropout=0.0, batch_first=True,
                                       norm_first=True)
    return nn.Sequential(nn.Embedding(VOCAB, WIDTH), nn.TransformerEncoder(layer, 6),
                         nn.Linear(WIDTH, VOCAB, bias=False)).to(dev)


def lm_loop(model: nn.Module, opts, dev: torch.device, steps: int) -> None:
    gen = torch.Generator(device=dev).manual_seed(0)
    for _ in range(steps):
        ids = torch.randint(VOCAB, (8, 512), generator=gen, device=dev)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            logits = model(ids)
        loss = nn.functional.cross_entropy(logits.flatten(0, 1).float(), ids.flatten())
        loss.backward()
        for opt in opts:
            opt.step()
        for opt in opts:
            opt.zero_grad(set_to_none=True)


def optoom(a: argparse.Namespace, dev: torch.device) -> None:
    model = nn.Sequential(*[nn.Linear(8192, 8192) for _ in range(8)]).to(dev)  # 2 GiB
    weights = sum(p.numel() * 4 for p in model.parameters())
    cap = 2 * weights + (1 << 30)  # weights, gradients and 1 GiB for the rest: no state
    torch.cuda.set_per_process_memory_fraction(cap / torch.cuda.get_device_properties(dev).total_memory)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    gen = torch.Generator(device=dev).manual_seed(0)
    for _ in range(a.steps):
        x = torch.randn(16, 8192, generator=gen, device=dev)
        model(x).square().mean().backward()
        opt.step()
        opt.zero_grad(set_to_none=True)


def muon(a: argparse.Namespace, dev: torch.device) -> None:
    model = encoder_lm(dev)
    hidden = [p for n, p in model.named_parameters() if p.ndim == 2 and n.startswith("1.")]
    rest = [p for n, p in model.named_parameters() if not (p.ndim == 2 and n.startswith("1."))]
    opts = [torch.optim.Muon(hidden, lr=0.02), torch.optim.AdamW(rest, lr=3e-4)]
    lm_loop(model, opts, dev, a.steps)


def lion(a: argparse.Namespace, dev: torch.device) -> None:
    model = encoder_lm(dev)
    lm_loop(model, [Lion(model.parameters())], dev, a.steps)


def main() -> int:
    if not torch.cuda.is_available():
        print("firststep.py: CUDA is not available", file=sys.stderr)
        return 2
    dev = torch.device("cuda", 0)
    torch.cuda.set_device(dev)
    torch.manual_seed(0)
    {"optoom": optoom, "muon": muon, "lion": lion}[ARGS.case](ARGS, dev)
    torch.cuda.synchronize()
    print(f"firststep.py {ARGS.case}: done", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
