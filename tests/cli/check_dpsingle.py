#!/usr/bin/env python3
"""Checks memdiag on nn.DataParallel over 2 GPUs of one process
(tests/data/dpsingle, captured on 2 H200s by `SCRIPT=examples/dpsingle.py sh
tests/gpu/patterns.sh` from examples/dpsingle.py): cuda:0 peaks far above
cuda:1, and the cause is named as DataParallel's (the module, its state and
the gathered logits on cuda:0) with DistributedDataParallel as the advice;
it was a model split's advice, to move layers. With the loss computed inside
the module only the losses are gathered: no gathered outputs, no advice to
return the loss alone. Neither is a leak.
    python3 tests/cli/check_dpsingle.py MEMDIAG DIR"""
import sys

from runcheck import Runs

runs = Runs(sys.argv[1], sys.argv[2])
check = runs.check
DP = "nn.DataParallel (its frames in the stacks): cuda:0 holds the module (at its peak: parameters 636.4 MiB, optimizer state 1268.8 MiB); cuda:1, a replica made for each forward"
for case in ("dp", "dploss"):
    d = runs.diagnosis(case)
    check(f"{case}: no leak on either device",
          not any(x["kind"] == "leak" for r in d["ranks"] for x in r["findings"]))
    f = [x for x in d["findings"] if x["kind"] == "rank_imbalance"]
    f = f[0] if f else {"summary": "", "evidence": [], "advice": ""}
    gathered = [e for e in f["evidence"] if e.startswith("the replicas' outputs gathered onto cuda:0")]
    check(f"{case}: DataParallel named, DDP advised, no layers to move",
          DP in f["evidence"] and f["advice"].startswith("nn.DataParallel keeps the module") and
          "move layers" not in f["advice"])
    if case == "dp":
        check("dp: cuda:0 4747.0 MiB above; the gathered logits (1000.0 MiB) named, the loss "
              "alone advised",
              f["summary"].startswith("cuda:0 peaks 4747.0 MiB (164%) above cuda:1") and
              gathered == ["the replicas' outputs gathered onto cuda:0: 1000.0 MiB live at its "
                           "peak (at /work/main/examples/dpsingle.py:77 main)"] and
              "return the loss alone" in f["advice"])
    else:
        check("dploss: cuda:0 1268.9 MiB above (the optimizer state); nothing gathered to speak of",
              f["summary"].startswith("cuda:0 peaks 1268.9 MiB (33%) above cuda:1") and
              not gathered and "return the loss alone" not in f["advice"])
sys.exit(runs.done())
