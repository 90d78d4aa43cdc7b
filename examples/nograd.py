#!/usr/bin/env python3
"""Inference and evaluation written without torch.no_grad(), for checking
what memdiag says of forward passes that record autograd graphs nobody
backpropagates through. Run a case under `memdiag run`:

    memdiag run -- python3 examples/nograd.py --case gradinfer

  gradinfer      batches through a transformer encoder with no no_grad: each
                 forward keeps its saved tensors until its output is dropped
                 (only the predictions are kept): no leak
  gradinferleak  the same loop keeping every output tensor: each keeps its
                 whole autograd graph (a leak far larger than the outputs)
  pplleak        a perplexity evaluation of a small Llama appending each
                 batch's loss tensor (not loss.item()) with no no_grad: every
                 loss keeps its graph (a leak)
"""
from __future__ import annotations

import argparse
import sys

CASES = ("gradinfer", "gradinferleak", "pplleak")


def parse() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--case", required=True, choices=CASES)
    p.add_argument("--batches", type=int, default=8)
    return p.parse_args()


ARGS = parse()

import torch  # noqa: E402
from torch import nn  # noqa: E402

WIDTH, LAYERS, SEQ, BATCH = 1024, 8, 1024, 8


def encoder(dev: torch.device) -> nn.Module:
    layer = nn.TransformerEncoderLayer(WIDTH, 16, 4 * WIDTH, dropout=0.0, batch_first=True,
                                       norm_first=True)
    return nn.Sequential(nn.TransformerEncoder(layer, LAYERS), nn.Linear(WIDTH, 10)).to(dev)


def gradinfer(a: argparse.Namespace, dev: torch.device, keep: bool) -> None:
    model = encoder(dev).eval()
    gen = torch.Generator(device=dev).manual_seed(0)
    preds, outs = [], []
    for _ in range(a.batches):
        x = torch.randn(BATCH, SEQ, WIDTH, generator=gen, device=dev)
        out = model(x)
        preds.append(out.argmax(-1))
        if keep:
            outs.append(out)
    print("predictions:", sum(int(p.sum()) for p in preds), flush=True)


def pplleak(a: argparse.Namespace, dev: torch.device) -> None:
    import transformers
    cfg = transformers.LlamaConfig(vocab_size=32000, hidden_size=768, intermediate_size=2048,
                                   num_hidden_layers=6, num_attention_heads=12,
                                   num_key_value_heads=4, max_position_embeddings=2048)
    model = transformers.AutoModelForCausalLM.from_config(cfg).to(dev).eval()
    gen = torch.Generator(device=dev).manual_seed(0)
    losses = []
    for _ in range(a.batches):
        ids = torch.randint(32000, (4, 1024), generator=gen, device=dev)
        losses.append(model(input_ids=ids, labels=ids).loss)
    print("perplexity:", float(torch.stack(losses).mean().exp()), flush=True)


def main() -> int:
    if not torch.cuda.is_available():
        print("nograd.py: CUDA is not available", file=sys.stderr)
        return 2
    dev = torch.device("cuda", 0)
    torch.cuda.set_device(dev)
    torch.manual_seed(0)
    if ARGS.case == "pplleak":
        pplleak(ARGS, dev)
    else:
        gradinfer(ARGS, dev, ARGS.case == "gradinferleak")
    torch.cuda.synchronize()
    print(f"nograd.py {ARGS.case}: done", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
