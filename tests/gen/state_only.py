#!/usr/bin/env python3
"""Snapshots whose trace explains none of their final state, as
torch.cuda.memory_snapshot() of a job recording nothing, or a recording
started after every allocation, leaves them: the replay must lay every
live block out of the final segments (model/replay.c seed_state).

- tests/data/derived/gamma-medium-stateonly.pickle.xz: a real H200
  snapshot (the seed exercise's gamma, medium) with its trace emptied;
- tests/data/synthetic/state_only.pickle: 40 segments listed out of
  address order, small and large, each with live blocks between free ones
  (never two free blocks side by side, no free block of 1 MiB or less in a
  large segment, so the final state is exactly what a replay must give).

Inputs are trusted fixtures of this repository.

    python3 tests/gen/state_only.py
"""
import lzma
import pickle

MIB = 1 << 20


def real():
    src = "tests/data/seed-exercise/snap-gamma-medium-rank0.pickle"
    with open(src, "rb") as f:
        snap = pickle.load(f)  # our own fixture, not untrusted input
    snap["device_traces"] = [[] for _ in snap["device_traces"]]
    with lzma.open("tests/data/derived/gamma-medium-stateonly.pickle.xz", "wb", preset=9) as f:
        pickle.dump(snap, f, protocol=4)


def segment(addr, large, k):
    """Blocks alternating live and free; a live one first in odd segments."""
    unit = 4 * MIB if large else 8192
    sizes = [unit * (1 + (k + i) % 3) for i in range(2 + k % 5)]
    live_first = k % 2 == 1
    blocks, at = [], addr
    for i, size in enumerate(sizes):
        live = (i % 2 == 0) == live_first
        blocks.append({"address": at, "size": size, "requested_size": size - 100 if live else 0,
                       "state": "active_allocated" if live else "inactive",
                       "frames": [{"name": "f%d" % k, "filename": "/w/train.py", "line": 10 + i}]
                       if live else []})
        at += size
    total = at - addr
    used = sum(b["size"] for b in blocks if b["state"] != "inactive")
    return {"device": 0, "address": addr, "total_size": total, "allocated_size": used,
            "active_size": used, "requested_size": used, "stream": 0,
            "segment_type": "large" if large else "small", "segment_pool_id": (0, 0),
            "is_expandable": False, "frames": [], "blocks": blocks}


def synthetic():
    segs = []
    for k in range(40):
        large = k % 3 == 0
        addr = 0x7f0000000000 + ((k * 17) % 40) * 64 * MIB  # out of address order
        segs.append(segment(addr, large, k))
    snap = {"segments": segs, "device_traces": [[]],
            "allocator_settings": {"expandable_segments": False, "max_split_size": -1}}
    with open("tests/data/synthetic/state_only.pickle", "wb") as f:
        pickle.dump(snap, f, protocol=4)


real()
synthetic()
