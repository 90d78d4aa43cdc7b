#!/usr/bin/env python3
"""nn.DataParallel: one process drives two GPUs, for checking what memdiag
says of the classic "why does GPU 0 use more memory than GPU 1?". Run a case
under `memdiag run` on a machine with 2 GPUs:

    memdiag run -- python3 examples/dpsingle.py --case dp

  dp       a causal transformer LM (32 000-token vocabulary) wrapped in
           nn.DataParallel, the loss computed outside it: every replica's
           logits are gathered onto cuda:0, which also holds the model, its
           gradients and AdamW's state
  dploss   the same with the loss computed inside the wrapped module: only
           each replica's loss is gathered
"""
from __future__ import annotations

import argparse
import sys

CASES = ("dp", "dploss")


def parse() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--case", required=True, choices=CASES)
    p.add_argument("--steps", type=int, default=6)
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--seq", type=int, default=512)
    return p.parse_args()


ARGS = parse()

import torch  # noqa: E402
from torch import nn  # noqa: E402

VOCAB, WIDTH, LAYERS = 32000, 1024, 8


class LM(nn.Module):
    """Embedding, causal encoder layers, a vocabulary head; with
    with_loss the forward returns the mean next-token loss instead."""

    def __init__(self, with_loss: bool) -> None:
        super().__init__()
        self.with_loss = with_loss
        self.embed = nn.Embedding(VOCAB, WIDTH)
        layer = nn.TransformerEncoderLayer(WIDTH, 16, 4 * WIDTH, dropout=0.0, batch_first=True,
                                           norm_first=True)
        self.body = nn.TransformerEncoder(layer, LAYERS)
        self.head = nn.Linear(WIDTH, VOCAB, bias=False)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        mask = nn.Transformer.generate_square_subsequent_mask(ids.shape[1], device=ids.device)
        logits = self.head(self.body(self.embed(ids), mask=mask, is_causal=True))
        if not self.with_loss:
            return logits
        return lm_loss(logits, ids)


def lm_loss(logits: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
    return nn.functional.cross_entropy(logits[:, :-1].reshape(-1, VOCAB), ids[:, 1:].reshape(-1))


def main() -> int:
    a = ARGS
    if torch.cuda.device_count() < 2:
        print("dpsingle.py: needs 2 GPUs", file=sys.stderr)
        return 2
    torch.manual_seed(0)
    dev = torch.device("cuda", 0)
    model = nn.DataParallel(LM(a.case == "dploss").to(dev), device_ids=[0, 1])
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    gen = torch.Generator(device=dev).manual_seed(0)
    for step in range(a.steps):
        ids = torch.randint(VOCAB, (a.batch, a.seq), generator=gen, device=dev)
        out = model(ids)
        loss = out.mean() if a.case == "dploss" else lm_loss(out, ids)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        print(f"step {step}: loss {loss.item():.3f}", flush=True)
    torch.cuda.synchronize()
    print(f"dpsingle.py {a.case}: done", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
