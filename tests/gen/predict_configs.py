#!/usr/bin/env python3
"""Test data for memdiag predict from the measured grid
(bench/data/predict_grid_h200.jsonl): each architecture's config.json as
transformers 5.17 wrote it, and a compact table of the measured rows
(parameters as transformers counted them, allocated at the start of the
steady-state step).

    python3 tests/gen/predict_configs.py
"""
import json

rows = [json.loads(l) for l in open("bench/data/predict_grid_h200.jsonl")][1:]
seen = {}
table = []
for r in rows:
    if "error" in r:
        continue
    if r["arch"] not in seen:
        seen[r["arch"]] = True
        with open(f"tests/data/predict/{r['arch']}.json", "w") as f:
            json.dump(r["config"], f, indent=1, sort_keys=True)
    table.append([r["arch"], r["batch"], r["seq"], r["optimizer"], r["precision"], r["params"],
                  r["allocated_before_step"], r["peak_allocated"]])
with open("tests/data/predict/grid.tsv", "w") as f:
    f.write("arch\tbatch\tseq\toptimizer\tprecision\tparams\tallocated_before_step\tpeak_allocated\n")
    for t in table:
        f.write("\t".join(map(str, t)) + "\n")
