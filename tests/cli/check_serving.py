#!/usr/bin/env python3
"""Checks memdiag's diagnosis of serving loops (tests/data/serving, captured
on an H200 by `SCRIPT=examples/serving.py sh tests/gpu/patterns.sh` from
examples/serving.py): no training steps, so calls are compared. Every chat
session's KV cache kept is a leak said as KV caches, with their advice;
sessions that drop their cache, a static cache made once and requests of
random shapes (the cache of freed blocks grows: fragmentation, with
bucketing in the advice) are not.
    python3 tests/cli/check_serving.py MEMDIAG DIR"""
import sys

from runcheck import Runs

runs = Runs(sys.argv[1], sys.argv[2])
check, finding = runs.check, runs.finding
# a capture samples at training steps' phases: these loops have none
runs.leaks({"sessionleak": 4.1, "sessions": None, "staticcache": None, "dynserve": None},
           snapshot_only={"sessionleak", "sessions", "staticcache", "dynserve"}, tol=0.05)
leak = finding("sessionleak", "leak")
check("sessionleak: the kept caches, named as KV caches, judged call to call",
      leak["summary"].endswith("attention KV caches (past_key_values) are kept") and
      leak["evidence"][0].startswith("no training steps: memory is compared between the calls of")
      and all("transformers/cache_utils.py" in s["site"] for s in leak["sites"]) and
      "OffloadedCache" in leak["advice"])
frag = finding("dynserve", "fragmentation")
check("dynserve: requests of random shapes fragment the cache; bucketing advised",
      frag["summary"].startswith("1509.9 MiB (42%) of the reserved peak was never allocated") and
      "bucket varying shapes" in frag["advice"])
sys.exit(runs.done())
