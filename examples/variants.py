#!/usr/bin/env python3
"""Variants of recover.py, teacher.py and mistakes.py written another way,
for checking that memdiag's answers to those are not tied to one script's
shape. Run a case under `memdiag run`:

    memdiag run -- python3 examples/variants.py --case retryrecurse

  retryrecurse  the batch halved by a function that calls itself from its
                except block (the process may use 3.2 GiB): each failed
                attempt's tensors stay held by the tracebacks of the calls
                still running
  hfteacher     distillation of a 2-layer GPT-2 from a 6-layer one built by
                transformers, the teacher only put in eval() and run without
                no_grad (its gradients made and kept)
  optperepoch   AdamW constructed again every 3 steps (an "epoch"), on
                purpose: not every step, so not the per-step mistake
"""
from __future__ import annotations

import argparse
import sys

CASES = ("retryrecurse", "hfteacher", "optperepoch")


def parse() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--case", required=True, choices=CASES)
    p.add_argument("--steps", type=int, default=6)
    p.add_argument("--seq", type=int, default=512)
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


def train_step(model: nn.Module, opt: torch.optim.Optimizer, ids: torch.Tensor) -> float:
    with torch.autocast("cuda", dtype=torch.bfloat16):
        logits = model(ids)
        loss = nn.functional.cross_entropy(logits.flatten(0, 1).float(), ids.flatten())
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)
    return loss.item()


def retry_recurse(a: argparse.Namespace, dev: torch.device) -> None:
    torch.cuda.set_per_process_memory_fraction(
        3.2 * 2**30 / torch.cuda.get_device_properties(dev).total_memory)
    model = encoder_lm(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    gen = torch.Generator(device=dev).manual_seed(0)

    def fit(batch: int) -> int:
        try:
            train_step(model, opt, torch.randint(VOCAB, (batch, a.seq), generator=gen, device=dev))
            return batch
        except torch.cuda.OutOfMemoryError:
            opt.zero_grad(set_to_none=True)
            print(f"variants.py: out of memory at batch {batch}", flush=True)
            if batch == 1:
                raise
            return fit(batch // 2)

    batch = 32
    for step in range(a.steps):
        batch = fit(batch)
        print(f"step {step}: batch {batch}", flush=True)


def hf_teacher(a: argparse.Namespace, dev: torch.device) -> None:
    from transformers import GPT2Config, GPT2LMHeadModel
    import torch.nn.functional as F

    def gpt2(layers: int) -> nn.Module:
        cfg = GPT2Config(vocab_size=VOCAB, n_positions=1024, n_embd=768, n_layer=layers,
                         n_head=12, resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)
        cfg._attn_implementation = "sdpa"
        return GPT2LMHeadModel(cfg).to(dev)

    teacher, student = gpt2(6).eval(), gpt2(2)
    opt = torch.optim.AdamW(student.parameters(), lr=1e-4)
    gen = torch.Generator(device=dev).manual_seed(0)
    for step in range(a.steps):
        ids = torch.randint(VOCAB, (8, a.seq), generator=gen, device=dev)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            t = teacher(input_ids=ids).logits
            s = student(input_ids=ids).logits
        loss = F.kl_div(s.float().log_softmax(-1), t.float().log_softmax(-1), log_target=True,
                        reduction="batchmean")
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        print(f"step {step}: loss {loss.item():.3f}", flush=True)


def opt_per_epoch(a: argparse.Namespace, dev: torch.device) -> None:
    model = encoder_lm(dev)
    gen = torch.Generator(device=dev).manual_seed(0)
    for step in range(a.steps):
        if step % 3 == 0:  # a fresh optimizer each epoch (warm restarts)
            opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
        loss = train_step(model, opt, torch.randint(VOCAB, (8, a.seq), generator=gen, device=dev))
        print(f"step {step}: loss {loss:.3f}", flush=True)


def main() -> int:
    if not torch.cuda.is_available():
        print("variants.py: CUDA is not available", file=sys.stderr)
        return 2
    dev = torch.device("cuda", 0)
    torch.cuda.set_device(dev)
    torch.manual_seed(0)
    {"retryrecurse": retry_recurse, "hfteacher": hf_teacher,
     "optperepoch": opt_per_epoch}[ARGS.case](ARGS, dev)
    torch.cuda.synchronize()
    print(f"variants.py {ARGS.case}: done", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
