#!/usr/bin/env python3
"""The everyday LLM fine-tune: the Hugging Face Trainer with peft's LoRA and
gradient checkpointing, for checking memdiag's answers on it (built from a
config, no download). Run a case under `memdiag run`:

    memdiag run -- python3 examples/hfpeft.py --case trainerlora

  trainerlora  a 12-layer Llama (hidden 1024, vocab 32 000), LoRA rank 16 on
               every attention and MLP projection, the base frozen; bf16,
               gradient checkpointing, an evaluation every 3 steps
  trainerfull  the same model fully fine-tuned the same way (the contrast:
               AdamW's state over every weight)
"""
from __future__ import annotations

import argparse
import sys

CASES = ("trainerlora", "trainerfull")


def parse() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--case", required=True, choices=CASES)
    p.add_argument("--steps", type=int, default=6)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--seq", type=int, default=1024)
    p.add_argument("--out", default="/tmp/hfpeft")
    return p.parse_args()


ARGS = parse()

import torch  # noqa: E402
import transformers  # noqa: E402


def main() -> int:
    a = ARGS
    if not torch.cuda.is_available():
        print("hfpeft.py: CUDA is not available", file=sys.stderr)
        return 2
    torch.manual_seed(0)
    cfg = transformers.LlamaConfig(vocab_size=32000, hidden_size=1024, intermediate_size=2816,
                                   num_hidden_layers=12, num_attention_heads=16,
                                   num_key_value_heads=8, max_position_embeddings=4096)
    model = transformers.AutoModelForCausalLM.from_config(cfg)
    if a.case == "trainerlora":
        import peft
        lora = peft.LoraConfig(r=16, lora_alpha=32, lora_dropout=0.0, task_type="CAUSAL_LM",
                               target_modules=["q_proj", "k_proj", "v_proj", "o_proj",
                                               "gate_proj", "up_proj", "down_proj"])
        model = peft.get_peft_model(model, lora)
    ids = torch.randint(32000, (a.batch * a.steps, a.seq))
    data = [{"input_ids": x, "labels": x} for x in ids]
    args = transformers.TrainingArguments(
        output_dir=a.out, max_steps=a.steps, per_device_train_batch_size=a.batch,
        per_device_eval_batch_size=a.batch, bf16=True, gradient_checkpointing=True,
        eval_strategy="steps", eval_steps=3, report_to=[], save_strategy="no",
        logging_strategy="no", dataloader_pin_memory=False)
    transformers.Trainer(model=model, args=args, train_dataset=data,
                         eval_dataset=data[:2 * a.batch]).train()
    print(f"hfpeft.py {a.case}: peak {torch.cuda.max_memory_allocated() / 2**20:.1f} MiB",
          flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
