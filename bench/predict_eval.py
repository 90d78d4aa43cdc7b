#!/usr/bin/env python3
"""`memdiag predict` against measured steady-state steps: predicted and real
max_memory_allocated per row, pred/real, and the summary (median and worst
|pred/real - 1|) for the model-building grid and the held-out grid apart.

    python3 bench/predict_eval.py [--rows] [JSONL...]

Defaults to bench/data/predict_grid_h200.jsonl, predict_grid_extra_h200.jsonl
(model-building) and predict_heldout_h200.jsonl (held out), measured by
bench/predict_grid.py on an H200.
"""
import json
import os
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
MEMDIAG = os.environ.get("MEMDIAG", os.path.join(HERE, "..", "build", "memdiag"))
SETS = [("building", ["predict_grid_h200.jsonl", "predict_grid_extra_h200.jsonl"]),
        ("held-out", ["predict_heldout_h200.jsonl"])]


def rows(path):
    with open(path) as f:
        for line in f:
            r = json.loads(line)
            if "arch" in r and "error" not in r:
                yield r


def predict(r, tmp):
    cfg = os.path.join(tmp, "config.json")
    with open(cfg, "w") as f:
        json.dump(r["config"], f)
    out = subprocess.run([MEMDIAG, "predict", "--model", cfg, "--batch", str(r["batch"]),
                          "--seq", str(r["seq"]), "--optimizer", r["optimizer"],
                          "--precision", r["precision"], "--json"],
                         capture_output=True, text=True, check=True)
    return json.loads(out.stdout)


def main():
    show = "--rows" in sys.argv
    files = [a for a in sys.argv[1:] if not a.startswith("--")]
    sets = [("given", files)] if files else [(n, [os.path.join(HERE, "data", f) for f in fs])
                                              for n, fs in SETS]
    worst_all = 0
    with tempfile.TemporaryDirectory() as tmp:
        for name, paths in sets:
            errs = []
            for path in paths:
                for r in rows(path):
                    p = predict(r, tmp)
                    real = r["peak_allocated"]
                    ratio = p["peak_allocated_bytes"] / real
                    floor = p["floor_bytes"] / r["allocated_before_step"]
                    errs.append((abs(ratio - 1), ratio, r, p, floor))
                    if show:
                        print(f"{r['arch']:8s} {r['batch']:3d}x{r['seq']:<5d} {r['optimizer']:6s} "
                              f"{r['precision']:14s} pred {p['peak_allocated_bytes']/2**20:9.1f} "
                              f"real {real/2**20:9.1f} MiB  {ratio:6.3f}  floor {floor:6.3f}  "
                              f"{p['peak_phase']}")
            if not errs:
                continue
            e = [x[0] for x in errs]
            worst = max(errs, key=lambda x: x[0])
            under = sum(1 for x in errs if x[1] < 1)
            print(f"{name}: {len(e)} rows, median |pred/real-1| {100*statistics.median(e):.2f}%, "
                  f"worst {100*worst[0]:.2f}% ({worst[2]['arch']} {worst[2]['batch']}x"
                  f"{worst[2]['seq']} {worst[2]['optimizer']} {worst[2]['precision']}: "
                  f"{worst[1]:.3f}), under-predicted {under}")
            worst_all = max(worst_all, worst[0])
    return 0


if __name__ == "__main__":
    sys.exit(main())
