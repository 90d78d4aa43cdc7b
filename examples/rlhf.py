#!/usr/bin/env python3
"""Preference and reinforcement-learning loops on a small GPT-2 from
transformers (built from a config, no download), for checking memdiag's
diagnosis on code it was not written against. Neither leaks.

    memdiag run -- python3 examples/rlhf.py --case dpo

  dpo    DPO: each step a frozen reference model (no_grad) and the policy score a
         chosen and a rejected answer, concatenated into one batch
  rollout  each step the policy first generates answers (generate(), no_grad), then
         trains on them with a reward-weighted log-likelihood (REINFORCE)
"""
from __future__ import annotations

import argparse
import sys

import torch
from torch import nn

VOCAB = 16384


def parse() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--case", required=True, choices=("dpo", "rollout"))
    p.add_argument("--steps", type=int, default=8)
    return p.parse_args()


def gpt2(dev: torch.device) -> nn.Module:
    from transformers import GPT2Config, GPT2LMHeadModel
    cfg = GPT2Config(vocab_size=VOCAB, n_positions=1024, n_embd=768, n_layer=6, n_head=12)
    return GPT2LMHeadModel(cfg).to(dev)


def token_logps(model: nn.Module, ids: torch.Tensor) -> torch.Tensor:
    logits = model(input_ids=ids).logits[:, :-1].float()
    return torch.gather(logits.log_softmax(-1), 2, ids[:, 1:, None]).squeeze(2).sum(1)


def dpo(a: argparse.Namespace, dev: torch.device, gen: torch.Generator) -> None:
    policy, reference = gpt2(dev), gpt2(dev).eval().requires_grad_(False)
    opt = torch.optim.AdamW(policy.parameters(), lr=1e-5)
    for _ in range(a.steps):
        chosen = torch.randint(VOCAB, (4, 384), generator=gen, device=dev)
        rejected = torch.randint(VOCAB, (4, 384), generator=gen, device=dev)
        both = torch.cat([chosen, rejected])
        with torch.autocast("cuda", dtype=torch.bfloat16):
            with torch.no_grad():
                ref = token_logps(reference, both)
            pol = token_logps(policy, both)
        margin = (pol[:4] - ref[:4]) - (pol[4:] - ref[4:])
        (-nn.functional.logsigmoid(0.1 * margin).mean()).backward()
        opt.step()
        opt.zero_grad(set_to_none=True)


def rollout(a: argparse.Namespace, dev: torch.device, gen: torch.Generator) -> None:
    policy = gpt2(dev)
    opt = torch.optim.AdamW(policy.parameters(), lr=1e-5)
    for _ in range(a.steps):
        prompts = torch.randint(VOCAB, (8, 64), generator=gen, device=dev)
        with torch.no_grad():
            answers = policy.generate(prompts, attention_mask=torch.ones_like(prompts),
                                      max_new_tokens=128, min_new_tokens=128, do_sample=True,
                                      pad_token_id=0)
        reward = torch.rand(8, generator=gen, device=dev)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = -(reward * token_logps(policy, answers)).mean()
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)


def main() -> int:
    a = parse()
    if not torch.cuda.is_available():
        print("rlhf.py: CUDA is not available", file=sys.stderr)
        return 2
    dev = torch.device("cuda", 0)
    torch.cuda.set_device(dev)
    torch.manual_seed(0)
    gen = torch.Generator(device=dev).manual_seed(0)
    (dpo if a.case == "dpo" else rollout)(a, dev, gen)
    torch.cuda.synchronize()
    return 0


if __name__ == "__main__":
    sys.exit(main())
