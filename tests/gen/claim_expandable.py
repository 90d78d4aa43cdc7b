#!/usr/bin/env python3
"""A real fragmented capture (captured/ragged: random sequence lengths, 43%
of the reserved peak never allocated at once) whose allocator_settings claim
expandable_segments is on: the fragmentation advice must then not tell the
user to turn it on. Inputs are trusted fixtures of this repository.

    python3 tests/gen/claim_expandable.py
"""
import lzma
import pickle

SRC, DST = "tests/data/captured/ragged.pickle.xz", "tests/data/derived/ragged-claims-expandable.pickle.xz"
snap = pickle.loads(lzma.open(SRC).read())  # our own fixture, not untrusted input
settings = snap.setdefault("allocator_settings", {})
settings["expandable_segments"] = True
settings["PYTORCH_CUDA_ALLOC_CONF"] = "expandable_segments:True"
with lzma.open(DST, "wb", preset=9) as f:
    pickle.dump(snap, f, protocol=4)
