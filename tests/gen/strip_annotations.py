#!/usr/bin/env python3
"""Real captures without their external_annotations, as torch < 2.5 (or a
recorder that never saw the optimizer's record_function) writes them: the
step finding must then fall back to stack frames. Inputs are trusted
fixtures of this repository.

    python3 tests/gen/strip_annotations.py
"""
import lzma
import pickle

PAIRS = [("tests/data/captured/gamma-small-py.pickle.xz", "tests/data/derived/gamma-small-py-noann.pickle.xz"),
         ("tests/data/captured/beta-small-py.pickle.xz", "tests/data/derived/beta-small-py-noann.pickle.xz"),
         ("tests/data/seed-exercise/snap-beta-small-rank0.pickle", "tests/data/derived/snap-beta-small-noann.pickle.xz"),
         ("tests/data/runs/lightning/rank0.pickle.xz", "tests/data/derived/lightning-noann.pickle.xz")]

for src, dst in PAIRS:
    raw = lzma.open(src).read() if src.endswith(".xz") else open(src, "rb").read()
    snap = pickle.loads(raw)  # our own fixture, not untrusted input
    snap.pop("external_annotations", None)
    with lzma.open(dst, "wb", preset=9) as f:
        pickle.dump(snap, f, protocol=4)
