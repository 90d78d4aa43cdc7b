#!/usr/bin/env python3
"""Snapshots whose expandable-segment events would cost a replay that looks
a segment or block up by a scan O(events x segments) or O(events x blocks):
the hang guard of tests/cli/test_cli.sh. Real traces have few expandable
segments (one a stream), so only crafted files reach these shapes.

  make_hostile_segments.py MODE N OUT
    maps     N segment_map events at distinct, non-adjacent addresses: N
             expandable segments, each map looks for the segment it extends
    unmaps   one segment of N/2 allocated and N/2 free blocks in turn, then
             an unmap inside each free block (not at its start or end)
    tail     one segment grown by N maps at its end, each followed by an
             alloc that splits the new free tail: the last block changes
             between maps
    joins    N segments 2 MiB apart, each a live block, then the gaps mapped
             from the top down: each map joins a segment to the ever larger
             one above it (no free blocks meet: the blocks stay 2N - 1)
"""
import pickle
import sys

MIB = 1 << 20
BASE = 0x7F0000000000


def ev(action, addr, size):
    return {"action": action, "addr": addr, "size": size, "stream": 0, "frames": []}


def maps(n):
    # 4 MiB apart, 2 MiB each: no map extends an earlier segment
    return [ev("segment_map", BASE + 4 * MIB * i, 2 * MIB) for i in range(n)]


def unmaps(n):
    pairs = n // 2
    tr = [ev("segment_map", BASE, pairs * 8 * MIB)]
    for i in range(2 * pairs):  # 4 MiB blocks from the segment's start
        tr.append(ev("alloc", BASE + 4 * MIB * i, 4 * MIB))
    for i in range(pairs):  # every second one freed: no two free blocks meet
        a = BASE + 8 * MIB * i + 4 * MIB
        tr += [ev("free_requested", a, 4 * MIB), ev("free_completed", a, 4 * MIB)]
    for i in range(pairs):  # 2 MiB of the middle of each free 4 MiB
        tr.append(ev("segment_unmap", BASE + 8 * MIB * i + 5 * MIB, 2 * MIB))
    return tr


def tail(n):
    tr, end, free = [], BASE, BASE  # the segment's end, its free tail's start
    for _ in range(n):
        tr.append(ev("segment_map", end, MIB))
        end += MIB
        tr.append(ev("alloc", free, end - free - 512))  # leaves 512 B free
        free = end - 512
    return tr


def joins(n):
    tr = []
    for i in range(n):  # each segment's pages taken by one live block
        tr += [ev("segment_map", BASE + 4 * MIB * i, 2 * MIB), ev("alloc", BASE + 4 * MIB * i, 2 * MIB)]
    for i in reversed(range(n - 1)):
        tr.append(ev("segment_map", BASE + 4 * MIB * i + 2 * MIB, 2 * MIB))
    return tr


def main():
    mode, n, out = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    tr = {"maps": maps, "unmaps": unmaps, "tail": tail, "joins": joins}[mode](n)
    settings = {"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True",
                "max_split_size": -1, "garbage_collection_threshold": 0.0,
                "expandable_segments": True, "pinned_num_register_threads": 1,
                "release_lock_on_malloc": False, "pinned_use_host_register": False,
                "roundup_power2_divisions": [1] * 16}
    snap = {"segments": [], "device_traces": [tr], "allocator_settings": settings}
    with open(out, "wb") as f:
        pickle.dump(snap, f, protocol=4)


if __name__ == "__main__":
    main()
