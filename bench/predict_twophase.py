#!/usr/bin/env python3
"""Exploration for issue 5 (not used by memdiag): how far a two-regime peak
model gets on the measured grid. Backward peak = measured start-of-step
allocation + per-layer saved activations (the count in
docs/predict-model.md) + k bytes per logit element; optimizer peak = start +
fp32 gradients + AdamW foreach temporaries (2.2 x 4P) or SGD (1.0 x 4P).
k is swept; the row errors at the best worst-case k are printed.

    python3 bench/predict_twophase.py [bench/data/predict_grid_h200.jsonl]
"""
import json
import statistics
import sys


def saved_bytes(r):
    c = r["config"]
    h, heads = c["hidden_size"], c["num_attention_heads"]
    hd = c.get("head_dim") or h // heads
    q, kv = heads * hd, (c.get("num_key_value_heads") or heads) * hd
    i, layers = c["intermediate_size"], c["num_hidden_layers"]
    tokens = r["batch"] * r["seq"]
    return layers * tokens * (28 * h + 10 * q + 8 * kv + 4 * heads + 8 * i)


def predict(r, k):
    start, p = r["allocated_before_step"], r["params"]
    backward = start + saved_bytes(r) + k * r["batch"] * r["seq"] * r["vocab"]
    optimizer = start + 4 * p * (2.2 if r["optimizer"] == "adamw" else 1.0)
    return max(backward, optimizer)


def main():
    path = sys.argv[1] if len(sys.argv) > 1 else "bench/data/predict_grid_h200.jsonl"
    rows = [json.loads(line) for line in open(path)][1:]
    rows = [r for r in rows if r["precision"] == "bf16-autocast"
            and r["arch"] in ("llama", "mistral", "qwen2", "qwen3")]

    def errors(k):
        return [(predict(r, k) - r["peak_allocated"]) / r["peak_allocated"] for r in rows]
    k = min((x / 10 for x in range(100, 200)), key=lambda k: max(map(abs, errors(k))))
    e = errors(k)
    for r, x in zip(rows, e):
        print(f"{r['arch']:8} {r['batch']}x{r['seq']:<5} {r['optimizer']:6} {100 * x:+6.1f}%")
    print(f"{len(rows)} rows, k = {k:.1f} bytes per logit element: "
          f"median |error| {100 * statistics.median(map(abs, e)):.1f}%, worst {100 * max(map(abs, e)):.1f}%")


if __name__ == "__main__":
    main()
