#!/usr/bin/env python3
"""Test data for memdiag predict from the measured grid
(tests/data/predict/measured/grid.jsonl): each architecture's config.json as
transformers 5.17 wrote it (the unit tests read the measured rows
themselves).

    python3 tests/gen/predict_configs.py
"""
import json

rows = [json.loads(l) for l in open("tests/data/predict/measured/grid.jsonl")][1:]
seen = {}
for r in rows:
    if "error" in r:
        continue
    if r["arch"] not in seen:
        seen[r["arch"]] = True
        with open(f"tests/data/predict/{r['arch']}.json", "w") as f:
            json.dump(r["config"], f, indent=1, sort_keys=True)
