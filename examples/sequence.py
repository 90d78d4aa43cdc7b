#!/usr/bin/env python3
"""Sequence models' habits, for checking memdiag's diagnosis on them (none
leaks). Run a case under `memdiag run`:

    memdiag run -- python3 examples/sequence.py --case tbptt

  tbptt        an LSTM language model over a long text in chunks, its hidden state
               carried from chunk to chunk and detached between them (truncated BPTT)
  t5           an encoder-decoder (T5) trained on random sequence pairs
"""
from __future__ import annotations

import argparse
import sys

CASES = ("tbptt", "t5")


def parse() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--case", required=True, choices=CASES)
    p.add_argument("--steps", type=int, default=9)
    return p.parse_args()


ARGS = parse()

import torch  # noqa: E402
from torch import nn  # noqa: E402

VOCAB = 16384


class LstmLM(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(VOCAB, 512)
        self.lstm = nn.LSTM(512, 1024, num_layers=2, batch_first=True)
        self.head = nn.Linear(1024, VOCAB)

    def forward(self, ids: torch.Tensor, state):
        out, state = self.lstm(self.embed(ids), state)
        return self.head(out), state


def tbptt(a: argparse.Namespace, dev: torch.device) -> None:
    model = LstmLM().to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    gen = torch.Generator(device=dev).manual_seed(0)
    text = torch.randint(VOCAB, (16, 128 * (a.steps + 1)), generator=gen, device=dev)
    state = None
    for step in range(a.steps):
        chunk = text[:, step * 128:(step + 1) * 128 + 1]
        if state is not None:
            state = tuple(s.detach() for s in state)
        logits, state = model(chunk[:, :-1], state)
        loss = nn.functional.cross_entropy(logits.flatten(0, 1), chunk[:, 1:].flatten())
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)


def t5(a: argparse.Namespace, dev: torch.device) -> None:
    from transformers import T5Config, T5ForConditionalGeneration
    cfg = T5Config(vocab_size=32128, d_model=512, d_kv=64, d_ff=2048, num_layers=6,
                   num_decoder_layers=6, num_heads=8, decoder_start_token_id=0)
    model = T5ForConditionalGeneration(cfg).to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    gen = torch.Generator(device=dev).manual_seed(0)
    for _ in range(a.steps):
        src = torch.randint(32128, (16, 512), generator=gen, device=dev)
        tgt = torch.randint(32128, (16, 128), generator=gen, device=dev)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = model(input_ids=src, labels=tgt).loss
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)


def main() -> int:
    if not torch.cuda.is_available():
        print("sequence.py: CUDA is not available", file=sys.stderr)
        return 2
    dev = torch.device("cuda", 0)
    torch.cuda.set_device(dev)
    torch.manual_seed(0)
    {"tbptt": tbptt, "t5": t5}[ARGS.case](ARGS, dev)
    torch.cuda.synchronize()
    print(f"sequence.py {ARGS.case}: done", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
