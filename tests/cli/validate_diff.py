#!/usr/bin/env python3
"""Checks `memdiag diff --json` output on stdin against docs/json-schema.md
("diff"): the pairs, each side's figures, categories, sites and findings."""
import json
import sys

FIGS = ("peak_allocated_mib", "peak_reserved_mib", "end_allocated_mib", "process_used_peak_mib")
INDS = ("first_step_persistent_change_mib", "between_step_growth_mib",
        "largest_forward_increase_mib", "maximum_peak_allocated_mib")
KINDS = {"leak", "optimizer_state", "library_workspace", "activations", "logits",
         "fragmentation", "rank_imbalance", "non_framework", "oom"}


def num_or_null(v):
    return v is None or isinstance(v, (int, float))


def side(s, where):
    if s is None:
        return
    assert s["kind"] in ("snapshot", "capture", "samples"), where
    assert isinstance(s["source"], str) and s["source"], where
    assert all(num_or_null(s[k]) for k in FIGS), where
    assert isinstance(s["steps"], int), where
    assert set(s["indicators"]) == set(INDS), where
    assert all(num_or_null(v) for v in s["indicators"].values()), where


def findings(fs, where):
    for f in fs:
        assert f["kind"] in KINDS, where
        assert f["status"] in ("gone", "new", "kept"), where
        assert (f["before"] is None) == (f["status"] == "new"), where
        assert (f["after"] is None) == (f["status"] == "gone"), where
        for s in (f["before"], f["after"]):
            if s is not None:
                assert s["severity"] in ("info", "warning", "critical") and s["summary"], where


def main():
    d = json.load(sys.stdin)
    assert d["schema"] == 1 and d["kind"] == "diff" and d["tool"].startswith("memdiag ")
    for i, r in enumerate(d["ranks"]):
        where = f"ranks[{i}]"
        assert isinstance(r["rank"], int) and isinstance(r["device"], int), where
        assert r["before"] is not None or r["after"] is not None, where
        side(r["before"], where + ".before")
        side(r["after"], where + ".after")
        for c in r.get("categories", []):
            assert c["before_mib"] >= 0 and c["after_mib"] >= 0, where
        changes = [abs(s["after_mib"] - s["before_mib"]) for s in r.get("sites", [])]
        assert changes == sorted(changes, reverse=True), where + ": sites by change"
        findings(r["findings"], where)
    findings(d["findings"], "findings")
    print(f"{len(d['ranks'])} pairs ok")


if __name__ == "__main__":
    main()
