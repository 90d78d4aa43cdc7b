#!/bin/sh
# Architectures added to `memdiag predict` after the model was frozen
# (gemma3_text, olmo2), in one call on the device machine (H200):
# the building grid and one allocator snapshot per precision, read while
# they are modeled, and the held-out grid, compared only once the model is
# written (bench/predict_eval.py).
#   OUT=/some/dir sh tests/gpu/predict_newarch.sh
# Results: $OUT/newarch.jsonl, $OUT/newarch_final.jsonl,
# $OUT/newarch-snapshots.tar.xz, $OUT/newarch.log
set -u
OUT=${OUT:?set OUT to a directory}
S=$(mktemp -d)
export PYTHONUNBUFFERED=1
timeout 230 python3 bench/predict_grid.py --newarch --budget=200 >"$OUT/newarch.jsonl" 2>"$OUT/newarch.log"
timeout 120 python3 bench/predict_snapshots.py "$S" --newarch >>"$OUT/newarch.log" 2>&1
timeout 230 python3 bench/predict_grid.py --newarch-final --budget=200 >"$OUT/newarch_final.jsonl" 2>>"$OUT/newarch.log"
tar -cJf "$OUT/newarch-snapshots.tar.xz" -C "$S" .
tail -5 "$OUT/newarch.log"
wc -l "$OUT"/newarch*.jsonl
