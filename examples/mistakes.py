#!/usr/bin/env python3
"""Training-loop mistakes whose trace in memory is their only symptom, for
checking what memdiag says of them. Run a case under `memdiag run`:

    memdiag run -- python3 examples/mistakes.py --case optinloop

  optinloop  the optimizer (AdamW) is constructed inside the loop, once per
             step: each step makes its state anew and drops the last, so
             Adam's moments never build up (training runs, but not as Adam)
  optonce    the same loop with the optimizer made once (the control)
  outattn    a small Llama (transformers, sdpa attention) trained with
             output_attentions=True for an attention-entropy term: under
             sdpa transformers 5 returns no weights (it warns), so nothing
             more is kept (not kept as a fixture)
"""
from __future__ import annotations

import argparse
import sys

CASES = ("optinloop", "optonce", "outattn")


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

VOCAB, WIDTH = 16384, 1024


def encoder_lm(dev: torch.device) -> nn.Module:
    layer = nn.TransformerEncoderLayer(WIDTH, 16, 4 * WIDTH, dropout=0.0, batch_first=True,
                                       norm_first=True)
    return nn.Sequential(nn.Embedding(VOCAB, WIDTH), nn.TransformerEncoder(layer, 6),
                         nn.Linear(WIDTH, VOCAB, bias=False)).to(dev)


def optimizer_loop(a: argparse.Namespace, dev: torch.device) -> None:
    model = encoder_lm(dev)
    gen = torch.Generator(device=dev).manual_seed(0)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    for step in range(a.steps):
        if a.case == "optinloop":
            opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
        ids = torch.randint(VOCAB, (a.batch, a.seq), generator=gen, device=dev)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            logits = model(ids)
        loss = nn.functional.cross_entropy(logits.flatten(0, 1).float(), ids.flatten())
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        print(f"step {step}: loss {loss.item():.3f}", flush=True)


def output_attentions(a: argparse.Namespace, dev: torch.device) -> None:
    import transformers
    cfg = transformers.LlamaConfig(vocab_size=32000, hidden_size=768, intermediate_size=2048,
                                   num_hidden_layers=6, num_attention_heads=12,
                                   num_key_value_heads=4, max_position_embeddings=2048,
                                   attn_implementation="sdpa")
    model = transformers.AutoModelForCausalLM.from_config(cfg).to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    gen = torch.Generator(device=dev).manual_seed(0)
    for step in range(a.steps):
        ids = torch.randint(32000, (a.batch, 1024), generator=gen, device=dev)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            out = model(input_ids=ids, labels=ids, output_attentions=True)
        # an auxiliary term on the attention maps (an entropy regulariser)
        ent = sum(-(w.float().clamp_min(1e-9).log() * w.float()).sum(-1).mean()
                  for w in out.attentions if w is not None)
        loss = out.loss + 1e-4 * ent
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        print(f"step {step}: loss {loss.item():.3f}", flush=True)


def main() -> int:
    if not torch.cuda.is_available():
        print("mistakes.py: CUDA is not available", file=sys.stderr)
        return 2
    dev = torch.device("cuda", 0)
    torch.cuda.set_device(dev)
    torch.manual_seed(0)
    if ARGS.case == "outattn":
        output_attentions(ARGS, dev)
    else:
        optimizer_loop(ARGS, dev)
    torch.cuda.synchronize()
    print(f"mistakes.py {ARGS.case}: done", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
