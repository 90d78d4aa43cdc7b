#!/usr/bin/env python3
"""Serving loops (no optimizer, no training step) with a small randomly
initialised Llama from transformers, for checking memdiag's diagnosis
where calls, not steps, are compared:

    memdiag run -- python3 examples/serving.py --case sessions

  staticcache  generate() with cache_implementation="static": the cache is made once
               and kept for the next call
  dynserve     requests of random batch and length under inference_mode, replies
               moved to the CPU: the cache of freed blocks grows, allocated does not
  sessions     chat sessions of 3 turns, each turn's KV cache kept for the next turn
               and dropped when the session ends
  sessionleak  (a leak) the same, every session's cache kept "for resumption"
"""
from __future__ import annotations

import argparse
import sys

import torch

CASES = ("staticcache", "dynserve", "sessions", "sessionleak")


def parse() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--case", required=True, choices=CASES)
    p.add_argument("--calls", type=int, default=12)
    return p.parse_args()


def llama(dev: torch.device):
    from transformers import LlamaConfig, LlamaForCausalLM
    cfg = LlamaConfig(vocab_size=32000, hidden_size=512, intermediate_size=2048,
                      num_hidden_layers=4, num_attention_heads=8, num_key_value_heads=8,
                      max_position_embeddings=4096)
    return LlamaForCausalLM(cfg).to(dev, dtype=torch.bfloat16).eval()


def static_cache(model, a: argparse.Namespace, gen: torch.Generator, dev: torch.device) -> None:
    for _ in range(a.calls):
        ids = torch.randint(32000, (8, 64), generator=gen, device=dev)
        out = model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=32,
                             min_new_tokens=32, do_sample=False, pad_token_id=0,
                             cache_implementation="static")
        out.cpu()


def dynamic_requests(model, a: argparse.Namespace, gen: torch.Generator, dev: torch.device) -> None:
    for _ in range(2 * a.calls):
        n = int(torch.randint(1, 33, (1,), generator=gen, device=dev))
        seq = int(torch.randint(32, 1025, (1,), generator=gen, device=dev))
        ids = torch.randint(32000, (n, seq), generator=gen, device=dev)
        model(ids).logits[:, -1].argmax(-1).cpu()


def chat(model, a: argparse.Namespace, gen: torch.Generator, dev: torch.device) -> None:
    from transformers import DynamicCache
    resumable, cache = [], None
    for turn in range(a.calls):
        if turn % 3 == 0:  # a new session
            cache = DynamicCache()
            if a.case == "sessionleak":
                resumable.append(cache)
        ids = torch.randint(32000, (4, 128), generator=gen, device=dev)
        out = model(ids, past_key_values=cache, use_cache=True)
        out.logits[:, -1].argmax(-1).cpu()
    print(f"serving.py {a.case}: {len(resumable)} sessions kept", flush=True)


def main() -> int:
    a = parse()
    if not torch.cuda.is_available():
        print("serving.py: CUDA is not available", file=sys.stderr)
        return 2
    dev = torch.device("cuda", 0)
    torch.manual_seed(0)
    model = llama(dev)
    gen = torch.Generator(device=dev).manual_seed(0)
    with torch.inference_mode():
        if a.case == "staticcache":
            static_cache(model, a, gen, dev)
        elif a.case == "dynserve":
            dynamic_requests(model, a, gen, dev)
        else:
            chat(model, a, gen, dev)
    torch.cuda.synchronize()
    return 0


if __name__ == "__main__":
    sys.exit(main())
