#!/usr/bin/env python3
"""Checks memdiag's diagnosis of loops of other shapes (tests/data/loops,
captured on an H200 by `SCRIPT=examples/loops.py sh tests/gpu/patterns.sh`
from examples/loops.py, GPT-2 from transformers and a GAN), none of which
memdiag was written against. From the snapshot and from the capture alike:
a state-dict copy kept every step, validation outputs kept with their
graphs, logits kept in a zero_grad-first loop or under accelerate's
accumulation, an evaluation every other step keeping its logits (growth in
steps, not every step) and an inference loop keeping generate()'s scores
(no training steps: its calls compared) are leaks; a running loss summed as a tensor (a kept graph whose
saved tensors backward freed) is not, nor is memory held between steps that
grows with a growing sequence length. A GAN's two optimizers step in turn:
its leak is judged iteration to iteration, from the snapshot (the optimizer
steps' call sites) and from the capture (its STEP records number them). LoRA's optimizer state (by hand and peft's) is
judged against the trained parameters; a GNN on graphs of varying size
fragments the cache; a graph kept past backward
(retain_graph) is named at the peak; plain SGD keeps no state.
    python3 tests/cli/check_loops.py MEMDIAG DIR"""
import json
import subprocess
import sys
import tempfile

M, D = sys.argv[1], sys.argv[2]
# case -> MiB kept per step by its leak (None: no leak)
LEAKS = {"gpt2": None, "gan": None, "lora": None, "growseq": None, "retain": None,
         "sgd": None, "adafactor": None, "totalloss": None, "ckptleak": 264.3,
         "evalleak": 611.8, "ganleak": 4.0, "wganleak": 4.0, "zgleak": 128.0, "gpt2ckpt": None,
         "accelleak": 511.9, "peftlora": None, "gnn": None, "evalevery": 27.4,
         "distill": None, "gen": None, "genleak": 70.4}
BETWEEN_GAN = 0.0
# a capture samples at training steps' phases: an inference loop has none
SNAPSHOT_ONLY = {"genleak"}
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


def snapshot_findings(case, kind):
    ranks = [r for r in diagnose(case) if r["kind"] == "snapshot"]
    return [f for f in ranks[0]["findings"] if f["kind"] == kind]


for case, per in LEAKS.items():
    ranks = diagnose(case)
    check(f"{case}: a snapshot and a capture", sorted(r["kind"] for r in ranks) ==
          ["capture", "snapshot"])
    for r in ranks:
        leaks = [f for f in r["findings"] if f["kind"] == "leak"]
        if case in SNAPSHOT_ONLY and r["kind"] == "capture":
            continue
        ok = not leaks if per is None else (
            len(leaks) == 1 and abs(leaks[0]["bytes"] / 2**20 - per) < 0.05)
        check(f"{case} ({r['kind']}): leak {per}, found {[f['summary'] for f in leaks]}", ok)

leak = snapshot_findings("ckptleak", "leak")[0]
check("ckptleak: kept tensors made outside the forward, at the line that copies them",
      leak["summary"].endswith("tensors created each step are kept") and
      leak["sites"][0]["site"].endswith("examples/loops.py:174 lm_loop"))
leak = snapshot_findings("evalleak", "leak")[0]
check("evalleak: a validation forward without no_grad keeps whole graphs",
      leak["summary"].endswith("each step's autograd graph (forward activations) is kept alive"))
for case, cycle, per in (("ganleak", "loops.py:128 gan, then", 2), ("wganleak", "loops.py:128 gan 5 times, then", 6)):
    leak = snapshot_findings(case, "leak")[0]
    check(f"{case}: judged iteration to iteration ({per} optimizer steps), the kept batch's line",
          leak["summary"].startswith("memory grows by 4.0 MiB every iteration") and
          leak["evidence"][0].startswith("2 optimizers step in turn (") and
          cycle in leak["evidence"][0] and f"each iteration is {per} optimizer steps" in leak["evidence"][0]
          and [s["site"][-25:] for s in leak["sites"]] == ["examples/loops.py:124 gan"])
    leak = [f for r in diagnose(case) if r["kind"] == "capture" for f in r["findings"]
            if f["kind"] == "leak"]
    check(f"{case}: the capture's STEP records say which optimizer stepped: the same leak",
          len(leak) == 1 and leak[0]["evidence"][0].startswith(
              f"2 optimizers step in turn (the capture numbers them by their first step): "
              f"each iteration is {per} optimizer steps"))
ranks = diagnose("gan")
snap = [r for r in ranks if r["kind"] == "snapshot"][0]
check("gan: the two optimizers' call sites, and the indicators per iteration",
      [x[-25:] for x in snap["optimizers_in_turn"]] == ["examples/loops.py:128 gan",
                                                       "examples/loops.py:132 gan"] and
      abs(snap["indicators"]["between_step_growth_mib"] - BETWEEN_GAN) < 0.05)
with tempfile.TemporaryDirectory() as tmp:
    subprocess.run([M, "report", f"{D}/wganleak", "-o", f"{tmp}/r.html"], capture_output=True,
                   check=True)
    page = open(f"{tmp}/r.html", encoding="utf-8").read()
    check("wganleak: the report names the cycle", "2 optimizers step in turn (" in page and
          "gan 5 times, then " in page and "8 iterations of 6 steps" in page)
    subprocess.run([M, "report", f"{D}/genleak", "-o", f"{tmp}/g.html"], capture_output=True,
                   check=True)
    page = open(f"{tmp}/g.html", encoding="utf-8").read()
    check("genleak: the report names the calls", "7 calls and the last of " in page and
          "examples/infer.py:44 main" in page)
ranks = diagnose("gpt2")
check("gpt2: one optimizer, no optimizers_in_turn",
      all("optimizers_in_turn" not in r for r in ranks))
leak = snapshot_findings("zgleak", "leak")[0]
check("zgleak: zero_grad first, the last step (still holding its gradients) left out; the "
      "kept logits the only site",
      "grows in every one of 6 steps" in leak["evidence"][0] and
      [s["site"][-40:] for s in leak["sites"]] == ["models/gpt2/modeling_gpt2.py:697 forward"])
check("gpt2ckpt: with gradient checkpointing the activations are no finding; the logits are",
      not snapshot_findings("gpt2ckpt", "activations") and
      snapshot_findings("gpt2ckpt", "logits")[0]["severity"] == "warning")
act = snapshot_findings("growseq", "activations")
check("growseq: the growth is the inputs', said with the activations",
      len(act) == 1 and any(e.endswith("the inputs grow, and what a step holds until the next "
                                        "grows with them (not a leak: nothing accumulates)")
                            for e in act[0]["evidence"]))
act = snapshot_findings("retain", "activations")
check("retain: the step before's graph named at the peak",
      len(act) == 1 and act[0]["summary"].startswith("activations of two steps are live at the "
                                                     "peak: this step's 2097.6 MiB and 2098.4 MiB")
      and "retain_graph" in act[0]["advice"])
act = snapshot_findings("gpt2", "activations")
check("gpt2: one step's activations at the peak",
      len(act) == 1 and act[0]["summary"].startswith("activations saved for backward are 63%"))
opt = snapshot_findings("lora", "optimizer_state")
check("lora: AdamW's state is 2 x the trained parameters (the adapters), not of all",
      len(opt) == 1 and "2.00 x the trained parameter bytes" in opt[0]["summary"] and
      any("231.2 MiB, of which 18.0 MiB get gradients" in e for e in opt[0]["evidence"]))
leak = snapshot_findings("accelleak", "leak")[0]
check("accelleak: the user's forward line, not accelerate's fp32 wrapper inside it; the "
      "later micro-batches' kept outputs are forward outputs, not gradients",
      [s["site"][-33:] for s in leak["sites"]] == ["examples/loops.py:240 accelerated"] and
      leak["summary"].endswith("a few tensors made in each forward pass are kept (outputs, not "
                               "whole graphs)") and "100% of it" in leak["evidence"][1])
leak = snapshot_findings("evalevery", "leak")[0]
check("evalevery: an evaluation every other step keeping its logits: growth in steps, a leak",
      leak["summary"].startswith("memory grows in 3 of 7 steps, 27.4 MiB a step on average") and
      "192.0 MiB in total" in leak["evidence"][0])
leak = snapshot_findings("genleak", "leak")[0]
check("genleak: no training steps, the calls of generate() compared; the kept scores named",
      leak["summary"].startswith("memory grows by 70.4 MiB every call") and
      leak["evidence"][0].startswith("no training steps: memory is compared between the calls "
                                     "of ") and "examples/infer.py:44 main" in leak["evidence"][0]
      and leak["sites"][0]["site"].endswith("generation/logits_process.py:233 __call__")
      and leak["summary"].endswith("each generate() output keeps every new token's scores "
                                   "(output_scores=True)") and "output_scores" in leak["advice"]
      and not snapshot_findings("genleak", "logits"))
snap = [r for r in diagnose("gen") if r["kind"] == "snapshot"][0]
check("gen: the same loop keeping nothing: 7 calls compared, no leak",
      snap["calls"] == {"site": snap["calls"]["site"], "compared": 7} and
      snap["calls"]["site"].endswith("examples/infer.py:44 main"))
# the optimizer state's summary: against the trained parameters where most are frozen
for case, what, says in (
        ("distill", "the frozen teacher is not what the student's state is measured by",
         "2.00 x the trained parameter bytes"),
        ("peftlora", "peft's adapters are the trained parameters",
         "2.00 x the trained parameter bytes"),
        ("gpt2", "AdamW's state against all parameters (nothing frozen)",
         "2.00 x the parameter bytes"),
        ("gan", "two Adams' state, 2 x both models' parameters",
         "Adam keeps 194.1 MiB of state, 2.00 x")):
    opt = snapshot_findings(case, "optimizer_state")
    check(f"{case}: {what}", len(opt) == 1 and says in opt[0]["summary"])
gnn_act = snapshot_findings("gnn", "activations")
check("gnn: graphs of varying size fragment the cache; no leak; the peak named as GCNConv's "
      "per-edge tensors (no saved-activations claim), a sparse adjacency advised",
      snapshot_findings("gnn", "fragmentation") and len(gnn_act) == 1 and
      gnn_act[0]["summary"].startswith("the peak falls inside a forward pass's message passing: "
                                       "torch_geometric's per-edge tensors are 87% of it") and
      "ToSparseTensor" in gnn_act[0]["advice"])
for case in ("sgd", "adafactor"):
    check(f"{case}: no optimizer state claimed", not snapshot_findings(case, "optimizer_state"))
sys.exit(1 if bad else 0)
