#!/usr/bin/env python3
"""Training steps that run a model twice, each time for the loss, for
checking that memdiag does not call a used forward's graph unused (none
leaks). Run a case under `memdiag run`:

    memdiag run -- python3 examples/twoviews.py --case rdrop

  rdrop        R-Drop: the model twice on the same batch (dropout differs), the
               cross-entropy of both and the KL between them, one backward
  meanteacher  a mean teacher: the EMA copy under no_grad on a second view, a
               consistency loss against the student's, the EMA updated each step
  simclr       SimCLR: an encoder on two augmented views, the NT-Xent loss over
               their 2B x 2B similarities, one backward
"""
from __future__ import annotations

import argparse
import copy
import sys

CASES = ("rdrop", "meanteacher", "simclr")


def parse() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--case", required=True, choices=CASES)
    p.add_argument("--steps", type=int, default=6)
    return p.parse_args()


ARGS = parse()

import torch  # noqa: E402
from torch import nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

VOCAB, WIDTH, LAYERS, BATCH, SEQ = 32000, 768, 6, 8, 512


def lm(dev: torch.device) -> nn.Module:
    layer = nn.TransformerEncoderLayer(WIDTH, 12, 4 * WIDTH, dropout=0.1, batch_first=True,
                                       norm_first=True)
    return nn.Sequential(nn.Embedding(VOCAB, WIDTH), nn.TransformerEncoder(layer, LAYERS),
                         nn.Linear(WIDTH, VOCAB, bias=False)).to(dev)


def rdrop(model: nn.Module, ids: torch.Tensor) -> torch.Tensor:
    a, b = model(ids), model(ids)
    ce = F.cross_entropy(a.flatten(0, 1), ids.flatten()) + F.cross_entropy(b.flatten(0, 1), ids.flatten())
    kl = F.kl_div(a.log_softmax(-1), b.log_softmax(-1), log_target=True, reduction="batchmean")
    return ce / 2 + 0.1 * kl


def consistency(model: nn.Module, teacher: nn.Module, ids: torch.Tensor) -> torch.Tensor:
    student = model(ids)
    with torch.no_grad():
        target = teacher(ids.roll(1, dims=1)).softmax(-1)
    return F.cross_entropy(student.flatten(0, 1), ids.flatten()) + \
        F.mse_loss(student.softmax(-1), target)


class Encoder(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Conv2d(3, 64, 3, 2, 1), nn.ReLU(), nn.Conv2d(64, 128, 3, 2, 1),
                                 nn.ReLU(), nn.Conv2d(128, 256, 3, 2, 1), nn.ReLU(),
                                 nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(256, 128))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.normalize(self.net(x), dim=-1)


def nt_xent(model: nn.Module, images: torch.Tensor) -> torch.Tensor:
    z = torch.cat([model(images + 0.1 * torch.randn_like(images)),
                   model(images.flip(-1))])
    sim = z @ z.T / 0.2
    sim.fill_diagonal_(float("-inf"))
    n = images.shape[0]
    target = torch.cat([torch.arange(n, 2 * n), torch.arange(n)]).to(images.device)
    return F.cross_entropy(sim, target)


def main() -> int:
    a = ARGS
    if not torch.cuda.is_available():
        print("twoviews.py: CUDA is not available", file=sys.stderr)
        return 2
    dev = torch.device("cuda", 0)
    torch.cuda.set_device(dev)
    torch.manual_seed(0)
    model = Encoder().to(dev) if a.case == "simclr" else lm(dev)
    teacher = copy.deepcopy(model).requires_grad_(False) if a.case == "meanteacher" else None
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    gen = torch.Generator(device=dev).manual_seed(0)
    for step in range(a.steps):
        if a.case == "simclr":
            loss = nt_xent(model, torch.randn(512, 3, 96, 96, generator=gen, device=dev))
        else:
            ids = torch.randint(VOCAB, (BATCH, SEQ), generator=gen, device=dev)
            loss = rdrop(model, ids) if a.case == "rdrop" else consistency(model, teacher, ids)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        if teacher is not None:
            with torch.no_grad():
                for pt, ps in zip(teacher.parameters(), model.parameters()):
                    pt.lerp_(ps, 0.01)
        print(f"step {step}: loss {loss.item():.3f}", flush=True)
    torch.cuda.synchronize()
    print(f"twoviews.py {a.case}: done", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
