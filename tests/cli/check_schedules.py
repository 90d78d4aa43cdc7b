#!/usr/bin/env python3
"""Checks memdiag's diagnosis of loops whose memory changes by design
(tests/data/schedules, captured on an H200 by
`SCRIPT=examples/schedules.py sh tests/gpu/patterns.sh` from
examples/schedules.py): none is a leak. An out-of-memory error the job
caught and retried with a smaller batch is a warning that says the job
went on, the failed attempts are no steps (9, from the snapshot and the
capture), the run's peak is named as in such an attempt and its memory as
activations; an evaluation at 4 x the batch makes the peak and is named;
layers unfrozen at step 3 add memory once; L-BFGS's history is explained.
    python3 tests/cli/check_schedules.py MEMDIAG DIR"""
import sys

from runcheck import Runs

runs = Runs(sys.argv[1], sys.argv[2])
check, run, rank, D = runs.check, runs.run, runs.rank, runs.root
runs.leaks({case: None for case in ("oomretry", "evalpeak", "unfreeze", "replaycap", "lbfgs")})

snap, cap = rank("oomretry", "snapshot"), rank("oomretry", "capture")
ooms = [f for f in snap["findings"] if f["kind"] == "oom"]
check("oomretry: two out-of-memory errors, each a warning that the job went on",
      len(ooms) == 2 and all(f["severity"] == "warning" and
                             f["summary"].startswith("out of memory (caught: the job went on)") and
                             f["evidence"][0].startswith("9 steps ran after it, from step 0")
                             for f in ooms))
check("oomretry: the failed attempts are no steps; their memory at the peak is activations",
      len(snap["steps"]) == 9 and snap["peak"]["by_category_mib"]["activations"] > 2700 and
      snap["peak"]["by_category_mib"]["inputs"] < 2)
ooms = [f for f in cap["findings"] if f["kind"] == "oom"]
check("oomretry (capture): status 0, the last OOM a warning, 9 steps after it",
      cap["status"] == 0 and len(ooms) == 1 and ooms[0]["severity"] == "warning" and
      ooms[0]["evidence"][1].startswith("9 steps ran after the last one"))
check("oomretry: the peak is named as in an attempt that ran out of memory",
      "(before step 0, in an attempt that ran out of memory)" in
      run("summary", f"{D}/oomretry/rank0.pickle.xz"))

text = run("summary", f"{D}/evalpeak/rank0.pickle.xz")
top = rank("evalpeak", "snapshot")["peak"]["sites"][0]
check("evalpeak: the peak is the evaluation's, at its line",
      "(step 3, forward: in a pass all freed before the backward: an evaluation or other no_grad work)" in text
      and top["site"].endswith("examples/schedules.py:92 eval_peak"))
check("unfreeze: the memory the unfrozen layers add comes once",
      "all of it between steps 2 and 3 (427.2 MiB), none after: made once, not a leak" in
      run("summary", f"{D}/unfreeze/rank0.pickle.xz"))
opt = [f for f in rank("lbfgs", "snapshot")["findings"] if f["kind"] == "optimizer_state"]
check("lbfgs: the state is L-BFGS's history, the advice its history_size",
      len(opt) == 1 and opt[0]["summary"].startswith("LBFGS keeps 240.1 MiB of state") and
      any("2 x history_size past updates" in e for e in opt[0]["evidence"]) and
      "smaller history_size" in opt[0]["advice"])
sys.exit(runs.done())
