#!/usr/bin/env python3
"""Synthetic allocator snapshots of a given size, for benchmarks.

Same schema and sharing pattern as torch.cuda.memory._snapshot() pickled by
_dump_snapshot (protocol 4): one dict per trace entry with the 2.11 key set;
frame dicts shared between tracebacks, identical tracebacks shared as one
list, key strings shared. The trace simulates training steps (forward
allocations that live until backward, backward temporaries and gradients,
optimizer state created once), so the replay does real work.

    python3 bench/gen_snapshot.py ENTRIES OUT.pickle [--seed N]
"""
import argparse
import pickle
import random

MIB = 1 << 20
BASE_T = 1795972022102326


def make_frames(rng, n_frames):
    py = [{"name": f"fn_{i}", "filename": f"/home/user/proj/model_{i % 40}.py", "line": 10 + i}
          for i in range(n_frames // 2)]
    torch = [{"name": n, "filename": "/venv/lib/python3.12/site-packages/torch/nn/modules/module.py",
              "line": ln} for n, ln in (("_call_impl", 1790), ("_wrapped_call_impl", 1779))]
    cpp = [{"name": f"at::native::op_{i}(at::Tensor const&)", "filename": "??", "line": 0}
           for i in range(n_frames // 2)]
    return py, torch, cpp


def make_stacks(rng, n_stacks, frames):
    py, torch, cpp = frames
    stacks = []
    for _ in range(n_stacks):
        depth_cpp = rng.randint(4, 18)
        depth_py = rng.randint(3, 12)
        st = rng.sample(cpp, depth_cpp)
        for _ in range(depth_py):
            st.append(rng.choice(py))
            st.extend(torch)
        stacks.append(st)
    return stacks


class Heap:
    """Hands out addresses in 20 MiB segments so frees and reuse look real."""

    def __init__(self):
        self.next_seg = 0x7F0000000000
        self.free = {}
        self.trace = []

    def seg(self, size, t, frames):
        addr = self.next_seg
        self.next_seg += max(size, 20 * MIB) + 2 * MIB
        self.trace.append(entry("segment_alloc", addr, max(size, 20 * MIB), t, frames))
        return addr


def entry(action, addr, size, t, frames):
    return {"action": action, "addr": addr, "size": size, "stream": 0, "time_us": t,
            "compile_context": "N/A", "user_metadata": "", "frames": frames}


def generate(n_entries, seed):
    rng = random.Random(seed)
    frames = make_frames(rng, 600)
    stacks = make_stacks(rng, 3000, frames)
    sizes = [512, 2048, 4096, 65536, 786432, 2359296, 3145728, 12582912]
    trace = []
    t = BASE_T
    seg_addr = 0x7F0000000000
    live = []
    step = 0
    while len(trace) < n_entries:
        # forward: allocations that stay live until backward; small requests
        # (<= 1 MiB) in a 2 MiB small-pool segment, large ones in a 60 MiB
        # segment, packed the way the caching allocator splits blocks
        big = seg_addr + (step % 64) * 64 * MIB
        small = seg_addr + 0x100000000 + (step % 64) * 4 * MIB
        trace.append(entry("segment_alloc", big, 60 * MIB, t, rng.choice(stacks)))
        trace.append(entry("segment_alloc", small, 2 * MIB, t, rng.choice(stacks)))
        off = {big: 0, small: 0}
        for _ in range(rng.randint(20, 60)):
            size = rng.choice(sizes)
            seg, cap, keep = (small, 2 * MIB, 512) if size <= MIB else (big, 60 * MIB, MIB + 1)
            blk = (size + 511) // 512 * 512
            if off[seg] + blk > cap:
                continue
            if cap - off[seg] - blk < keep:   # the block would take the rest
                blk = cap - off[seg]
            t += rng.randint(1, 50)
            trace.append(entry("alloc", seg + off[seg], size, t, rng.choice(stacks)))
            live.append((seg + off[seg], size))
            off[seg] += blk
        # backward: free in reverse
        for addr, size in reversed(live):
            t += rng.randint(1, 30)
            st = rng.choice(stacks)
            trace.append(entry("free_requested", addr, size, t, st))
            trace.append(entry("free_completed", addr, size, t, st))
        live.clear()
        t += 5
        trace.append(entry("segment_free", big, 60 * MIB, t, rng.choice(stacks)))
        trace.append(entry("segment_free", small, 2 * MIB, t, rng.choice(stacks)))
        step += 1
    trace = trace[:n_entries]
    annotations = []
    return {"segments": [], "device_traces": [trace], "allocator_settings": {
        "PYTORCH_CUDA_ALLOC_CONF": "", "max_split_size": -1, "garbage_collection_threshold": 0.0,
        "expandable_segments": False, "pinned_num_register_threads": 1,
        "release_lock_on_cudamalloc": False, "pinned_use_cuda_host_register": False,
        "graph_capture_record_stream_reuse": False,
        "roundup_power2_divisions": {str(1 << i): 0 for i in range(16)}},
        "external_annotations": annotations}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("entries", type=int)
    ap.add_argument("out")
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    snap = generate(a.entries, a.seed)
    with open(a.out, "wb") as f:
        pickle.dump(snap, f, protocol=4)


if __name__ == "__main__":
    main()
