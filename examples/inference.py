#!/usr/bin/env python3
"""More inference loops (no training step), for checking memdiag's call to
call judgement (only embedleak leaks). Run a case under `memdiag run`:

    memdiag run -- python3 examples/inference.py --case growbatch

  growbatch  generate() on batches of 1, 2, ... 8 prompts, each call's output kept in
             a variable until the next call replaces it (larger each time)
  beam       generate() with 4 beams on 8 batches; nothing kept
  embedleak  a BERT encoder's token embeddings of 12 batches, appended to a list on the
             GPU (a ColBERT-style index built in device memory)
"""
from __future__ import annotations

import argparse
import sys

CASES = ("growbatch", "beam", "embedleak")


def parse() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--case", required=True, choices=CASES)
    return p.parse_args()


ARGS = parse()

import torch  # noqa: E402


def llama(dev: torch.device):
    from transformers import LlamaConfig, LlamaForCausalLM
    cfg = LlamaConfig(vocab_size=32000, hidden_size=512, intermediate_size=2048,
                      num_hidden_layers=4, num_attention_heads=8, num_key_value_heads=8,
                      max_position_embeddings=1024)
    return LlamaForCausalLM(cfg).to(dev, dtype=torch.bfloat16).eval()


def generate(dev: torch.device, beams: int) -> None:
    model = llama(dev)
    gen = torch.Generator(device=dev).manual_seed(0)
    out = None
    with torch.no_grad():
        for call in range(8):
            n = call + 1 if beams == 1 else 8
            ids = torch.randint(32000, (n, 64), generator=gen, device=dev)
            out = model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=64,
                                 min_new_tokens=64, do_sample=False, num_beams=beams,
                                 pad_token_id=0, output_scores=beams == 1,
                                 return_dict_in_generate=True)
    print(f"inference.py: last output {tuple(out.sequences.shape)}", flush=True)


def embed(dev: torch.device) -> None:
    from transformers import BertConfig, BertModel
    cfg = BertConfig(vocab_size=30522, hidden_size=768, num_hidden_layers=6,
                     num_attention_heads=12, intermediate_size=3072)
    model = BertModel(cfg).to(dev, dtype=torch.bfloat16).eval()
    gen = torch.Generator(device=dev).manual_seed(0)
    index = []
    with torch.no_grad():
        for _ in range(12):
            ids = torch.randint(30522, (256, 256), generator=gen, device=dev)
            index.append(model(input_ids=ids).last_hidden_state)  # 96 MiB a batch, kept
    print(f"inference.py embedleak: {len(index)} batches indexed", flush=True)


def main() -> int:
    if not torch.cuda.is_available():
        print("inference.py: CUDA is not available", file=sys.stderr)
        return 2
    dev = torch.device("cuda", 0)
    torch.cuda.set_device(dev)
    torch.manual_seed(0)
    {"growbatch": lambda d: generate(d, 1), "beam": lambda d: generate(d, 4),
     "embedleak": embed}[ARGS.case](dev)
    torch.cuda.synchronize()
    print(f"inference.py {ARGS.case}: done", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
