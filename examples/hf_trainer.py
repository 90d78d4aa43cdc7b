#!/usr/bin/env python3
"""A Hugging Face Trainer run (accelerate underneath), built from a config
(no download), for `memdiag run`: gradient accumulation, bf16, AdamW.

    memdiag run -- python3 examples/hf_trainer.py --accumulate 2 --steps 6
"""
import argparse

import torch
import transformers


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=6, help="optimizer steps")
    ap.add_argument("--accumulate", type=int, default=2, help="micro-batches per step")
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--seq", type=int, default=256)
    ap.add_argument("--out", default="/tmp/hf-trainer")
    a = ap.parse_args()
    torch.manual_seed(0)
    cfg = transformers.LlamaConfig(vocab_size=32000, hidden_size=512, intermediate_size=1408,
                                   num_hidden_layers=4, num_attention_heads=8,
                                   num_key_value_heads=4, max_position_embeddings=4096)
    model = transformers.AutoModelForCausalLM.from_config(cfg)
    ids = torch.randint(32000, (a.batch * a.accumulate * a.steps, a.seq))
    data = [{"input_ids": x, "labels": x} for x in ids]
    args = transformers.TrainingArguments(
        output_dir=a.out, max_steps=a.steps, per_device_train_batch_size=a.batch,
        gradient_accumulation_steps=a.accumulate, bf16=True, report_to=[],
        save_strategy="no", logging_strategy="no", dataloader_pin_memory=False)
    transformers.Trainer(model=model, args=args, train_dataset=data).train()
    print(f"trainer: {a.steps} steps of {a.accumulate} micro-batches, "
          f"peak {torch.cuda.max_memory_allocated() / 2**20:.1f} MiB")


if __name__ == "__main__":
    main()
