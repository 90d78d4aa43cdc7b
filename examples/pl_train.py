#!/usr/bin/env python3
"""A PyTorch Lightning run for `memdiag run`: automatic optimization, in
which Lightning calls optimizer.step(closure) and the closure runs the
forward and the backward inside the optimizer's step.

    memdiag run -- python3 examples/pl_train.py --steps 6
"""
import argparse

import pytorch_lightning as pl
import torch
from torch import nn


class Net(pl.LightningModule):
    def __init__(self, hidden: int = 1024, layers: int = 4):
        super().__init__()
        self.body = nn.Sequential(*[nn.Sequential(nn.Linear(hidden, 4 * hidden), nn.GELU(),
                                                  nn.Linear(4 * hidden, hidden))
                                    for _ in range(layers)])
        self.head = nn.Linear(hidden, 10)

    def training_step(self, batch, i):
        x, y = batch
        return nn.functional.cross_entropy(self.head(self.body(x)), y)

    def configure_optimizers(self):
        return torch.optim.AdamW(self.parameters(), lr=1e-4)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--batch", type=int, default=256)
    a = ap.parse_args()
    torch.manual_seed(0)
    ds = torch.utils.data.TensorDataset(torch.randn(a.batch * a.steps, 1024),
                                        torch.randint(10, (a.batch * a.steps,)))
    dl = torch.utils.data.DataLoader(ds, batch_size=a.batch)
    trainer = pl.Trainer(max_steps=a.steps, accelerator="gpu", devices=1, logger=False,
                         enable_checkpointing=False, enable_progress_bar=False,
                         enable_model_summary=False)
    trainer.fit(Net(), dl)
    print(f"lightning: {a.steps} steps, peak {torch.cuda.max_memory_allocated() / 2**20:.1f} MiB")


if __name__ == "__main__":
    main()
