#!/usr/bin/env python3
"""memdiag's framework callbacks against the real frameworks on a GPU:
a Hugging Face Trainer and a PyTorch Lightning Trainer, each recording a
window of batches (skip 2, record 2), each writing the window's snapshot
and its HTML report (memdiag report) beside it.

    MEMDIAG_BIN=build-dev/memdiag MEMDIAG_LIB=build-dev/libmemdiag_capture.so \
        python3 tests/gpu/callbacks.py OUTDIR
"""
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
from memdiag.callbacks import hf_callback, lightning_callback  # noqa: E402

out = sys.argv[1]


def hf():
    import transformers
    cfg = transformers.LlamaConfig(vocab_size=1000, hidden_size=128, intermediate_size=256,
                                   num_hidden_layers=2, num_attention_heads=4,
                                   num_key_value_heads=2)
    model = transformers.AutoModelForCausalLM.from_config(cfg)
    ids = torch.randint(1000, (64, 32))
    data = [{"input_ids": x, "labels": x} for x in ids]
    args = transformers.TrainingArguments(output_dir=f"{out}/hf-trainer", max_steps=6,
                                          per_device_train_batch_size=8, report_to=[],
                                          save_strategy="no", logging_strategy="no")
    t = transformers.Trainer(model=model, args=args, train_dataset=data,
                             callbacks=[hf_callback(skip_batches=2, interval=2,
                                                    folder=f"{out}/hf")])
    t.train()


def lightning():
    import pytorch_lightning as pl

    class M(pl.LightningModule):
        def __init__(self):
            super().__init__()
            self.net = torch.nn.Sequential(torch.nn.Linear(256, 1024), torch.nn.ReLU(),
                                           torch.nn.Linear(1024, 10))

        def training_step(self, batch, i):
            x, y = batch
            return torch.nn.functional.cross_entropy(self.net(x), y)

        def configure_optimizers(self):
            return torch.optim.AdamW(self.parameters())

    ds = torch.utils.data.TensorDataset(torch.randn(512, 256), torch.randint(10, (512,)))
    dl = torch.utils.data.DataLoader(ds, batch_size=64)
    trainer = pl.Trainer(max_steps=6, accelerator="gpu", devices=1, logger=False,
                         enable_checkpointing=False, enable_progress_bar=False,
                         callbacks=[lightning_callback(skip_batches=2, interval=2,
                                                       folder=f"{out}/pl")])
    trainer.fit(M(), dl)


for name, fn in (("hf", hf), ("pl", lightning)):
    try:
        fn()
        files = sorted(os.listdir(f"{out}/{name}"))
        ok = any(f.endswith(".pickle") and f[:-7] + ".html" in files for f in files)
        print(f"{name}: {'PASS' if ok else 'FAIL'} {files}")
    except Exception as e:
        print(f"{name}: FAIL {type(e).__name__}: {e}")
