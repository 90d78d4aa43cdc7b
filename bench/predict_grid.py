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

    python3 bench/predict_grid.py > grid.jsonl              # the model-building grid
    python3 bench/predict_grid.py --heldout > heldout.jsonl # other models and shapes
    python3 bench/predict_grid.py --real > real.jsonl       # released models' shapes
    python3 bench/predict_grid.py --final > final.jsonl     # measured once, model frozen
    python3 bench/predict_grid.py --options > options.jsonl # checkpointing, eager, LoRA
    python3 bench/predict_grid.py --options-final > options_final.jsonl
    python3 bench/predict_grid.py --newarch > newarch.jsonl # gemma3_text, olmo2
    python3 bench/predict_grid.py --newarch-final > newarch_final.jsonl
    python3 bench/predict_grid.py --newarch-options > newarch_options.jsonl
    python3 bench/predict_grid.py --neox > neox.jsonl       # gpt_neox (Pythia)
    python3 bench/predict_grid.py --neox-final > neox_final.jsonl
    python3 bench/predict_grid.py --opt-phi > optphi.jsonl  # opt, phi
    python3 bench/predict_grid.py --opt-phi-final > optphi_final.jsonl
    python3 bench/predict_grid.py --llama-kin > llama_kin.jsonl  # granite, smollm3
    python3 bench/predict_grid.py --layernorm-gc > layernorm_gc.jsonl
    python3 bench/predict_grid.py --moe > moe.jsonl         # mixtral
    python3 bench/predict_grid.py --moe-final > moe_final.jsonl
    python3 bench/predict_grid.py --phi-dropout > phi_dropout.jsonl
    python3 bench/predict_grid.py --moe2 > moe2.jsonl       # qwen3_moe, qwen2_moe
    python3 bench/predict_grid.py --moe2-final > moe2_final.jsonl
    python3 bench/predict_grid.py --moe-gc > moe_gc.jsonl   # checkpointing on them
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
    "gemma": dict(cls="GemmaConfig", hidden_size=1024, intermediate_size=4096,
                  num_hidden_layers=6, num_attention_heads=8, num_key_value_heads=1,
                  head_dim=128, vocab_size=32000, max_position_embeddings=4096),
}

# Held out: other widths, depths, vocabularies and head layouts than ARCHS,
# never used while building the model (bench/predict_eval.py reports both).
HELDOUT = {
    "gpt2": dict(cls="GPT2Config", n_embd=1024, n_layer=8, n_head=16, vocab_size=50257,
                 n_positions=4096),
    "llama": dict(cls="LlamaConfig", hidden_size=2048, intermediate_size=5632,
                  num_hidden_layers=4, num_attention_heads=32, num_key_value_heads=8,
                  vocab_size=32000, max_position_embeddings=4096),
    "mistral": dict(cls="MistralConfig", hidden_size=1536, intermediate_size=4096,
                    num_hidden_layers=5, num_attention_heads=12, num_key_value_heads=4,
                    vocab_size=32768, max_position_embeddings=4096),
    "qwen2": dict(cls="Qwen2Config", hidden_size=1536, intermediate_size=8960,
                  num_hidden_layers=4, num_attention_heads=12, num_key_value_heads=2,
                  vocab_size=151936, max_position_embeddings=4096, tie_word_embeddings=True),
    "qwen3": dict(cls="Qwen3Config", hidden_size=768, intermediate_size=2048,
                  num_hidden_layers=10, num_attention_heads=12, num_key_value_heads=4,
                  head_dim=64, vocab_size=151936, max_position_embeddings=4096,
                  tie_word_embeddings=False),
    "phi3": dict(cls="Phi3Config", hidden_size=1536, intermediate_size=4096,
                 num_hidden_layers=4, num_attention_heads=12, num_key_value_heads=12,
                 vocab_size=32064, max_position_embeddings=4096),
    "gemma": dict(cls="GemmaConfig", hidden_size=1536, intermediate_size=6144,
                  num_hidden_layers=4, num_attention_heads=8, num_key_value_heads=1,
                  head_dim=192, vocab_size=64000, max_position_embeddings=4096),
    "gemma2": dict(cls="Gemma2Config", hidden_size=1024, intermediate_size=4096,
                   num_hidden_layers=4, num_attention_heads=8, num_key_value_heads=4,
                   head_dim=128, vocab_size=65536, max_position_embeddings=4096),
}
HELDOUT_SHAPES = [(2, 2048), (16, 256), (1, 4096)]

# Held out too: the shapes of released models (their config.json values,
# written out here: no downloads), built on the GPU.
LLAMA3_ROPE = dict(factor=32.0, high_freq_factor=4.0, low_freq_factor=1.0,
                   original_max_position_embeddings=8192, rope_type="llama3")
REAL = {
    "gpt2-124m": dict(cls="GPT2Config", n_embd=768, n_layer=12, n_head=12, vocab_size=50257,
                      n_positions=1024),
    "smollm2-360m": dict(cls="LlamaConfig", hidden_size=960, intermediate_size=2560,
                         num_hidden_layers=32, num_attention_heads=15, num_key_value_heads=5,
                         vocab_size=49152, tie_word_embeddings=True, rope_theta=100000.0,
                         max_position_embeddings=8192),
    "qwen2.5-0.5b": dict(cls="Qwen2Config", hidden_size=896, intermediate_size=4864,
                         num_hidden_layers=24, num_attention_heads=14, num_key_value_heads=2,
                         vocab_size=151936, tie_word_embeddings=True, sliding_window=32768,
                         use_sliding_window=False, max_position_embeddings=32768,
                         rope_theta=1000000.0),
    "qwen3-0.6b": dict(cls="Qwen3Config", hidden_size=1024, intermediate_size=3072,
                       num_hidden_layers=28, num_attention_heads=16, num_key_value_heads=8,
                       head_dim=128, vocab_size=151936, tie_word_embeddings=True,
                       max_position_embeddings=40960, rope_theta=1000000.0),
    "llama3.2-1b": dict(cls="LlamaConfig", hidden_size=2048, intermediate_size=8192,
                        num_hidden_layers=16, num_attention_heads=32, num_key_value_heads=8,
                        head_dim=64, vocab_size=128256, tie_word_embeddings=True,
                        rope_theta=500000.0, rope_scaling=LLAMA3_ROPE,
                        max_position_embeddings=131072),
    "gemma2-2b": dict(cls="Gemma2Config", hidden_size=2304, intermediate_size=9216,
                      num_hidden_layers=26, num_attention_heads=8, num_key_value_heads=4,
                      head_dim=256, vocab_size=256000, sliding_window=4096,
                      query_pre_attn_scalar=256, max_position_embeddings=8192),
    "gemma-2b": dict(cls="GemmaConfig", hidden_size=2048, intermediate_size=16384,
                     num_hidden_layers=18, num_attention_heads=8, num_key_value_heads=1,
                     head_dim=256, vocab_size=256000, max_position_embeddings=8192),
    "phi3-mini": dict(cls="Phi3Config", hidden_size=3072, intermediate_size=8192,
                      num_hidden_layers=32, num_attention_heads=32, num_key_value_heads=32,
                      vocab_size=32064, sliding_window=2047, max_position_embeddings=4096,
                      tie_word_embeddings=False),
}
REAL_SHAPES = [(2, 1024), (8, 256), (1, 4096)]

# The final check, measured once after the model was frozen (2026-11-29):
# models, shapes, optimizers and precisions none of the grids above has.
FINAL = {
    "tinyllama-1.1b": dict(cls="LlamaConfig", hidden_size=2048, intermediate_size=5632,
                           num_hidden_layers=22, num_attention_heads=32, num_key_value_heads=4,
                           vocab_size=32000, max_position_embeddings=2048),
    "smollm2-135m": dict(cls="LlamaConfig", hidden_size=576, intermediate_size=1536,
                         num_hidden_layers=30, num_attention_heads=9, num_key_value_heads=3,
                         vocab_size=49152, tie_word_embeddings=True, max_position_embeddings=8192),
    "qwen2.5-1.5b": dict(cls="Qwen2Config", hidden_size=1536, intermediate_size=8960,
                         num_hidden_layers=28, num_attention_heads=12, num_key_value_heads=2,
                         vocab_size=151936, tie_word_embeddings=True,
                         max_position_embeddings=32768),
    "qwen3-1.7b": dict(cls="Qwen3Config", hidden_size=2048, intermediate_size=6144,
                       num_hidden_layers=28, num_attention_heads=16, num_key_value_heads=8,
                       head_dim=128, vocab_size=151936, tie_word_embeddings=True,
                       max_position_embeddings=40960),
    "gpt2-medium": dict(cls="GPT2Config", n_embd=1024, n_layer=24, n_head=16, vocab_size=50257,
                        n_positions=1024),
    "mistral-w2048": dict(cls="MistralConfig", hidden_size=2048, intermediate_size=5632,
                          num_hidden_layers=8, num_attention_heads=16, num_key_value_heads=4,
                          vocab_size=32768, sliding_window=2048, max_position_embeddings=8192),
    "phi3-mha": dict(cls="Phi3Config", hidden_size=2048, intermediate_size=5632,
                     num_hidden_layers=8, num_attention_heads=16, num_key_value_heads=16,
                     vocab_size=32064, sliding_window=None, max_position_embeddings=8192),
    "gemma-d256": dict(cls="GemmaConfig", hidden_size=1536, intermediate_size=6144,
                       num_hidden_layers=8, num_attention_heads=8, num_key_value_heads=1,
                       head_dim=256, vocab_size=64000, max_position_embeddings=8192),
    "gemma2-w1024": dict(cls="Gemma2Config", hidden_size=1536, intermediate_size=6144,
                         num_hidden_layers=8, num_attention_heads=8, num_key_value_heads=4,
                         head_dim=128, vocab_size=65536, sliding_window=1024,
                         max_position_embeddings=8192),
}
FINAL_SHAPES = [(3, 768), (1, 3072), (12, 128)]
FINAL_OPTS = ["sgd", "sgd-momentum", "adam", "adamw"]
FINAL_PRECISIONS = ["fp32", "bf16-autocast", "bf16-pure", "fp16-autocast"]


# Mixtral (sparse mixture of experts), --moe with snapshots, then --moe-final.
MOE = {
    "mixtral": dict(cls="MixtralConfig", hidden_size=512, intermediate_size=1024,
                    num_hidden_layers=4, num_attention_heads=8, num_key_value_heads=4,
                    num_local_experts=8, num_experts_per_tok=2, vocab_size=32000,
                    max_position_embeddings=4096, router_aux_loss_coef=0.0),
}
MOE_FINAL = {
    "mixtral-wide": dict(cls="MixtralConfig", hidden_size=1024, intermediate_size=2816,
                         num_hidden_layers=3, num_attention_heads=16, num_key_value_heads=8,
                         num_local_experts=4, num_experts_per_tok=2, vocab_size=32000,
                         max_position_embeddings=4096, router_aux_loss_coef=0.0),
    "mixtral-top1-16": dict(cls="MixtralConfig", hidden_size=768, intermediate_size=1536,
                            num_hidden_layers=4, num_attention_heads=12, num_key_value_heads=4,
                            num_local_experts=16, num_experts_per_tok=1, vocab_size=32768,
                            max_position_embeddings=4096, router_aux_loss_coef=0.0),
}

# Qwen's mixtures of experts, added after Mixtral the same way (--moe2 with
# snapshots, then --moe2-final): qwen3_moe (Qwen3's attention with q/k norms,
# top-k renormalised or not, no shared expert) and qwen2_moe (Qwen2's biased
# q/k/v, a shared expert gated by a sigmoid beside the routed ones).
MOE2 = {
    "qwen3_moe": dict(cls="Qwen3MoeConfig", hidden_size=512, intermediate_size=1536,
                      moe_intermediate_size=384, num_hidden_layers=4, num_attention_heads=8,
                      num_key_value_heads=4, head_dim=64, num_experts=16, num_experts_per_tok=4,
                      norm_topk_prob=True, vocab_size=32000, max_position_embeddings=4096,
                      router_aux_loss_coef=0.0, tie_word_embeddings=False),
    "qwen2_moe": dict(cls="Qwen2MoeConfig", hidden_size=512, intermediate_size=1536,
                      moe_intermediate_size=384, shared_expert_intermediate_size=1024,
                      num_hidden_layers=4, num_attention_heads=8, num_key_value_heads=4,
                      num_experts=16, num_experts_per_tok=4, norm_topk_prob=False,
                      vocab_size=32000, max_position_embeddings=4096, router_aux_loss_coef=0.0),
}
MOE2_FINAL = {
    "qwen3-moe-wide": dict(cls="Qwen3MoeConfig", hidden_size=1024, intermediate_size=3072,
                           moe_intermediate_size=512, num_hidden_layers=3, num_attention_heads=16,
                           num_key_value_heads=4, head_dim=128, num_experts=32,
                           num_experts_per_tok=8, norm_topk_prob=True, vocab_size=151936,
                           max_position_embeddings=4096, router_aux_loss_coef=0.0,
                           tie_word_embeddings=False),
    "qwen3-moe-top2": dict(cls="Qwen3MoeConfig", hidden_size=768, intermediate_size=2048,
                           moe_intermediate_size=768, num_hidden_layers=4, num_attention_heads=12,
                           num_key_value_heads=4, head_dim=64, num_experts=8,
                           num_experts_per_tok=2, norm_topk_prob=False, vocab_size=32768,
                           max_position_embeddings=4096, router_aux_loss_coef=0.0),
    "qwen2-moe-wide": dict(cls="Qwen2MoeConfig", hidden_size=1024, intermediate_size=2816,
                           moe_intermediate_size=704, shared_expert_intermediate_size=2816,
                           num_hidden_layers=3, num_attention_heads=16, num_key_value_heads=16,
                           num_experts=24, num_experts_per_tok=4, vocab_size=32000,
                           max_position_embeddings=4096, router_aux_loss_coef=0.0),
}

# Phi-2's residual dropout (resid_pdrop 0.1), modeled as OPT's masks, measured
# once after (--phi-dropout): phi-2's head layout (80 wide, 0.4 rotary).
PHI_DROPOUT = {
    "phi-2-like": dict(cls="PhiConfig", hidden_size=1280, intermediate_size=5120,
                       num_hidden_layers=6, num_attention_heads=16, vocab_size=51200,
                       max_position_embeddings=2048, partial_rotary_factor=0.4,
                       resid_pdrop=0.1),
}

# Llama's layer under other names (--llama-kin), measured once after they were
# mapped to it with no change to the model: Granite (scalar multipliers on the
# embedding, residuals, attention and logits) and SmolLM3 (no rotary in every
# fourth layer).
LLAMA_KIN = {
    "granite": dict(cls="GraniteConfig", hidden_size=1024, intermediate_size=2816,
                    num_hidden_layers=6, num_attention_heads=16, num_key_value_heads=4,
                    vocab_size=49152, max_position_embeddings=4096, embedding_multiplier=12.0,
                    residual_multiplier=0.22, attention_multiplier=0.0078125,
                    logits_scaling=8.0, tie_word_embeddings=True),
    "smollm3": dict(cls="SmolLM3Config", hidden_size=1024, intermediate_size=2816,
                    num_hidden_layers=8, num_attention_heads=16, num_key_value_heads=4,
                    vocab_size=128256, max_position_embeddings=4096),
}

# Training options on the model-building architectures (--options).
OPTION_SETS = [{"gc": "default"}, {"gc": "nonreentrant"}, {"attn": "eager"},
               {"lora": 16, "targets": ["q_proj", "v_proj"]},
               {"lora": 16, "targets": ["q_proj", "v_proj"], "gc": "nonreentrant"}]
OPTION_ARCHS = ["llama", "qwen2", "gemma2", "gpt2"]
OPTION_SHAPES = [(2, 1024), (8, 256)]


# Measured once after the options were modeled (--options-final): other
# models, shapes, ranks, targets and combinations.
ALL_LINEAR = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
FINAL_OPTION_SETS = [{"gc": "default"}, {"attn": "eager"}, {"lora": 8, "targets": ALL_LINEAR},
                     {"lora": 64, "targets": ["q_proj", "v_proj"], "gc": "default"},
                     {"attn": "eager", "gc": "default"}]
FINAL_OPTION_ARCHS = ["mistral", "qwen3", "phi3", "gemma", "gemma2", "llama"]
FINAL_OPTION_SHAPES = [(4, 512), (1, 2048)]
PHI3_NAMES = {"q_proj": "qkv_proj", "k_proj": "qkv_proj", "v_proj": "qkv_proj",
              "gate_proj": "gate_up_proj", "up_proj": "gate_up_proj"}


def options_main(budget, final=False, newarch=False):
    """--options, --options-final; with newarch (--newarch-options) the
    final option sets on the added architectures' held-out configs."""
    t0 = time.time()
    table = NEWARCH_FINAL if newarch else HELDOUT if final else ARCHS
    archs = (["gemma3-gqa", "olmo2-gqa"] if newarch else
             FINAL_OPTION_ARCHS if final else OPTION_ARCHS)
    sets = FINAL_OPTION_SETS if final else OPTION_SETS
    if "--layernorm-gc" in sys.argv:  # checkpointing on gpt_neox, opt, phi
        table = {**NEOX_FINAL, **OPTPHI_FINAL}
        archs, sets = ["pythia-160m", "opt-125m", "phi-1.5-like"], [{"gc": "default"}]
    if "--moe-gc" in sys.argv:  # checkpointing on the mixtures of experts
        table = {**MOE_FINAL, **MOE2_FINAL}
        archs, sets = ["mixtral-wide", "qwen3-moe-top2", "qwen2-moe-wide"], [{"gc": "default"}]
    k = 0
    for arch in archs:
        for batch, seq in (FINAL_OPTION_SHAPES if final else OPTION_SHAPES):
            for options in sets:
                if arch == "gpt2" and options.get("lora"):
                    options = dict(options, targets=["c_attn"])
                if arch == "phi3" and options.get("lora"):
                    names = dict.fromkeys(PHI3_NAMES.get(t, t) for t in options["targets"])
                    options = dict(options, targets=list(names))
                k += 1
                combos = ([(("sgd", "adamw")[k % 2], PRECISIONS[k % 3]),
                           (("adamw", "sgd")[k % 2], PRECISIONS[(k + 1) % 3])] if final
                          else [("adamw", p) for p in PRECISIONS])
                for opt, prec in combos:
                    if time.time() - t0 > budget:
                        return
                    try:
                        row = one(arch, batch, seq, opt, prec, table, options)
                    except Exception as e:  # a failing row is data too
                        row = {"arch": arch, "batch": batch, "seq": seq, "optimizer": opt,
                               "precision": prec, "options": options,
                               "error": f"{type(e).__name__}: {e}"[:300]}
                        gc.collect()
                        torch.cuda.empty_cache()
                    print(json.dumps(row), flush=True)


def final_combos(k):
    """Four of the sixteen optimizer x precision pairs per model and shape,
    rotating so that every pair appears across the grid."""
    pairs = [(o, p) for o in FINAL_OPTS for p in FINAL_PRECISIONS]
    return [pairs[(5 * k + 3 * j) % len(pairs)] for j in range(4)]

# Architectures added after the model was frozen (session 10): read while
# they were modeled (--newarch, with allocator snapshots of one step each:
# bench/predict_snapshots.py --newarch), then measured once with other sizes,
# shapes, optimizers and precisions (--newarch-final).
NEWARCH = {
    "gemma3_text": dict(cls="Gemma3TextConfig", hidden_size=768, intermediate_size=3072,
                        num_hidden_layers=6, num_attention_heads=4, num_key_value_heads=1,
                        head_dim=256, vocab_size=65536, sliding_window=512,
                        max_position_embeddings=4096),
    "olmo2": dict(cls="Olmo2Config", hidden_size=1024, intermediate_size=2816,
                  num_hidden_layers=6, num_attention_heads=16, num_key_value_heads=16,
                  vocab_size=50304, max_position_embeddings=4096),
}
NEWARCH_SHAPES = [(2, 256), (2, 1024)]
NEWARCH_FINAL = {
    "gemma3-1b-like": dict(cls="Gemma3TextConfig", hidden_size=1152, intermediate_size=6912,
                           num_hidden_layers=8, num_attention_heads=4, num_key_value_heads=1,
                           head_dim=256, vocab_size=65536, sliding_window=1024,
                           max_position_embeddings=8192),
    "gemma3-gqa": dict(cls="Gemma3TextConfig", hidden_size=1024, intermediate_size=4096,
                       num_hidden_layers=7, num_attention_heads=8, num_key_value_heads=4,
                       head_dim=128, vocab_size=32768, sliding_window=256,
                       max_position_embeddings=4096),
    "olmo2-gqa": dict(cls="Olmo2Config", hidden_size=1536, intermediate_size=4096,
                      num_hidden_layers=5, num_attention_heads=12, num_key_value_heads=4,
                      vocab_size=100352, max_position_embeddings=4096),
    "olmo2-small": dict(cls="Olmo2Config", hidden_size=768, intermediate_size=3072,
                        num_hidden_layers=8, num_attention_heads=12, num_key_value_heads=12,
                        vocab_size=50304, max_position_embeddings=4096),
}
NEWARCH_FINAL_SHAPES = [(1, 512), (4, 512), (1, 2048)]

# GPT-NeoX (Pythia), added next: the building grid with snapshots (--neox),
# then other sizes, residual layouts and rotary widths (--neox-final).
NEOX = {
    "gpt_neox": dict(cls="GPTNeoXConfig", hidden_size=768, num_hidden_layers=6,
                     num_attention_heads=12, intermediate_size=3072, vocab_size=50304,
                     max_position_embeddings=2048, rotary_pct=0.25),
}
NEOX_SHAPES = [(2, 256), (2, 1024)]

# OPT and Phi (phi-1.5/phi-2), added after GPT-NeoX the same way (--opt-phi,
# snapshots: bench/predict_snapshots.py --opt-phi; held out: --opt-phi-final).
OPTPHI = {
    "opt": dict(cls="OPTConfig", hidden_size=768, num_hidden_layers=6, ffn_dim=3072,
                num_attention_heads=12, vocab_size=50272, max_position_embeddings=2048,
                word_embed_proj_dim=768),
    "phi": dict(cls="PhiConfig", hidden_size=1024, intermediate_size=4096, num_hidden_layers=6,
                num_attention_heads=16, vocab_size=51200, max_position_embeddings=2048,
                partial_rotary_factor=0.5),
}
OPTPHI_FINAL = {
    "opt-125m": dict(cls="OPTConfig", hidden_size=768, num_hidden_layers=12, ffn_dim=3072,
                     num_attention_heads=12, vocab_size=50272, max_position_embeddings=2048,
                     word_embed_proj_dim=768),
    "opt-wide-nodrop": dict(cls="OPTConfig", hidden_size=2048, num_hidden_layers=4, ffn_dim=8192,
                            num_attention_heads=32, vocab_size=50272,
                            max_position_embeddings=2048, word_embed_proj_dim=2048, dropout=0.0),
    "phi-1.5-like": dict(cls="PhiConfig", hidden_size=2048, intermediate_size=8192,
                         num_hidden_layers=6, num_attention_heads=32, vocab_size=51200,
                         max_position_embeddings=2048, partial_rotary_factor=0.5),
    "phi-gqa": dict(cls="PhiConfig", hidden_size=768, intermediate_size=3072, num_hidden_layers=8,
                    num_attention_heads=12, num_key_value_heads=4, vocab_size=51200,
                    max_position_embeddings=2048, partial_rotary_factor=0.4),
}

NEOX_FINAL = {
    "pythia-160m": dict(cls="GPTNeoXConfig", hidden_size=768, num_hidden_layers=12,
                        num_attention_heads=12, intermediate_size=3072, vocab_size=50304,
                        max_position_embeddings=2048, rotary_pct=0.25),
    "pythia-410m": dict(cls="GPTNeoXConfig", hidden_size=1024, num_hidden_layers=24,
                        num_attention_heads=16, intermediate_size=4096, vocab_size=50304,
                        max_position_embeddings=2048, rotary_pct=0.25),
    "neox-serial": dict(cls="GPTNeoXConfig", hidden_size=1024, num_hidden_layers=6,
                        num_attention_heads=8, intermediate_size=2816, vocab_size=32000,
                        max_position_embeddings=4096, rotary_pct=1.0,
                        use_parallel_residual=False),
}

SHAPES = [(1, 512), (4, 256), (4, 1024), (8, 512)]
OPTS = ["sgd", "adamw"]
PRECISIONS = ["fp32", "bf16-autocast", "bf16-pure"]


def build(arch, table=None):
    spec = dict((table or ARCHS)[arch])
    cfg = getattr(transformers, spec.pop("cls"))(**spec)
    cfg.use_cache = False
    return cfg


def with_options(model, options):
    """Gradient checkpointing ("gc": "default" | "reentrant" | "nonreentrant")
    and LoRA ("lora": rank, "targets": module names; the base frozen)."""
    if options.get("lora"):
        from peft import LoraConfig, get_peft_model
        model = get_peft_model(model, LoraConfig(r=options["lora"], lora_alpha=2 * options["lora"],
                                                 target_modules=options["targets"],
                                                 lora_dropout=0.0, task_type="CAUSAL_LM"))
    gc_mode = options.get("gc")
    if gc_mode:
        kwargs = None if gc_mode == "default" else {"use_reentrant": gc_mode == "reentrant"}
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs=kwargs)
        if options.get("lora"):
            model.enable_input_require_grads()
    return model


# optimizer name -> (class, keyword arguments)
OPTIMIZERS = {"adamw": (torch.optim.AdamW, {"lr": 1e-5}),
              "adam": (torch.optim.Adam, {"lr": 1e-5}),
              "sgd-momentum": (torch.optim.SGD, {"lr": 1e-3, "momentum": 0.9}),
              "sgd": (torch.optim.SGD, {"lr": 1e-3})}


def make_optimizer(name, params):
    cls, kw = OPTIMIZERS[name]
    return cls(params, **kw)


def steady_steps(model, opt, ids, prec, steps=3, trace=None):
    """`steps` steps; the last is measured: (allocated at its start, peak
    through its backward, its peak). The output lives until after
    opt.step(); the realised shape is asserted (seed 001's guard). With a
    list as `trace`, every step's triple is appended to it."""
    batch, seq = ids.shape
    auto = prec in ("bf16-autocast", "fp16-autocast")
    adtype = torch.float16 if prec == "fp16-autocast" else torch.bfloat16
    scaler = torch.amp.GradScaler("cuda") if prec == "fp16-autocast" else None
    for step in range(steps):
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        before = torch.cuda.memory_allocated()
        with torch.autocast("cuda", dtype=adtype, enabled=auto):
            out = model(input_ids=ids, labels=ids)
        assert out.logits.shape[:2] == (batch, seq), out.logits.shape
        (scaler.scale(out.loss) if scaler else out.loss).backward()
        torch.cuda.synchronize()
        to_backward = torch.cuda.max_memory_allocated()
        if scaler:
            scaler.step(opt)
            scaler.update()
        else:
            opt.step()
        opt.zero_grad(set_to_none=True)
        del out
        torch.cuda.synchronize()
        if trace is not None:
            trace.append([before, to_backward, torch.cuda.max_memory_allocated()])
    return before, to_backward, torch.cuda.max_memory_allocated()


def one(arch, batch, seq, opt_name, prec, table=None, options=None):
    options = options or {}
    cfg = build(arch, table)
    torch.manual_seed(0)
    kw = {"attn_implementation": options["attn"]} if options.get("attn") else {}
    if table in (REAL, FINAL, NEWARCH_FINAL, NEOX_FINAL, OPTPHI_FINAL):  # initialise on the GPU
        with torch.device("cuda"):
            model = transformers.AutoModelForCausalLM.from_config(cfg, **kw)
    else:
        model = transformers.AutoModelForCausalLM.from_config(cfg, **kw)
    if prec == "bf16-pure":
        model = model.to(torch.bfloat16)
    model = with_options(model.cuda().train(), options)
    params = sum(p.numel() for p in model.parameters())
    trainable = [p for p in model.parameters() if p.requires_grad]
    attn = getattr(model.config, "_attn_implementation", None)
    opt = make_optimizer(opt_name, trainable)
    ids = torch.randint(cfg.vocab_size, (batch, seq), device="cuda")
    before, to_backward, peak = steady_steps(model, opt, ids, prec)
    row = {"arch": arch, "batch": batch, "seq": seq, "optimizer": opt_name,
           "precision": prec, "params": params, "vocab": cfg.vocab_size,
           "peak_allocated": peak, "allocated_before_step": before,
           "peak_through_backward": to_backward,
           "attn_implementation": attn, "options": options,
           "trainable": sum(p.numel() for p in trainable),
           "reserved": torch.cuda.memory_reserved(),
           "max_reserved": torch.cuda.max_memory_reserved(), "config": cfg.to_dict()}
    del model, opt, ids
    gc.collect()
    torch.cuda.empty_cache()
    return row


def main():
    heldout = "--heldout" in sys.argv
    table, shapes = (HELDOUT, HELDOUT_SHAPES) if heldout else (ARCHS, SHAPES)
    if "--real" in sys.argv:
        table, shapes = REAL, REAL_SHAPES
    final = "--final" in sys.argv or "--newarch-final" in sys.argv
    if "--final" in sys.argv:
        table, shapes = FINAL, FINAL_SHAPES
    if "--newarch" in sys.argv:
        table, shapes = NEWARCH, NEWARCH_SHAPES
    if "--newarch-final" in sys.argv:
        table, shapes = NEWARCH_FINAL, NEWARCH_FINAL_SHAPES
    if "--neox" in sys.argv:
        table, shapes = NEOX, NEOX_SHAPES
    if "--neox-final" in sys.argv:
        table, shapes, final = NEOX_FINAL, NEWARCH_FINAL_SHAPES, True
    if "--opt-phi" in sys.argv:
        table, shapes = OPTPHI, NEOX_SHAPES
    if "--opt-phi-final" in sys.argv:
        table, shapes, final = OPTPHI_FINAL, NEWARCH_FINAL_SHAPES, True
    if "--llama-kin" in sys.argv:
        table, shapes, final = LLAMA_KIN, NEWARCH_FINAL_SHAPES, True
    if "--moe" in sys.argv:
        table, shapes = MOE, NEOX_SHAPES
    if "--phi-dropout" in sys.argv:
        table, shapes, final = PHI_DROPOUT, NEWARCH_FINAL_SHAPES, True
    if "--moe-final" in sys.argv:
        table, shapes, final = MOE_FINAL, NEWARCH_FINAL_SHAPES, True
    if "--moe2" in sys.argv:
        table, shapes = MOE2, NEOX_SHAPES
    if "--moe2-final" in sys.argv:
        table, shapes, final = MOE2_FINAL, NEWARCH_FINAL_SHAPES, True
    budget = float(([a[9:] for a in sys.argv if a.startswith("--budget=")] or ["1e9"])[0])
    only = [a[len("--archs="):].split(",") for a in sys.argv if a.startswith("--archs=")]
    archs = [a for a in table if not only or a in only[0]]
    print(json.dumps({"torch": torch.__version__, "transformers": transformers.__version__,
                      "gpu": torch.cuda.get_device_name(0)}), flush=True)
    if "--newarch-options" in sys.argv:
        return options_main(budget, True, True)
    if "--layernorm-gc" in sys.argv or "--moe-gc" in sys.argv:
        return options_main(budget, True)
    if "--options" in sys.argv or "--options-final" in sys.argv:
        return options_main(budget, "--options-final" in sys.argv)
    t0 = time.time()
    k = 0
    for arch in archs:
        limit = table[arch].get("n_positions", table[arch].get("max_position_embeddings", 1 << 30))
        for batch, seq in shapes:
            k += 1
            if seq > limit or time.time() - t0 > budget:
                continue
            combos = final_combos(k) if final else [(o, p) for o in OPTS for p in PRECISIONS]
            for opt, prec in combos:
                try:
                    row = one(arch, batch, seq, opt, prec, table)
                except Exception as e:  # a failing row is data too
                    row = {"arch": arch, "batch": batch, "seq": seq, "optimizer": opt,
                           "precision": prec, "error": f"{type(e).__name__}: {e}"[:300]}
                    gc.collect()
                    torch.cuda.empty_cache()
                print(json.dumps(row), flush=True)
    print(json.dumps({"seconds": round(time.time() - t0, 1)}), file=sys.stderr)


if __name__ == "__main__":
    main()
