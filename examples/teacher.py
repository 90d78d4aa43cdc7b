#!/usr/bin/env python3
"""Knowledge distillation with the teacher left trainable, for checking
what memdiag says of gradients and saved tensors that no optimizer uses.
Run a case under `memdiag run`:

    memdiag run -- python3 examples/teacher.py --case teachergrad

  teachergrad    the teacher is put in eval() (which freezes nothing) and run
                 without no_grad: its forward saves tensors for backward, the
                 backward computes the teacher's gradients, and they stay (the
                 student's optimizer never zeroes them)
  teachernograd  the same with the teacher's forward under torch.no_grad()
                 (the control)
"""
from __future__ import annotations

import argparse
import sys

CASES = ("teachergrad", "teachernograd")


def parse() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--case", required=True, choices=CASES)
    p.add_argument("--steps", type=int, default=6)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--seq", type=int, default=512)
    return p.parse_args()


ARGS = parse()

import torch  # noqa: E402
from torch import nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

VOCAB, WIDTH = 32000, 1024


def lm(layers: int, dev: torch.device) -> nn.Module:
    layer = nn.TransformerEncoderLayer(WIDTH, 16, 4 * WIDTH, dropout=0.0, batch_first=True,
                                       norm_first=True)
    return nn.Sequential(nn.Embedding(VOCAB, WIDTH), nn.TransformerEncoder(layer, layers),
                         nn.Linear(WIDTH, VOCAB, bias=False)).to(dev)


def main() -> int:
    a = ARGS
    if not torch.cuda.is_available():
        print("teacher.py: CUDA is not available", file=sys.stderr)
        return 2
    dev = torch.device("cuda", 0)
    torch.cuda.set_device(dev)
    torch.manual_seed(0)
    teacher, student = lm(8, dev).eval(), lm(3, dev)
    opt = torch.optim.AdamW(student.parameters(), lr=1e-4)
    gen = torch.Generator(device=dev).manual_seed(0)
    temp = 2.0
    for step in range(a.steps):
        ids = torch.randint(VOCAB, (a.batch, a.seq), generator=gen, device=dev)
        if a.case == "teachernograd":
            with torch.no_grad():
                t_logits = teacher(ids)
        else:
            t_logits = teacher(ids)
        s_logits = student(ids)
        loss = F.kl_div(F.log_softmax(s_logits / temp, -1), F.softmax(t_logits / temp, -1),
                        reduction="batchmean") * temp * temp
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        print(f"step {step}: loss {loss.item():.3f}", flush=True)
    torch.cuda.synchronize()
    print(f"teacher.py {a.case}: done", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
