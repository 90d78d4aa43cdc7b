#!/usr/bin/env python3
"""Checks memdiag on a dataset kept on the GPU as many small tensors
(tests/data/tiny, captured on an H200 by `SCRIPT=examples/tiny.py sh
tests/gpu/patterns.sh` from examples/tiny.py): 200 000 tensors of 8 and 128
bytes each take a 512-byte block, 84.7 MiB of the 256.2 MiB peak rounded
away, named as fragmentation inside the blocks with their two sites and
"stack the samples into one tensor" as the advice (there was no finding).
The same data packed into two tensors (the control) has no such finding.
    python3 tests/cli/check_tiny.py MEMDIAG DIR"""
import sys

from runcheck import Runs

runs = Runs(sys.argv[1], sys.argv[2])
check, finding = runs.check, runs.finding
runs.leaks({"tinylabels": None, "packed": None})
f = finding("tinylabels", "fragmentation")
check("tinylabels: the blocks' rounding named, with the per-sample sites and packing advised",
      f["summary"] == ("84.7 MiB (33%) of the peak is the allocator's rounding: 200008 small "
                       "tensors hold 13.0 MiB of data in 97.7 MiB of blocks") and
      [(s["site"], s["count"]) for s in f["sites"]][:2] ==
      [("/work/main/examples/tiny.py:51 main", 100000),
       ("/work/main/examples/tiny.py:52 main", 100000)] and
      f["advice"].startswith("Keep such data in a few large tensors"))
check("packed: no fragmentation finding", not runs.findings("packed", "fragmentation"))
sys.exit(runs.done())
