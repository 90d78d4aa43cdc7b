#!/usr/bin/env python3
"""Validates `memdiag diagnose --json` output (stdin) against schema 1 as
documented in docs/json-schema.md. Exits non-zero with the first problem."""
import json
import sys

KINDS = {"leak", "optimizer_state", "library_workspace", "activations", "logits",
         "fragmentation", "rank_imbalance", "non_framework", "oom"}
INDICATORS = {"first_step_persistent_change_mib", "between_step_growth_mib",
              "largest_forward_increase_mib", "maximum_peak_allocated_mib"}


def need(cond, what):
    if not cond:
        sys.exit("schema: " + what)


def finding(f, where):
    need(isinstance(f, dict), f"{where} is an object")
    need(f.get("kind") in KINDS, f"{where}.kind in the vocabulary ({f.get('kind')})")
    need(f.get("severity") in ("info", "warning", "critical"), f"{where}.severity")
    need(isinstance(f.get("bytes"), int) and f["bytes"] >= 0, f"{where}.bytes")
    need(isinstance(f.get("summary"), str) and f["summary"], f"{where}.summary")
    need(isinstance(f.get("evidence"), list) and all(isinstance(e, str) for e in f["evidence"]),
         f"{where}.evidence")
    need(isinstance(f.get("advice"), str) and f["advice"], f"{where}.advice")
    for i, s in enumerate(f.get("sites", None) or []):
        need({"site", "bytes", "count"} <= set(s), f"{where}.sites[{i}] fields")
    need(isinstance(f.get("sites"), list), f"{where}.sites")
    if "device" in f:  # only where the finding is about another GPU than the rank's own
        need(isinstance(f["device"], int) and f["device"] >= 0 and isinstance(f.get("rank"), int),
             f"{where}.device")


def driver(dv, w):
    """A process's driver-level trace (capture and driver ranks)."""
    need(isinstance(dv, dict) and isinstance(dv.get("status"), str), f"{w}.status")
    need(isinstance(dv.get("calls"), int), f"{w}.calls")
    for k in ("peak_mib", "outside_torch_peak_mib", "at_end_mib"):
        need(isinstance(dv.get(k), (int, float)) and dv[k] >= 0, f"{w}.{k}")
    need(dv["outside_torch_peak_mib"] <= dv["peak_mib"] + 1e-3, f"{w}: outside <= peak")
    need(isinstance(dv.get("libraries"), list), f"{w}.libraries")
    for j, l in enumerate(dv["libraries"]):
        need(isinstance(l.get("library"), str) and isinstance(l.get("what"), str),
             f"{w}.libraries[{j}] names")
        need(all(isinstance(l.get(k), (int, float)) for k in ("at_peak_mib", "max_mib", "at_end_mib")),
             f"{w}.libraries[{j}] bytes")
        need(l["at_peak_mib"] <= l["max_mib"] + 1e-3 and l["at_end_mib"] <= l["max_mib"] + 1e-3,
             f"{w}.libraries[{j}]: at peak and at end <= its largest")
        need(isinstance(l.get("calls"), int) and l.get("physical") in (0, 1), f"{w}.libraries[{j}]")


def main():
    d = json.load(sys.stdin)
    need(d.get("schema") == 1, "schema == 1")
    need(isinstance(d.get("ranks"), list) and d["ranks"], "ranks is a non-empty list")
    for i, r in enumerate(d["ranks"]):
        w = f"ranks[{i}]"
        for k in ("rank", "device", "events"):
            need(isinstance(r.get(k), int), f"{w}.{k}")
        need(isinstance(r.get("source"), str), f"{w}.source")
        need(r.get("kind") in ("snapshot", "capture", "samples", "driver"), f"{w}.kind")
        if "driver" in r or r.get("kind") == "driver":
            driver(r.get("driver"), f"{w}.driver")
        ind = r.get("indicators")
        # a snapshot without a history (only what was live when taken) has no peak
        need(r.get("history", True) in (True, False), f"{w}.history")
        need(isinstance(ind, dict) and set(ind) <= INDICATORS and
             ("maximum_peak_allocated_mib" in ind or r.get("history") is False), f"{w}.indicators")
        need(all(isinstance(v, (int, float)) for v in ind.values()), f"{w}.indicators numbers")
        if "steps_device" in r:  # only where another device's annotations gave the steps
            need(isinstance(r["steps_device"], int) and r["steps_device"] != r["device"] and
                 r.get("steps_source") == "annotations", f"{w}.steps_device")
        need(isinstance(r.get("findings"), list), f"{w}.findings")
        for j, f in enumerate(r["findings"]):
            finding(f, f"{w}.findings[{j}]")
    need(isinstance(d.get("findings"), list), "findings")
    for j, f in enumerate(d["findings"]):
        finding(f, f"findings[{j}]")


if __name__ == "__main__":
    main()
