#!/usr/bin/env python3
"""Checks memdiag's diagnosis of library features (tests/data/libraries,
captured on an H200 by `SCRIPT=examples/libraries.py sh tests/gpu/patterns.sh`
from examples/libraries.py). A custom autograd.Function keeping its inputs
is a leak at the line that made them; activations saved on the CPU leave no
activations finding; a side-stream prefetcher's next batch, ResNet-50
under cuDNN's autotuner and the Hugging Face Trainer's evaluation are no
leaks; the Trainer's evaluation, gathering every batch's logits on the GPU,
makes the peak, and the logits finding names it with eval_accumulation_steps.
    python3 tests/cli/check_libraries.py MEMDIAG DIR"""
import sys

from runcheck import Runs

runs = Runs(sys.argv[1], sys.argv[2])
check, rank, finding, findings = runs.check, runs.rank, runs.finding, runs.findings
runs.leaks({"customfn": 12.0, "offload": None, "prefetch": None, "cudnnbench": None,
            "hfeval": None})

leak = finding("customfn", "leak")
check("customfn: the kept inputs, as forward outputs, at the line that made them",
      leak["summary"].endswith("a few tensors made in each forward pass are kept (outputs, not "
                               "whole graphs)") and
      [s["site"].split("/")[-1] for s in leak["sites"]] == ["libraries.py:75 lm"])
peak = rank("offload", "snapshot")["peak"]["by_category_mib"]
check("offload: activations saved on the CPU: no activations finding, 385 MiB on the GPU",
      not findings("offload", "activations") and abs(peak["activations"] - 385.0) < 0.5)
logits = findings("hfeval", "logits")
check("hfeval: the evaluation's gathered logits make the peak, with the Trainer's settings",
      len(logits) == 1 and logits[0]["summary"].startswith(
          "the Trainer's evaluation gathers every batch's logits on the GPU: 1792.1 MiB, 76%") and
      "eval_accumulation_steps" in logits[0]["advice"])
check("hfeval: the peak is in a pass freed before the backward",
      "(step 3, forward: in a pass all freed before the backward: an evaluation or other no_grad work)" in
      runs.run("summary", runs.path("hfeval", "rank0.pickle.xz")))
check("prefetch: the batch copied ahead on the side stream is no leak; between-step growth "
      "only from the last step, which has no next batch",
      abs(rank("prefetch", "snapshot")["indicators"]["between_step_growth_mib"] + 36.75) < 0.01)
sys.exit(runs.done())
