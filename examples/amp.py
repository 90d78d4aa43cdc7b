#!/usr/bin/env python3
"""fp16 training through three libraries' GradScalers, for checking that
memdiag counts every step the same way from the snapshot and the capture
(none leaks). Run a case under `memdiag run`:

    memdiag run -- python3 examples/amp.py --case accelfp16

  accelfp16    accelerate's Accelerator(mixed_precision="fp16") around a plain loop,
               its scaler started at a scale that overflows: the first steps are skipped
  plfp16       PyTorch Lightning, precision "16-mixed" (its closure runs outside the
               optimizer step), the same scaler: the first steps are skipped
  trainerfp16  the Hugging Face Trainer, fp16=True (its own scaler), 2 micro-batches
"""
from __future__ import annotations

import argparse
import sys

CASES = ("accelfp16", "plfp16", "trainerfp16")


def parse() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--case", required=True, choices=CASES)
    p.add_argument("--steps", type=int, default=9)
    return p.parse_args()


ARGS = parse()

import torch  # noqa: E402
from torch import nn  # noqa: E402

SCALE = 2.0**28  # overflows: the first few steps are skipped, the scale backs off


def mlp() -> nn.Module:
    return nn.Sequential(*[nn.Sequential(nn.Linear(1024, 4096), nn.GELU(), nn.Linear(4096, 1024))
                           for _ in range(4)], nn.Linear(1024, 10))


def accel(a: argparse.Namespace) -> None:
    from accelerate import Accelerator
    from accelerate.utils import GradScalerKwargs
    acc = Accelerator(mixed_precision="fp16",
                      kwargs_handlers=[GradScalerKwargs(init_scale=SCALE, backoff_factor=0.25)])
    model = mlp()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    model, opt = acc.prepare(model, opt)
    gen = torch.Generator(device=acc.device).manual_seed(0)
    for _ in range(a.steps):
        x = torch.randn(256, 1024, generator=gen, device=acc.device)
        y = torch.randint(10, (256,), generator=gen, device=acc.device)
        acc.backward(nn.functional.cross_entropy(model(x), y))
        opt.step()
        opt.zero_grad(set_to_none=True)


def lightning(a: argparse.Namespace) -> None:
    import pytorch_lightning as pl
    from pytorch_lightning.plugins.precision import MixedPrecision

    class Net(pl.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            self.net = mlp()

        def training_step(self, batch, i):
            x, y = batch
            return nn.functional.cross_entropy(self.net(x), y)

        def configure_optimizers(self):
            return torch.optim.AdamW(self.parameters(), lr=1e-4)

    n = 256 * a.steps
    ds = torch.utils.data.TensorDataset(torch.randn(n, 1024), torch.randint(10, (n,)))
    scaler = torch.amp.GradScaler("cuda", init_scale=SCALE, backoff_factor=0.25)
    trainer = pl.Trainer(max_steps=a.steps, accelerator="gpu", devices=1, logger=False,
                         enable_checkpointing=False, enable_progress_bar=False,
                         enable_model_summary=False,
                         plugins=[MixedPrecision("16-mixed", "cuda", scaler)])
    trainer.fit(Net(), torch.utils.data.DataLoader(ds, batch_size=256))


def hf_trainer(a: argparse.Namespace) -> None:
    import transformers
    cfg = transformers.LlamaConfig(vocab_size=32000, hidden_size=512, intermediate_size=1408,
                                   num_hidden_layers=4, num_attention_heads=8,
                                   num_key_value_heads=4, max_position_embeddings=4096)
    model = transformers.AutoModelForCausalLM.from_config(cfg)
    ids = torch.randint(32000, (8 * 2 * a.steps, 256))
    args = transformers.TrainingArguments(
        output_dir="/tmp/amp-trainer", max_steps=a.steps, per_device_train_batch_size=8,
        gradient_accumulation_steps=2, fp16=True, report_to=[], save_strategy="no",
        logging_strategy="no", dataloader_pin_memory=False)
    transformers.Trainer(model=model, args=args,
                         train_dataset=[{"input_ids": x, "labels": x} for x in ids]).train()


def main() -> int:
    if not torch.cuda.is_available():
        print("amp.py: CUDA is not available", file=sys.stderr)
        return 2
    torch.cuda.set_device(0)
    torch.manual_seed(0)
    {"accelfp16": accel, "plfp16": lightning, "trainerfp16": hf_trainer}[ARGS.case](ARGS)
    torch.cuda.synchronize()
    print(f"amp.py {ARGS.case}: done", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
