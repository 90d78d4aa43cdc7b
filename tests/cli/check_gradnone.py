#!/usr/bin/env python3
"""Checks memdiag on jobs that never call zero_grad (tests/data/gradnone,
captured on an H200 by `SCRIPT=examples/gradnone.py sh tests/gpu/patterns.sh`
from examples/gradnone.py): gradients cleared by hand (`p.grad = None`), or
never. Each step ends at its optimizer step in the capture as in the
snapshot, so the capture's indicators are the snapshot's (it had only the
peak). None leaks.
    python3 tests/cli/check_gradnone.py MEMDIAG DIR"""
import sys

from runcheck import Runs

runs = Runs(sys.argv[1], sys.argv[2])
check = runs.check
runs.leaks({"gradnone": None, "gradkeep": None})
for case in ("gradnone", "gradkeep"):
    snap, cap = runs.rank(case, "snapshot"), runs.rank(case, "capture")
    check(f"{case}: the capture's four indicators, the snapshot's",
          len(cap["indicators"]) == 4 and
          all(abs(cap["indicators"][k] - v) < 0.01 for k, v in snap["indicators"].items()))
sys.exit(runs.done())
