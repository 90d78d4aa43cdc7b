#!/usr/bin/env python3
"""Checks memdiag on knowledge distillation with the teacher left trainable
(tests/data/teacher, captured on an H200 by `SCRIPT=examples/teacher.py sh
tests/gpu/patterns.sh` from examples/teacher.py): the teacher's gradients,
made in the first backward and never freed (the student's optimizer zeroes
its own), are named with no_grad and requires_grad_(False) as the advice;
the optimizer's finding no longer says the other parameters get none. The
teacher under no_grad (the control) says none of it. Neither is a leak.
    python3 tests/cli/check_teacher.py MEMDIAG DIR"""
import sys

from runcheck import Runs

runs = Runs(sys.argv[1], sys.argv[2])
check, finding = runs.check, runs.finding
runs.leaks({"teachergrad": None, "teachernograd": None})
act = finding("teachergrad", "activations")
check("teachergrad: the teacher's kept gradients named, no_grad and requires_grad_(False) advised",
      act["severity"] == "warning" and
      any(e.startswith("634.4 MiB of gradients (98 tensors) made in step 0's backward are kept "
                       "all run") for e in act["evidence"]) and
      act["advice"].startswith("Run the model no optimizer trains") and
      "requires_grad_(False)" in act["advice"] and "634.4 MiB of gradients go" in act["advice"])
opt = finding("teachergrad", "optimizer_state")
check("teachergrad: AdamW 2.00 x of the student; the rest get gradients no optimizer steps",
      "2.00 x the trained parameter bytes" in opt["summary"] and
      any(e.startswith("parameters: 1028.6 MiB, of which 394.2 MiB train; of the rest, 634.4 MiB "
                       "get gradients") for e in opt["evidence"]))
control = finding("teachernograd", "activations")
opt = finding("teachernograd", "optimizer_state")
check("teachernograd: no kept gradients named; the teacher frozen by no_grad reads as frozen",
      not any("no optimizer" in e for e in control["evidence"]) and
      not control["advice"].startswith("Run the model no optimizer trains") and
      any("of which 394.2 MiB get gradients (the rest none" in e for e in opt["evidence"]))
sys.exit(runs.done())
