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
import sys

from runcheck import Runs

runs = Runs(sys.argv[1], sys.argv[2])
check, rank, finding = runs.check, runs.rank, runs.finding
# case -> MiB kept per step (or call) by its leak (None: no leak); a request
# loop has no training steps for a capture to sample
runs.leaks({"viewleak": 128.0, "smallleak": 32 / 1024, "gradhookleak": 12.0, "serveleak": 6.0,
            "gp": None, "gpudata": None, "graphs": None, "compiled": None, "epochs": None,
            "moe": None, "bucketseq": None, "emptycache": None, "serve": None},
           snapshot_only={"serveleak"})

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
sys.exit(runs.done())
