#!/usr/bin/env python3
"""A Hugging Face causal LM trained for a few steps, built from a config
(no download), for `memdiag run`:

    memdiag run -- python3 examples/hf_train.py --model llama --batch 8 --seq 512

The loss is transformers' own (labels = input ids: shifted cross-entropy on
fp32-upcast logits), the optimizer AdamW, as a typical fine-tuning loop.
"""
import argparse

import torch
import transformers

CONFIGS = {
    "llama": lambda v: transformers.LlamaConfig(
        vocab_size=v, hidden_size=512, intermediate_size=1408, num_hidden_layers=6,
        num_attention_heads=8, num_key_value_heads=4, max_position_embeddings=4096),
    "qwen2": lambda v: transformers.Qwen2Config(
        vocab_size=v, hidden_size=512, intermediate_size=1408, num_hidden_layers=6,
        num_attention_heads=8, num_key_value_heads=2, max_position_embeddings=4096),
    "gpt2": lambda v: transformers.GPT2Config(
        vocab_size=v, n_embd=512, n_layer=6, n_head=8, n_positions=4096),
}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", choices=sorted(CONFIGS), default="llama")
    ap.add_argument("--vocab", type=int, default=32000)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--seq", type=int, default=512)
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--bf16", action="store_true", help="bf16 autocast")
    ap.add_argument("--device-map", choices=("none", "auto"), default="none",
                    help="auto: the layers spread over the visible GPUs by accelerate, as "
                         "from_pretrained(device_map='auto') does")
    a = ap.parse_args()
    torch.manual_seed(0)
    model = transformers.AutoModelForCausalLM.from_config(CONFIGS[a.model](a.vocab))
    if a.device_map == "auto":
        from accelerate import dispatch_model, infer_auto_device_map
        from accelerate.utils import get_balanced_memory
        split = model._no_split_modules
        dm = infer_auto_device_map(model, no_split_module_classes=split,
                                   max_memory=get_balanced_memory(model, no_split_module_classes=split))
        model = dispatch_model(model, device_map=dm)
        print("device map:", sorted(set(dm.values()), key=str), flush=True)
    else:
        model = model.cuda()
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    first = model.get_input_embeddings().weight.device  # where the inputs go
    ids = torch.randint(a.vocab, (a.batch, a.seq), device=first)
    for _ in range(a.steps):
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=a.bf16):
            loss = model(input_ids=ids, labels=ids).loss
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
    print(f"{a.model}: {sum(p.numel() for p in model.parameters())} parameters, "
          f"loss {loss.item():.3f}, peak {torch.cuda.max_memory_allocated() / 2**20:.1f} MiB")


if __name__ == "__main__":
    main()
