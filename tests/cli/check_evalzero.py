#!/usr/bin/env python3
"""Checks memdiag on a loop that clears gradients first and validates after
each optimizer step (tests/data/evalzero, captured on an H200 by
`SCRIPT=examples/evalzero.py sh tests/gpu/patterns.sh` from
examples/evalzero.py): the validation runs between a step and the zero_grad
that closes it. Its fp32 predictions appended to a list are a leak of
forward outputs, 250 MiB a step; their argmax kept instead is a small leak
(16 KiB a step, info), from snapshot and capture alike.
    python3 tests/cli/check_evalzero.py MEMDIAG DIR"""
import sys

from runcheck import Runs

runs = Runs(sys.argv[1], sys.argv[2])
check, finding = runs.check, runs.finding
runs.leaks({"evalkeep": 250.0, "evaldrop": 16 / 1024}, tol=0.01)
keep = finding("evalkeep", "leak")
check("evalkeep: the validation's kept predictions named as forward outputs, at their line",
      keep["severity"] == "critical" and
      "a few tensors made in each forward pass are kept" in keep["summary"] and
      keep["sites"][0]["site"] == "/work/main/examples/evalzero.py:64 main")
drop = finding("evaldrop", "leak")
check("evaldrop: the kept argmax a small leak (info), its line named",
      drop["severity"] == "info" and "16.0 KiB every step" in drop["summary"] and
      drop["sites"][0]["site"] == "/work/main/examples/evalzero.py:65 main")
sys.exit(runs.done())
