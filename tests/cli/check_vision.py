#!/usr/bin/env python3
"""Checks memdiag's diagnosis of vision training whose memory varies with
the data (tests/data/vision, captured on an H200 by
`SCRIPT=examples/vision.py sh tests/gpu/patterns.sh` from examples/vision.py):
Mask R-CNN on random image sizes and boxes, and multi-scale training. No
leak (memory held between steps moves with the data); the cache of freed
blocks fragments (bucketing the sizes in the advice).
    python3 tests/cli/check_vision.py MEMDIAG DIR"""
import sys

from runcheck import Runs

runs = Runs(sys.argv[1], sys.argv[2])
runs.leaks({"detection": None, "multiscale": None})
for case in ("detection", "multiscale"):
    frag = runs.finding(case, "fragmentation")
    runs.check(f"{case}: varying sizes fragment the cache, bucketing advised",
               "bucket varying shapes" in frag["advice"])
sys.exit(runs.done())
