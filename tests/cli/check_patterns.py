#!/usr/bin/env python3
"""Checks memdiag's diagnosis of the real pattern runs (tests/data/patterns,
captured on an H200 by tests/gpu/patterns.sh from examples/patterns.py):
the four leaking loops are leaks, with what they keep named; the nine
others are not, from the snapshot and from the capture alike. The vision
models' activations advice leaves attention out for the CNN only; an
inference job with no training step still finds its weights. Under
torchrun: a leak on rank 1 alone is that rank's, and named across ranks;
a hook keeping outputs under FSDP2 leaks on both ranks.
    python3 tests/cli/check_patterns.py MEMDIAG DIR"""
import json
import subprocess
import sys

M, D = sys.argv[1], sys.argv[2]
# case -> (MiB kept per step, what the snapshot's leak says is kept); None: no leak
WANT = {
    "hookleak": (16.0, "a few tensors made in each forward pass are kept (outputs, not whole graphs)"),
    "detachleak": (8.0, "a few tensors made in each forward pass are kept (outputs, not whole graphs)"),
    "cacheleak": (4.0, "tensors created each step are kept"),
    "accum": None, "evalloop": None, "keepgrads": None, "ema": None, "warmup": None,
    "lossitem": None,
    "auroc": (8.0, "a torchmetrics metric keeps what each update() gave it"),
    "resnet": None, "vit": None, "generate": None,
    "rankleak": (8.0, "a few tensors made in each forward pass are kept (outputs, not whole graphs)"),
    "fsdpleak": (16.0, "a few tensors made in each forward pass are kept (outputs, not whole graphs)"),
}
# the ranks that leak (rank 0 alone where not named)
RANKS = {"rankleak": {1}, "fsdpleak": {0, 1}}
bad = 0
for case, want in WANT.items():
    out = subprocess.run([M, "diagnose", "--json", f"{D}/{case}"], capture_output=True,
                         text=True, check=True).stdout
    ranks = json.loads(out)["ranks"]
    n = 2 if case in RANKS else 1
    assert sorted(r["source"].rsplit("/", 1)[1] for r in ranks) == sorted(
        [f"rank{k}.pickle.xz" for k in range(n)] + [f"rank{k}.mdcap" for k in range(n)]), ranks
    for r in ranks:
        leaks = [f for f in r["findings"] if f["kind"] == "leak"]
        if want is None or r["rank"] not in RANKS.get(case, {0}):
            ok = not leaks
        else:
            per, what = want
            ok = len(leaks) == 1 and abs(leaks[0]["bytes"] / 2**20 - per) < 0.05
            if r["kind"] == "snapshot":
                ok = ok and leaks[0]["summary"].endswith(what)
        if not ok:
            bad += 1
            print(f"{case} ({r['kind']}): {[f['summary'] for f in leaks]}", file=sys.stderr)

def findings(case):
    out = subprocess.run([M, "diagnose", "--json", f"{D}/{case}"], capture_output=True,
                         text=True, check=True).stdout
    return json.loads(out)["ranks"][0]["findings"]


def check(what, ok):
    global bad
    if not ok:
        bad += 1
        print(f"failed: {what}", file=sys.stderr)


leak = [f for f in findings("auroc") if f["kind"] == "leak"][0]
check("auroc names the line that updates the metric",
      any(e.endswith("examples/patterns.py:154 main") and e.startswith("the metric is updated from")
          for e in leak["evidence"]) and "compute_on_cpu=True" in leak["advice"])
for case, attention in (("resnet", False), ("vit", True)):
    act = [f for f in findings(case) if f["kind"] == "activations"]
    check(f"{case}: activations found", len(act) == 1 and act[0]["severity"] == "warning")
    if act:
        check(f"{case}: attention advice {attention}", ("SDPA" in act[0]["advice"]) == attention)
cross = json.loads(subprocess.run([M, "diagnose", "--json", f"{D}/rankleak"], capture_output=True,
                                  text=True, check=True).stdout)["findings"]
check("rankleak: rank 1's leak named across ranks",
      [(f["kind"], f["rank"], f["summary"]) for f in cross] ==
      [("rank_imbalance", 1, "rank 1 grows by 56.0 MiB over the steps, rank 0 by 0.0: "
                             "a leak on rank 1's side only")])
cross = json.loads(subprocess.run([M, "diagnose", "--json", f"{D}/rankleak/rank0.mdcap",
                                   f"{D}/rankleak/rank1.mdcap"], capture_output=True, text=True,
                                  check=True).stdout)["findings"]
check("rankleak: the same from the captures alone", [(f["kind"], f["rank"]) for f in cross] ==
      [("rank_imbalance", 1)])
cross = json.loads(subprocess.run([M, "diagnose", "--json", f"{D}/fsdpleak"], capture_output=True,
                                  text=True, check=True).stdout)["findings"]
check("fsdpleak: both ranks leak alike, nothing across ranks", cross == [])
out = subprocess.run([M, "summary", f"{D}/generate"], capture_output=True, text=True,
                     check=True).stdout
check("generate: no steps, the weights counted as parameters",
      "steps       none found" in out and "parameters 48.0 MiB" in out)
for case, once in (("ema", True), ("hookleak", False), ("warmup", False)):
    out = subprocess.run([M, "summary", f"{D}/{case}"], capture_output=True, text=True,
                         check=True).stdout
    note = "all of it between steps 0 and 1 (70.1 MiB), none after: made once, not a leak"
    check(f"{case}: one-off growth {'named' if once else 'not claimed'} (snapshot and capture)",
          out.count(note) == (2 if once else 0) and (once or "made once" not in out))
sys.exit(1 if bad else 0)
