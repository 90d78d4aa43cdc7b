#!/usr/bin/env python3
"""Checks memdiag's diagnosis of more loop shapes (tests/data/shapes,
captured on an H200 by `SCRIPT=examples/shapes.py sh tests/gpu/patterns.sh`
from examples/shapes.py), none of which memdiag was written against. A
view of the logits kept every step keeps the whole logits (a leak of their
size, said as forward outputs, the advice naming views); predictions kept
every step (32 KiB, under the totals' noise) are a small leak, found from
the call stack that keeps something from every step in the snapshot, and
from the even steps in the capture; gradients kept by a tensor hook are
made in backward and said so; a request loop caching its hidden states
leaks call to call. A gradient penalty's autograd.grad before zero_grad is
no skipped step; a dataset on the GPU is inputs, not a leak; CUDA graphs,
torch.compile, a mixture of experts, random sequence lengths, per-epoch
metrics and empty_cache() are no leaks.
    python3 tests/cli/check_shapes.py MEMDIAG DIR"""
import json
import subprocess
import sys

M, D = sys.argv[1], sys.argv[2]
# case -> MiB kept per step (or call) by its leak (None: no leak)
LEAKS = {"viewleak": 128.0, "smallleak": 32 / 1024, "gradhookleak": 12.0, "serveleak": 6.0,
         "gp": None, "gpudata": None, "graphs": None, "compiled": None, "epochs": None,
         "moe": None, "bucketseq": None, "emptycache": None, "serve": None}
# a capture samples at training steps' phases: a request loop has none
SNAPSHOT_ONLY = {"serveleak"}
bad = 0


def check(what, ok):
    global bad
    if not ok:
        bad += 1
        print(f"failed: {what}", file=sys.stderr)


def diagnose(case):
    out = subprocess.run([M, "diagnose", "--json", f"{D}/{case}"], capture_output=True,
                         text=True, check=True).stdout
    return json.loads(out)["ranks"]


def rank(case, kind):
    return [r for r in diagnose(case) if r["kind"] == kind][0]


def finding(case, kind, what="snapshot"):
    """The first finding of that kind, or an empty one (its checks then fail)."""
    found = [f for f in rank(case, what)["findings"] if f["kind"] == kind]
    return found[0] if found else {"summary": "", "severity": "", "evidence": ["", ""],
                                   "sites": [{"site": "", "count": 0}], "advice": ""}


for case, per in LEAKS.items():
    ranks = diagnose(case)
    check(f"{case}: a snapshot and a capture", sorted(r["kind"] for r in ranks) ==
          ["capture", "snapshot"])
    for r in ranks:
        if case in SNAPSHOT_ONLY and r["kind"] == "capture":
            continue
        leaks = [f for f in r["findings"] if f["kind"] == "leak"]
        ok = not leaks if per is None else (
            len(leaks) == 1 and abs(leaks[0]["bytes"] / 2**20 - per) < 0.001)
        check(f"{case} ({r['kind']}): leak {per}, found {[f['summary'] for f in leaks]}", ok)

leak = finding("viewleak", "leak")
check("viewleak: the kept view's whole logits, at the head's line, as forward outputs; the "
      "advice names views",
      leak["summary"].endswith("a few tensors made in each forward pass are kept (outputs, not "
                               "whole graphs)") and
      [s["site"].split("/")[-1] for s in leak["sites"]] == ["shapes.py:97 forward"] and
      "a slice or view such as logits[:, -1] keeps the whole tensor" in leak["advice"])

for what in ("snapshot", "capture"):
    leak = finding("smallleak", "leak", what)
    check(f"smallleak ({what}): 32 KiB a step, info, with how long 1 GiB takes",
          leak["severity"] == "info" and leak["summary"].startswith(
              "memory grows by 32.0 KiB every step and is never freed") and
          leak["summary"].endswith("(small now; 1 GiB after 32768 steps)"))
leak = finding("smallleak", "leak")
check("smallleak: the argmax line, kept from each of steps 1 to 6",
      [s["site"].split("/")[-1] for s in leak["sites"]] == ["shapes.py:135 train"] and
      leak["sites"][0]["count"] == 6 and leak["evidence"][0].startswith(
          "each of steps 1 to 6 left an allocation from the same call stack"))

leak = finding("gradhookleak", "leak")
check("gradhookleak: gradients of an intermediate tensor, made in backward",
      "tensors made in each backward pass are kept" in leak["summary"] and
      "100% of it was allocated in a backward pass" in leak["evidence"][1] and
      "register_hook" in leak["advice"])

leak = finding("serveleak", "leak")
check("serveleak: judged call to call, the cached hidden states' line",
      leak["summary"].startswith("memory grows by 6.0 MiB every call") and
      [s["site"].split("/")[-1] for s in leak["sites"]] == ["shapes.py:93 hidden"])

snap, cap = rank("gp", "snapshot"), rank("gp", "capture")
check("gp: autograd.grad then zero_grad before backward is no skipped step: 8 steps, "
      "no growth, the first step's change as the capture's",
      len(snap["steps"]) == 8 and snap["indicators"]["between_step_growth_mib"] == 0.0 and
      abs(snap["indicators"]["first_step_persistent_change_mib"] -
          cap["indicators"]["first_step_persistent_change_mib"]) < 0.01)

top = rank("gpudata", "snapshot")["peak"]["sites"][0]
check("gpudata: the dataset on the GPU is the largest site at the peak, as inputs",
      top["category"] == "inputs" and top["bytes"] == 640 << 20 and
      top["site"].endswith("examples/shapes.py:105 tokens"))
check("graphs: the captured step's memory is one private pool",
      rank("graphs", "snapshot")["private_pools"]["count"] == 1)
sys.exit(1 if bad else 0)
