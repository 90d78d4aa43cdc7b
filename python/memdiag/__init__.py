"""memdiag: where a training job's GPU memory goes.

Most users need no import: `memdiag run -- python train.py` records
everything. This module is for those who want explicit control:

    import memdiag
    rec = memdiag.start("runs/exp1")      # after torch is imported
    with memdiag.window(skip=10, steps=3):  # or record a window of steps
        ...
    memdiag.dump("here")                  # a snapshot now

and for frameworks: memdiag.callbacks.LightningCallback,
memdiag.callbacks.HFCallback (each imported only when used).
"""
from __future__ import annotations

import contextlib
import os

__all__ = ["start", "dump", "window", "phase", "stop"]

_rec = None


def start(out: str = ".", *, stacks: str = "python", max_entries: int = 1_000_000,
          name: str = "rank{rank}", force: bool = False):
    """Starts recording in this process (torch must be importable)."""
    global _rec
    import torch
    from . import runtime
    os.makedirs(out, exist_ok=True)
    env = dict(os.environ, MEMDIAG_OUT=out, MEMDIAG_STACKS=stacks,
               MEMDIAG_MAX_ENTRIES=str(max_entries), MEMDIAG_NAME=name,
               MEMDIAG_FORCE="1" if force else "", MEMDIAG_QUIET="1")
    rec = runtime.Recorder(runtime.Options(env), torch=torch,
                           counters=runtime.counters_of(torch))
    runtime.install_torch_hooks(rec, torch)
    rec.start_history()
    import atexit
    atexit.register(rec.close)
    _rec = rec
    return rec


def phase(name: str) -> None:
    """Records a phase sample now (e.g. 'after_forward' in a custom loop)."""
    if _rec is not None:
        _rec.sample(name)


def dump(reason: str = "manual"):
    """Writes a snapshot now; returns its path (None when not recording)."""
    return _rec.dump(reason) if _rec is not None else None


def stop() -> None:
    """Dumps the snapshot and closes the capture file."""
    global _rec
    if _rec is not None:
        _rec.close()
        _rec = None


@contextlib.contextmanager
def window(out: str = ".", **kw):
    """Records allocator history inside the block, then dumps it."""
    rec = _rec or start(out, **kw)
    rec.start_history()
    try:
        yield rec
    finally:
        rec.dump("window")
        rec.stop_history()
