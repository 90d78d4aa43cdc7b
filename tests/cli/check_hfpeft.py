#!/usr/bin/env python3
"""Checks memdiag on the everyday LLM fine-tune (tests/data/hfpeft, captured
on an H200 by `SCRIPT=examples/hfpeft.py sh tests/gpu/patterns.sh` from
examples/hfpeft.py): the HF Trainer with peft's LoRA (rank 16) and gradient
checkpointing reads AdamW's 2.00 x over the 13.7 MiB of adapters (of 803.8
MiB of parameters, the rest frozen), the fully fine-tuned model 2.00 x over
all 790.1 MiB; both with the logits the largest holder at the peak, no
leak, no activations finding (checkpointing keeps them small). Regression
guards: these were right when recorded.
    python3 tests/cli/check_hfpeft.py MEMDIAG DIR"""
import sys

from runcheck import Runs

runs = Runs(sys.argv[1], sys.argv[2])
check, finding = runs.check, runs.finding
runs.leaks({"trainerlora": None, "trainerfull": None})
opt = finding("trainerlora", "optimizer_state")
check("trainerlora: AdamW 2.00 x the adapters, the base frozen",
      opt["summary"].startswith("AdamW keeps 27.5 MiB of state, 2.00 x the trained parameter "
                                "bytes") and
      any(e.startswith("parameters: 803.8 MiB, of which 13.7 MiB get gradients (the rest none: "
                       "frozen weights") for e in opt["evidence"]))
opt = finding("trainerfull", "optimizer_state")
check("trainerfull: AdamW 2.00 x every weight",
      opt["summary"].startswith("AdamW keeps 1583.2 MiB of state, 2.00 x the parameter bytes") and
      "parameters: 790.1 MiB; state / parameters = 2.00" in opt["evidence"])
for case in ("trainerlora", "trainerfull"):
    check(f"{case}: logits named, no activations finding under checkpointing",
          finding(case, "logits")["summary"].startswith("the logits and the loss over them hold "
                                                        "3000.0 MiB") and
          not runs.findings(case, "activations"))
sys.exit(runs.done())
