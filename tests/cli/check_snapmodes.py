#!/usr/bin/env python3
"""Checks memdiag on snapshots written with each of torch's recording modes
(tests/data/snapmodes, written on an H200 by `sh tests/gpu/snapmodes.sh` from
examples/snapmodes.py: an encoder LM trained 6 steps with AdamW, every step's
logits kept, 500 MiB each). With no history (enabled="state", no recording,
torch.cuda.memory_snapshot()'s list) only what was live when the snapshot was
taken is said, as that: no peak, no steps, no indicators, no fragmentation
"never allocated at once" (the cache of one moment); the blocks' stacks name
sites where they were recorded, their sizes where not. With a history
(context="alloc", stacks="python", an out-of-memory observer's dump) the leak
is found, and the observer's dump names the outsized batch.
    python3 tests/cli/check_snapmodes.py MEMDIAG DIR"""
import json
import sys

from runcheck import Runs

runs = Runs(sys.argv[1], sys.argv[2])
check = runs.check


def text(cmd, case):
    return runs.run(cmd, runs.path(case + ".pickle.xz"))


def rank(case):
    return json.loads(runs.run("diagnose", "--json", runs.path(case + ".pickle.xz")))["ranks"][0]


for case in ("state", "norecord", "public"):
    r, out = rank(case), text("summary", case)
    check(f"{case}: no history said, what was live when taken, no peak claimed",
          r["history"] is False and r["indicators"] == {} and
          "  live        4117.0 MiB allocated, 6912.0 MiB reserved when the snapshot was taken "
          "(its peak is not in the file)" in out and
          "_record_memory_history(max_entries=100000) before the work" in out and
          "  steps       not known without a history" in out and
          "\n  peak " not in out and "live when taken by category" in out)
    check(f"{case}: no fragmentation from one moment's cache",
          not any(f["kind"] == "fragmentation" for f in r["findings"]))
state = text("summary", "state")
check("state: the blocks' own stacks name the sites and categories (the kept logits made in a "
      "forward, AdamW's state, the weights)",
      "trace       none: the blocks live when the snapshot was taken, each with its stack" in state
      and "3000.0 MiB     6 x  activations       /work/main/examples/snapmodes.py:68 step" in state
      and "701.7 MiB   148 x  optimizer_state   /work/main/examples/snapmodes.py:71 step" in state
      and "350.2 MiB    74 x  parameters        /work/main/examples/snapmodes.py:49 encoder_lm"
      in state and "(allocated before the recorded history began)" not in state)
for case in ("norecord", "public"):
    out = text("summary", case)
    check(f"{case}: no stacks: the blocks by size, the six kept logits first",
          "trace       none, and no stacks" in out and
          "largest live blocks by size (no stacks to name sites)\n"
          "       3000.0 MiB     6 x  500.0 MiB" in out and
          rank(case)["peak"]["sites"][0]["site"] == "(no stack recorded)")
check("public: a bare list of segments carries no allocator settings (not 'torch < 2.3')",
      "settings not recorded (a bare list of segments, as torch.cuda.memory_snapshot() returns)"
      in text("summary", "public"))
for case in ("allocctx", "pystacks", "oomdump"):
    r = rank(case)
    leaks = [f for f in r["findings"] if f["kind"] == "leak"]
    check(f"{case}: a history: the kept logits are a leak of 500 MiB a step",
          r["history"] is True and len(leaks) == 1 and abs(leaks[0]["bytes"] / 2**20 - 500) < 0.01
          and r["indicators"]["maximum_peak_allocated_mib"] > 6000)
oom = [f for f in rank("oomdump")["findings"] if f["kind"] == "oom"]
check("oomdump: the observer's dump ends at the error: the batch of 64 named as outsized",
      len(oom) == 1 and oom[0]["severity"] == "critical" and
      any("this batch needs far more than theirs" in e for e in oom[0]["evidence"]))
sys.exit(runs.done())
