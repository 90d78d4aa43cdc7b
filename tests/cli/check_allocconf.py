#!/usr/bin/env python3
"""Checks memdiag's replay under the caching allocator's settings and pools
(tests/data/allocconf, captured on an H200 by `SCRIPT=examples/allocconf.py
sh tests/gpu/patterns.sh` from examples/allocconf.py, sequences of random
lengths): with max_split_size_mb:64, roundup_power2_divisions:4,
garbage_collection_threshold:0.6 under a 3 GiB cap (it ran out of memory),
and a 1 GiB buffer in a MemPool, every step's allocated memory after each
phase and its reserved memory equal torch's counters sampled in the run
(the capture file) to 0.01 MiB. max_split_size_mb's own part in the
fragmentation it caused is said (the advice suggested setting it); none
leaks.
    python3 tests/cli/check_allocconf.py MEMDIAG DIR"""
import struct
import sys

from runcheck import Runs

runs = Runs(sys.argv[1], sys.argv[2])
check = runs.check
PHASES = {3: "after_forward_mib", 4: "after_backward_mib", 5: "after_optimizer_step_mib",
          6: "after_clear_gradients_mib"}


def samples(path):
    """(step, phase) -> (allocated, reserved) MiB from a capture's SAMPLE records."""
    data, pos, out = open(path, "rb").read(), 16, {}
    while pos + 9 <= len(data):
        n, kind = struct.unpack_from("<IB", data, pos)
        if kind == 2:
            _, step, phase, alloc, res = struct.unpack_from("<qiBQQ", data, pos + 5)
            out[(step, phase)] = (alloc / 2**20, res / 2**20)
        pos += 9 + n
    return out


for case in ("maxsplit", "roundup", "gcthresh", "mempool"):
    d = runs.diagnosis(case)
    check(f"{case}: no leak", not [f for r in d["ranks"] for f in r["findings"]
                                   if f["kind"] == "leak"])
    snap = [r for r in d["ranks"] if r["kind"] == "snapshot" and
            r["source"].endswith("/rank0.pickle.xz")][0]
    torch_says = samples(runs.path(case, "rank0.mdcap"))
    worst, count = 0.0, 0
    for st in snap["steps"]:
        for phase, key in PHASES.items():
            got = torch_says.get((st["step"], phase))
            if got:
                worst, count = max(worst, abs(got[0] - st[key])), count + 1
        got = torch_says.get((st["step"], 6))
        if got:
            worst, count = max(worst, abs(got[1] - st["reserved_mib"])), count + 1
    check(f"{case}: the replay equals torch's counters at every phase ({count} figures, worst "
          f"{worst:.4f} MiB)", count >= 5 and worst <= 0.01)
frag = runs.finding("maxsplit", "fragmentation")
check("maxsplit: max_split_size_mb named in the fragmentation it caused, not advised again",
      any(e.startswith("max_split_size_mb is set (64 MiB)") for e in frag["evidence"]) and
      frag["advice"].startswith("max_split_size_mb keeps large blocks whole"))
check("gcthresh: out of memory at the cap", runs.finding("gcthresh", "oom")["severity"] == "critical")
text = runs.run("summary", runs.path("mempool", "rank0.pickle.xz"))
check("mempool: the pool said", "in 1 private pool (CUDA graphs, MemPool)" in text)
sys.exit(runs.done())
