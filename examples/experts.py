#!/usr/bin/env python3
"""Mixture-of-experts language models from transformers trained on synthetic
tokens, for checking memdiag's diagnosis on them (grouped_mm experts, routers,
the load-balancing loss). Run a case under `memdiag run`:

    memdiag run -- python3 examples/experts.py --case routerkeep

  routerkeep   a Qwen3-MoE model with the load-balancing loss
               (output_router_logits); every step's router logits are appended to
               a list "for the expert-usage plot at the end": each layer's logits
               stay on the GPU, a few MiB a step (a leak)
  routercount  the same model; each step's top-k choices are counted into one
               running tensor under no_grad (the control)
  expertseager the same model with transformers' eager experts (a loop over the
               experts hit, tensors sized by how many tokens each got: sizes vary
               step to step; a control)
  mixtralaux   a Mixtral model with the load-balancing loss under bf16 autocast
               (a control)
"""
from __future__ import annotations

import argparse
import sys

CASES = ("routerkeep", "routercount", "expertseager", "mixtralaux")


def parse() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--case", required=True, choices=CASES)
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--seq", type=int, default=512)
    return p.parse_args()


ARGS = parse()

import torch  # noqa: E402
import transformers  # noqa: E402

VOCAB, EXPERTS, TOP_K = 32000, 32, 4


def qwen3_moe() -> transformers.PretrainedConfig:
    return transformers.Qwen3MoeConfig(
        hidden_size=1024, intermediate_size=3072, moe_intermediate_size=512,
        num_hidden_layers=6, num_attention_heads=16, num_key_value_heads=4, head_dim=64,
        num_experts=EXPERTS, num_experts_per_tok=TOP_K, norm_topk_prob=True,
        vocab_size=VOCAB, max_position_embeddings=4096, output_router_logits=True,
        router_aux_loss_coef=0.001, use_cache=False)


def mixtral() -> transformers.PretrainedConfig:
    return transformers.MixtralConfig(
        hidden_size=1024, intermediate_size=2048, num_hidden_layers=6, num_attention_heads=16,
        num_key_value_heads=4, num_local_experts=8, num_experts_per_tok=2, vocab_size=VOCAB,
        max_position_embeddings=4096, output_router_logits=True, router_aux_loss_coef=0.02,
        use_cache=False)


def build(a: argparse.Namespace, dev: torch.device) -> torch.nn.Module:
    cfg = mixtral() if a.case == "mixtralaux" else qwen3_moe()
    model = transformers.AutoModelForCausalLM.from_config(cfg)
    if a.case == "expertseager":  # the experts' own loop instead of grouped_mm
        model.config._experts_implementation = "eager"
    return model.to(dev).train()


def train(a: argparse.Namespace, dev: torch.device) -> None:
    model = build(a, dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    gen = torch.Generator(device=dev).manual_seed(0)
    usage = []  # routerkeep: every step's router logits
    counts = torch.zeros(EXPERTS, dtype=torch.long, device=dev)  # routercount
    for step in range(a.steps):
        ids = torch.randint(VOCAB, (a.batch, a.seq), generator=gen, device=dev)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            out = model(input_ids=ids, labels=ids)
        out.loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        if a.case == "routerkeep":
            usage.append(out.router_logits)
        elif a.case == "routercount":
            with torch.no_grad():
                for logits in out.router_logits:
                    chosen = logits.topk(TOP_K, dim=-1).indices.flatten()
                    counts += torch.bincount(chosen, minlength=EXPERTS)
        print(f"step {step}: loss {out.loss.item():.3f} aux {float(out.aux_loss):.4f}",
              flush=True)
        del out
    if usage:
        per_expert = torch.stack([torch.cat(u).argmax(-1).bincount(minlength=EXPERTS)
                                  for u in usage]).sum(0)
        print("expert usage:", per_expert.tolist(), flush=True)
    elif a.case == "routercount":
        print("expert usage:", counts.tolist(), flush=True)


def main() -> int:
    a = ARGS
    if not torch.cuda.is_available():
        print("experts.py: CUDA is not available", file=sys.stderr)
        return 2
    dev = torch.device("cuda", 0)
    torch.cuda.set_device(dev)
    torch.manual_seed(0)
    train(a, dev)
    torch.cuda.synchronize()
    print(f"experts.py {a.case}: done", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
