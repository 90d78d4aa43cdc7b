#!/usr/bin/env python3
"""A real capture as if its recording had started late: torch's
_record_memory_history called after the model and optimizer were made,
right before the training loop (the first step's `ids = torch.randint`).
Trace entries and optimizer annotations before that point are dropped; the
weights are then blocks made before the recorded history began, which only
their gradients and the optimizer's state can tell apart from the rest.
Inputs are trusted fixtures of this repository.

    python3 tests/gen/late_record.py
"""
import lzma
import pickle

SRC = "tests/data/ondevice/ctxdevice/rank0.pickle.xz"
DST = "tests/data/derived/ctxdevice-late.pickle.xz"

snap = pickle.loads(lzma.open(SRC).read())  # our own fixture, not untrusted input
trace = snap["device_traces"][0]
start = next(i for i, e in enumerate(trace)
             if e["action"] == "alloc" and any(f["filename"].endswith("examples/ondevice.py") and
                                               f["line"] == 61 for f in e["frames"]))
t0 = trace[start]["time_us"]
snap["device_traces"][0] = trace[start:]
snap["external_annotations"] = [a for a in snap["external_annotations"] if a["time_us"] >= t0]
with lzma.open(DST, "wb", preset=9) as f:
    pickle.dump(snap, f, protocol=4)
