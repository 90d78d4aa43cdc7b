"""Framework callbacks recording a window of batches, for users who prefer
a callback to `memdiag run`. Skip N batches, record M, write per-rank
snapshots named from templates, never overwrite unless asked, and beside
each snapshot its HTML report (`memdiag report`; html=False for none).
Neither framework is needed to import memdiag: each class is built on
first use.

    from memdiag.callbacks import lightning_callback, hf_callback
    trainer = pl.Trainer(callbacks=[lightning_callback(skip_batches=10)])
    trainer = transformers.Trainer(..., callbacks=[hf_callback(skip_batches=10)])
"""
from __future__ import annotations

import os
import subprocess
import sys

from . import _lib, runtime


class _Window:
    def __init__(self, skip_batches=1, interval=3, max_entries=100_000,
                 folder="memdiag", filename="rank{rank}.step{step}", overwrite=False,
                 stacks="python", html=True):
        if skip_batches < 0 or interval <= 0:
            raise ValueError("skip_batches >= 0 and interval > 0")
        runtime.expand(filename, rank=0, step=0)  # reject bad templates early
        self.skip, self.interval = skip_batches, interval
        self.max_entries, self.stacks = max_entries, stacks
        self.folder, self.filename, self.overwrite = folder, filename, overwrite
        self.html = html
        self.batch = 0
        self.active = False
        self.rec = None

    def _recorder(self):
        import torch
        rank, _, _ = runtime.rank_info()
        folder = self.folder.replace("{rank}", str(rank))
        os.makedirs(folder, exist_ok=True)
        if not self.overwrite and any(n.startswith(self.filename.split("{")[0])
                                      for n in os.listdir(folder)):
            raise FileExistsError(f"memdiag: {folder} already holds snapshots; "
                                  "pass overwrite=True to replace them")
        env = dict(os.environ, MEMDIAG_OUT=folder, MEMDIAG_NAME=self.filename,
                   MEMDIAG_STACKS=self.stacks, MEMDIAG_MAX_ENTRIES=str(self.max_entries),
                   MEMDIAG_FORCE="1" if self.overwrite else "", MEMDIAG_QUIET="1")
        return runtime.Recorder(runtime.Options(env), torch=torch,
                                counters=runtime.counters_of(torch))

    def batch_start(self):
        if self.batch == self.skip and not self.active:
            self.rec = self.rec or self._recorder()
            self.rec.steps = self.batch
            self.rec.start_history()
            self.active = True

    def batch_end(self):
        self.batch += 1
        if self.active and self.batch == self.skip + self.interval:
            self.rec.steps = self.batch
            path = self.rec.dump("window")
            self.rec.stop_history()
            self.rec.close()
            self.active = False
            if path and self.html:
                self.report(path)

    def report(self, path):
        """The snapshot's HTML report beside it (what seed 002's trace plot
        was); a missing memdiag binary or a failure costs one line, never
        the training."""
        exe = _lib.memdiag_binary()
        out = os.path.splitext(path)[0] + ".html"
        if not exe:
            print("memdiag: no memdiag binary (MEMDIAG_BIN, PATH) for the HTML report of "
                  f"{path}", file=sys.stderr)
            return
        args = [exe, "report", path, "-o", out] + (["--force"] if self.overwrite else [])
        try:
            r = subprocess.run(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                               text=True, timeout=600)
            if r.returncode:
                print(r.stderr.strip().splitlines()[-1], file=sys.stderr)
        except (OSError, subprocess.SubprocessError) as e:
            print(f"memdiag: the HTML report of {path} failed: {e}", file=sys.stderr)


def lightning_callback(**kw):
    import pytorch_lightning as pl  # noqa: F401  (import-guarded by design)

    class MemdiagCallback(pl.Callback):
        def __init__(self):
            self.w = _Window(**kw)

        def on_train_batch_start(self, trainer, module, batch, idx):
            self.w.batch_start()

        def on_train_batch_end(self, trainer, module, outputs, batch, idx):
            self.w.batch_end()
    return MemdiagCallback()


def hf_callback(**kw):
    from transformers import TrainerCallback

    class MemdiagCallback(TrainerCallback):
        def __init__(self):
            self.w = _Window(**kw)

        def on_step_begin(self, args, state, control, **k):
            self.w.batch_start()

        def on_step_end(self, args, state, control, **k):
            self.w.batch_end()
    return MemdiagCallback()
