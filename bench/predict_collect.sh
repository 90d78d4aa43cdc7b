#!/bin/sh
# Device side of the predict measurements, in one call (H200, torch 2.11):
#   OUT=/some/dir sh bench/predict_collect.sh
# $OUT/snapshots.tar: one step of every architecture x precision with
# allocator history; $OUT/grid-extra.jsonl: the model-building grid for the
# architectures it lacked; $OUT/heldout.jsonl: the held-out grid.
set -u
OUT=${OUT:?set OUT to a directory}
S=$(mktemp -d)
PYTHONUNBUFFERED=1 timeout 200 python3 bench/predict_snapshots.py "$S" --all >"$OUT/snapshots.log" 2>&1
for f in "$S"/*.pickle; do xz -9 "$f"; done
tar -cf "$OUT/snapshots.tar" -C "$S" .
PYTHONUNBUFFERED=1 timeout 240 python3 bench/predict_grid.py --heldout >"$OUT/heldout.jsonl" 2>"$OUT/heldout.log"
PYTHONUNBUFFERED=1 timeout 120 python3 bench/predict_grid.py --archs=gemma2,phi3,gemma >"$OUT/grid-extra.jsonl" 2>"$OUT/grid-extra.log"
tail -3 "$OUT"/*.log
wc -l "$OUT"/*.jsonl
