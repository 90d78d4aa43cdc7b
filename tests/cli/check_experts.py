#!/usr/bin/env python3
"""Checks memdiag on mixtures of experts from transformers 5.17 trained on an
H200 (tests/data/experts, captured by `SCRIPT=examples/experts.py sh
tests/gpu/patterns.sh` from examples/experts.py). A Qwen3-MoE model whose
router logits are appended to a list every step leaks 1.5 MiB a step (six
layers' logits), named at the router's line in modeling_qwen3_moe.py; the
same model counting each step's choices into one tensor, with eager experts
(tensors sized by each expert's tokens, varying step to step), and Mixtral
with its load-balancing loss under autocast leak nothing. Every case's AdamW
state is 2.00 x its parameters, and nothing else is said of them.
    python3 tests/cli/check_experts.py MEMDIAG DIR"""
import sys

from runcheck import Runs

runs = Runs(sys.argv[1], sys.argv[2])
check, finding = runs.check, runs.finding
runs.leaks({"routerkeep": 1.5, "routercount": None, "expertseager": None, "mixtralaux": None})
leak = finding("routerkeep", "leak")
check("routerkeep: the kept router logits named at the router's line, forward outputs advised",
      any("modeling_qwen3_moe.py:260 forward" in s["site"] and s["count"] == 48
          for s in leak["sites"]) and
      "forward outputs from the same line each step are kept" in leak["summary"] and
      leak["advice"].startswith("Outputs of the forward pass stay referenced every step"))
for case in ("routerkeep", "routercount", "expertseager", "mixtralaux"):
    state = finding(case, "optimizer_state")
    kinds = sorted(f["kind"] for f in runs.rank(case, "snapshot")["findings"])
    check(f"{case}: AdamW's state 2.00 x the parameters, no other warning",
          "2.00 x the parameter bytes" in state["summary"] and
          kinds == sorted((["leak"] if case == "routerkeep" else []) +
                          ["optimizer_state", "library_workspace"]))
sys.exit(runs.done())
