#!/usr/bin/env python3
"""Checks that, in one `memdiag run` directory (diagnose --json on stdin),
each rank's snapshot and its capture file give the same four indicators,
on each device the process used (paired by file stem and device):
the snapshot's phase points, found from annotations and frames, against
torch's counters sampled at the runtime's hooks. Exits 1 on a difference
above argv[1] MiB (0.01), or when a rank lacks either kind. Indicators
named after argv[1] are not compared (a run that ran out of memory peaks
in its failing step, after the capture's last sample)."""
import json
import os
import sys


def main():
    tol = float(sys.argv[1]) if len(sys.argv) > 1 else 0.01
    skip = set(sys.argv[2:])
    by = {}
    for r in json.load(sys.stdin)["ranks"]:  # a process's file pair, and each device of it
        stem = os.path.basename(r["source"]).split(".")[0]  # rank0.pickle.xz, rank0.mdcap
        by.setdefault((stem, r["device"]), {})[r["kind"]] = r["indicators"]
    bad = []
    for rank, kinds in sorted(by.items()):
        if set(kinds) == {"capture"} and kinds["capture"].get("maximum_peak_allocated_mib") == 0:
            continue  # a device the process only made a CUDA context on: no trace to compare
        if set(kinds) != {"snapshot", "capture"}:
            bad.append((rank, "kinds", sorted(kinds)))
            continue
        snap, cap = kinds["snapshot"], kinds["capture"]
        for k in sorted((set(snap) | set(cap)) - skip):
            if k not in snap or k not in cap or abs(snap[k] - cap[k]) > tol:
                bad.append((rank, k, snap.get(k), cap.get(k)))
    print(f"{len(by)} process device(s)", bad)
    sys.exit(1 if bad or not by else 0)


if __name__ == "__main__":
    main()
