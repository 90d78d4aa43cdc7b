#!/bin/sh
# Training options for predict (device machine, H200): allocator snapshots
# of one llama step per option (gradient checkpointing, eager attention,
# LoRA) and the options grid.
#   OUT=/some/dir sh tests/gpu/predict_options.sh
set -u
OUT=${OUT:?set OUT to a directory}
S=$(mktemp -d)
PYTHONUNBUFFERED=1 timeout 120 python3 bench/predict_snapshots.py "$S" --options >"$OUT/snapshots.log" 2>&1
for f in "$S"/*.pickle; do xz -9 "$f"; done
tar -cf "$OUT/option-snapshots.tar" -C "$S" .
PYTHONUNBUFFERED=1 timeout 330 python3 bench/predict_grid.py --options --budget=${BUDGET:-300} \
    >"$OUT/options.jsonl" 2>"$OUT/options.log"
tail -3 "$OUT/snapshots.log" "$OUT/options.log"
wc -l "$OUT/options.jsonl"
