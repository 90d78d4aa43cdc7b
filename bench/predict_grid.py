#!/usr/bin/env python3
"""Measures the peak GPU memory of steady-state training steps over a grid
of Hugging Face causal LMs built from configs (no downloads), for fitting
and validating `memdiag predict` (issue 5). One JSON object per line.

For each (architecture, batch, sequence, optimizer, precision):
  * build the model from its config on the GPU, count parameters the way
    transformers does (sum of numel, tied weights once);
  * run two steps (the first creates optimizer state), reset the peak, run a
    third and record max_memory_allocated: what predict must reproduce;
  * guard (seed 001's lesson): the realised input shape is asserted, and
    the loss is transformers' own (labels = input ids).

    python3 bench/predict_grid.py > grid.jsonl
"""
import gc
import json
import sys
import time

import torch
import transformers

MIB = 1 << 20

# Small but real shapes: head dims 64-128, GQA where the family has it.
ARCHS = {
    "gpt2": dict(cls="GPT2Config", n_embd=768, n_layer=6, n_head=12, vocab_size=50257,
                 n_positions=2048),
    "llama": dict(cls="LlamaConfig", hidden_size=1024, intermediate_size=2816,
                  num_hidden_layers=6, num_attention_heads=16, num_key_value_heads=4,
                  vocab_size=32000, max_position_embeddings=4096),
    "mistral": dict(cls="MistralConfig", hidden_size=1024, intermediate_size=3584,
                    num_hidden_layers=6, num_attention_heads=16, num_key_value_heads=8,
                    vocab_size=32768, max_position_embeddings=4096),
    "qwen2": dict(cls="Qwen2Config", hidden_size=896, intermediate_size=4864,
                  num_hidden_layers=6, num_attention_heads=14, num_key_value_heads=2,
                  vocab_size=151936, max_position_embeddings=4096, tie_word_embeddings=True),
    "qwen3": dict(cls="Qwen3Config", hidden_size=1024, intermediate_size=3072,
                  num_hidden_layers=6, num_attention_heads=16, num_key_value_heads=8,
                  head_dim=128, vocab_size=151936, max_position_embeddings=4096,
                  tie_word_embeddings=True),
    "gemma2": dict(cls="Gemma2Config", hidden_size=768, intermediate_size=3072,
                   num_hidden_layers=6, num_attention_heads=8, num_key_value_heads=4,
                   head_dim=128, vocab_size=65536, max_position_embeddings=4096),
    "phi3": dict(cls="Phi3Config", hidden_size=1024, intermediate_size=2816,
                 num_hidden_layers=6, num_attention_heads=16, num_key_value_heads=16,
                 vocab_size=32064, max_position_embeddings=4096),
}
SHAPES = [(1, 512), (4, 256), (4, 1024), (8, 512)]
OPTS = ["sgd", "adamw"]
PRECISIONS = ["fp32", "bf16-autocast", "bf16-pure"]


def build(arch):
    spec = dict(ARCHS[arch])
    cfg = getattr(transformers, spec.pop("cls"))(**spec)
    cfg.use_cache = False
    return cfg


def one(arch, batch, seq, opt_name, prec):
    cfg = build(arch)
    torch.manual_seed(0)
    model = transformers.AutoModelForCausalLM.from_config(cfg)
    if prec == "bf16-pure":
        model = model.to(torch.bfloat16)
    model = model.cuda().train()
    params = sum(p.numel() for p in model.parameters())
    opt = (torch.optim.AdamW(model.parameters(), lr=1e-5) if opt_name == "adamw"
           else torch.optim.SGD(model.parameters(), lr=1e-3))
    ids = torch.randint(cfg.vocab_size, (batch, seq), device="cuda")
    assert tuple(ids.shape) == (batch, seq)
    auto = prec == "bf16-autocast"
    before = 0
    for step in range(3):
        if step == 2:
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
            before = torch.cuda.memory_allocated()
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=auto):
            out = model(input_ids=ids, labels=ids)
        assert out.logits.shape[:2] == (batch, seq), out.logits.shape
        out.loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        del out
    torch.cuda.synchronize()
    peak = torch.cuda.max_memory_allocated()
    row = {"arch": arch, "batch": batch, "seq": seq, "optimizer": opt_name,
           "precision": prec, "params": params, "vocab": cfg.vocab_size,
           "peak_allocated": peak, "allocated_before_step": before,
           "reserved": torch.cuda.memory_reserved(), "config": cfg.to_dict()}
    del model, opt, ids
    gc.collect()
    torch.cuda.empty_cache()
    return row


def main():
    print(json.dumps({"torch": torch.__version__, "transformers": transformers.__version__,
                      "gpu": torch.cuda.get_device_name(0)}), flush=True)
    t0 = time.time()
    for arch in ARCHS:
        for batch, seq in SHAPES:
            for opt in OPTS:
                for prec in PRECISIONS:
                    try:
                        row = one(arch, batch, seq, opt, prec)
                    except Exception as e:  # a failing row is data too
                        row = {"arch": arch, "batch": batch, "seq": seq, "optimizer": opt,
                               "precision": prec, "error": f"{type(e).__name__}: {e}"[:300]}
                        gc.collect()
                        torch.cuda.empty_cache()
                    print(json.dumps(row), flush=True)
    print(json.dumps({"seconds": round(time.time() - t0, 1)}), file=sys.stderr)


if __name__ == "__main__":
    main()
