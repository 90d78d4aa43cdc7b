#!/usr/bin/env python3
"""Inference loops (no optimizer, no training step), for checking memdiag's
diagnosis where there are no steps to compare: transformers' generate() on
a small randomly initialised Llama, called once per batch of prompts.

    memdiag run -- python3 examples/infer.py --case genleak

  gen       8 batches; each call's KV cache is freed when it returns
  genleak   the same, keeping every call's output with its scores
            (output_scores=True): one logits tensor per new token, on the GPU
"""
from __future__ import annotations

import argparse
import sys

import torch


def parse() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--case", required=True, choices=("gen", "genleak"))
    p.add_argument("--calls", type=int, default=8)
    return p.parse_args()


def main() -> int:
    a = parse()
    if not torch.cuda.is_available():
        print("infer.py: CUDA is not available", file=sys.stderr)
        return 2
    from transformers import LlamaConfig, LlamaForCausalLM
    dev = torch.device("cuda", 0)
    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=32000, hidden_size=512, intermediate_size=2048,
                      num_hidden_layers=4, num_attention_heads=8, num_key_value_heads=8,
                      max_position_embeddings=1024)
    model = LlamaForCausalLM(cfg).to(dev, dtype=torch.bfloat16).eval()
    gen = torch.Generator(device=dev).manual_seed(0)
    kept = []
    with torch.no_grad():
        for _ in range(a.calls):
            ids = torch.randint(cfg.vocab_size, (8, 64), generator=gen, device=dev)
            out = model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=64,
                                 min_new_tokens=64, do_sample=False, pad_token_id=0,
                                 output_scores=a.case == "genleak", return_dict_in_generate=True)
            if a.case == "genleak":  # "for later analysis": the scores stay on the GPU
                kept.append(out)
    torch.cuda.synchronize()
    print(f"infer.py {a.case}: {a.calls} calls, {len(kept)} outputs kept", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
