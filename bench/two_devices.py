#!/usr/bin/env python3
"""two_devices.py IN OUT [STEPS]: a one-device snapshot copied onto a second
device (addresses moved by 2^44), with STEPS optimizer annotations (default
10) on cuda:0 only, as torch tags them with the current device. For
measuring the multi-device step search on a large file (bench/RESULTS.md).
"""
import pickle
import sys


def main():
    src, dst = sys.argv[1], sys.argv[2]
    steps = int(sys.argv[3]) if len(sys.argv) > 3 else 10
    d = pickle.load(open(src, "rb"))
    tr = d["device_traces"][0]
    shift = 1 << 44
    d["device_traces"] = [tr, [dict(e, addr=e["addr"] + shift) for e in tr]]
    moved = []
    for s in d["segments"]:
        m = dict(s, device=1, address=s["address"] + shift)
        m["blocks"] = [dict(b, address=b["address"] + shift) for b in s["blocks"]]
        moved.append(m)
    d["segments"] = d["segments"] + moved
    t0, t1 = tr[0]["time_us"], tr[-1]["time_us"]
    anns = []
    for k in range(steps):
        t = int(t0 + (t1 - t0) * (k + 0.9) / steps)
        for stage, at in (("START", t), ("END", t + 100)):
            anns.append({"stage": stage, "name": "Optimizer.step#AdamW.step", "device": 0,
                         "time_us": at})
    d["external_annotations"] = anns
    with open(dst, "wb") as f:
        pickle.dump(d, f, protocol=4)


if __name__ == "__main__":
    main()
