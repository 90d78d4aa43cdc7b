#!/usr/bin/env python3
"""Adversarial training of an image classifier, for checking memdiag's
diagnosis on steps with inner gradient loops (none leaks). Run a case under
`memdiag run`:

    memdiag run -- python3 examples/adversarial.py --case pgd

  pgd     PGD (Madry et al.): 5 inner steps of torch.autograd.grad of the loss
          with respect to the input, then a training step on the perturbed batch
  pgdbwd  the same inner steps written with loss.backward() on an input that
          requires grad (the parameters' gradients zeroed after), as many
          tutorials do
  free    "free" adversarial training: each batch replayed 4 times, one backward
          giving both the parameters' and the perturbation's gradients, an
          optimizer step each time
"""
from __future__ import annotations

import argparse
import sys

CASES = ("pgd", "pgdbwd", "free")


def parse() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--case", required=True, choices=CASES)
    p.add_argument("--steps", type=int, default=6)
    return p.parse_args()


ARGS = parse()

import torch  # noqa: E402
import torchvision  # noqa: E402
import torch.nn.functional as F  # noqa: E402

EPS, ALPHA, INNER = 8 / 255, 2 / 255, 5


def pgd(model, x, y, backward: bool):
    delta = torch.zeros_like(x).uniform_(-EPS, EPS).requires_grad_(True)
    for _ in range(INNER):
        loss = F.cross_entropy(model(x + delta), y)
        if backward:
            loss.backward()
            grad = delta.grad
        else:
            grad, = torch.autograd.grad(loss, delta)
        delta = (delta + ALPHA * grad.sign()).clamp(-EPS, EPS).detach().requires_grad_(True)
    return (x + delta).detach()


def main() -> int:
    a = ARGS
    if not torch.cuda.is_available():
        print("adversarial.py: CUDA is not available", file=sys.stderr)
        return 2
    dev = torch.device("cuda", 0)
    torch.cuda.set_device(dev)
    torch.manual_seed(0)
    model = torchvision.models.resnet50(num_classes=100).to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    gen = torch.Generator(device=dev).manual_seed(0)
    delta = None
    for step in range(a.steps):
        x = torch.rand(64, 3, 224, 224, generator=gen, device=dev)
        y = torch.randint(100, (64,), generator=gen, device=dev)
        if a.case == "free":
            delta = torch.zeros_like(x) if delta is None else delta
            for _ in range(4):
                delta.requires_grad_(True)
                loss = F.cross_entropy(model(x + delta), y)
                opt.zero_grad(set_to_none=True)
                loss.backward()
                opt.step()
                delta = (delta + EPS * delta.grad.sign()).clamp(-EPS, EPS).detach()
        else:
            x_adv = pgd(model, x, y, backward=a.case == "pgdbwd")
            opt.zero_grad(set_to_none=True)
            loss = F.cross_entropy(model(x_adv), y)
            loss.backward()
            opt.step()
        print(f"step {step}: loss {loss.item():.3f}", flush=True)
    torch.cuda.synchronize()
    print(f"adversarial.py {a.case}: done", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
