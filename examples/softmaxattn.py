#!/usr/bin/env python3
"""Attention whose softmax leaves no Python frame, for checking memdiag's
attention-matrix evidence on recordings with C++ stacks (`memdiag run
--stacks all`, or torch's own default of stacks="all"):

    memdiag run --stacks all -- python3 examples/softmaxattn.py --case timmvit

  timmvit  timm's ViT-B/16 with its fused attention off (attn.softmax(dim=-1),
           the Tensor method), batch 64, trained with AdamW
  t5all    sequence.py's T5 (transformers' sdpa path with T5's relative
           position bias, which scaled_dot_product_attention runs on its math
           kernel), with C++ stacks
"""
from __future__ import annotations

import argparse
import sys

CASES = ("timmvit", "t5all")


def parse() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--case", required=True, choices=CASES)
    p.add_argument("--steps", type=int, default=6)
    return p.parse_args()


ARGS = parse()

import torch  # noqa: E402


def timmvit(a: argparse.Namespace, dev: torch.device) -> None:
    import timm
    from timm.layers import set_fused_attn
    set_fused_attn(False)
    model = timm.create_model("vit_base_patch16_224", pretrained=False, num_classes=1000).to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    gen = torch.Generator(device=dev).manual_seed(0)
    for _ in range(a.steps):
        x = torch.randn(64, 3, 224, 224, generator=gen, device=dev)
        y = torch.randint(1000, (64,), generator=gen, device=dev)
        torch.nn.functional.cross_entropy(model(x), y).backward()
        opt.step()
        opt.zero_grad(set_to_none=True)


def t5all(a: argparse.Namespace, dev: torch.device) -> None:
    from transformers import T5Config, T5ForConditionalGeneration
    cfg = T5Config(vocab_size=32128, d_model=512, d_kv=64, d_ff=2048, num_layers=6,
                   num_decoder_layers=6, num_heads=8, decoder_start_token_id=0)
    model = T5ForConditionalGeneration(cfg).to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    gen = torch.Generator(device=dev).manual_seed(0)
    for _ in range(a.steps):
        src = torch.randint(32128, (16, 512), generator=gen, device=dev)
        tgt = torch.randint(32128, (16, 128), generator=gen, device=dev)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = model(input_ids=src, labels=tgt).loss
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)


def main() -> int:
    if not torch.cuda.is_available():
        print("softmaxattn.py: CUDA is not available", file=sys.stderr)
        return 2
    dev = torch.device("cuda", 0)
    torch.cuda.set_device(dev)
    torch.manual_seed(0)
    {"timmvit": timmvit, "t5all": t5all}[ARGS.case](ARGS, dev)
    torch.cuda.synchronize()
    print(f"softmaxattn.py {ARGS.case}: done", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
