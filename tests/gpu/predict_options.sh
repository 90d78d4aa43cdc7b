#!/bin/sh
# Training options for predict (device machine, H200).
#   OUT=/some/dir sh tests/gpu/predict_options.sh          # snapshots + options grid
#   FINAL=1 OUT=/some/dir sh tests/gpu/predict_options.sh  # the held-out options grid
# Snapshots: one llama step per option (gradient checkpointing, eager
# attention, LoRA) with allocator history; grids: bench/predict_grid.py.
set -u
OUT=${OUT:?set OUT to a directory}
if [ -n "${FINAL:-}" ]; then
    PYTHONUNBUFFERED=1 timeout 330 python3 bench/predict_grid.py --options-final --budget=${BUDGET:-300} \
        >"$OUT/options_final.jsonl" 2>"$OUT/options_final.log"
    tail -n 3 "$OUT/options_final.log"; wc -l "$OUT/options_final.jsonl"
    exit 0
fi
S=$(mktemp -d)
PYTHONUNBUFFERED=1 timeout 120 python3 bench/predict_snapshots.py "$S" --options >"$OUT/snapshots.log" 2>&1
for f in "$S"/*.pickle; do xz -9 "$f"; done
tar -cf "$OUT/option-snapshots.tar" -C "$S" .
PYTHONUNBUFFERED=1 timeout 330 python3 bench/predict_grid.py --options --budget=${BUDGET:-300} \
    >"$OUT/options.jsonl" 2>"$OUT/options.log"
tail -n 3 "$OUT/snapshots.log" "$OUT/options.log"
wc -l "$OUT/options.jsonl"
