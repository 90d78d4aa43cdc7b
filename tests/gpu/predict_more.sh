#!/bin/sh
# Architectures added to `memdiag predict` after the first model, in one call
# on the device machine (H200): the building grid and one allocator snapshot
# per precision, read while the architecture is modeled, and the held-out
# grid, compared only once the model is written (bench/predict_eval.py).
#   OUT=/some/dir sh tests/gpu/predict_more.sh newarch|neox|opt-phi|moe|moe2
# (newarch: gemma3_text and olmo2; neox: gpt_neox; opt-phi: opt and phi;
# moe: mixtral; moe2: qwen3_moe and qwen2_moe)
# Results: $OUT/NAME.jsonl, $OUT/NAME_final.jsonl, $OUT/NAME-snapshots.tar.xz,
# $OUT/NAME.log, NAME the grid without its dash.
set -u
OUT=${OUT:?set OUT to a directory}
GRID=${1:?which grid: newarch, neox, opt-phi, moe or moe2}
NAME=$(echo "$GRID" | tr -d -)
S=$(mktemp -d)
export PYTHONUNBUFFERED=1
timeout 230 python3 bench/predict_grid.py "--$GRID" --budget=200 >"$OUT/$NAME.jsonl" 2>"$OUT/$NAME.log"
timeout 120 python3 bench/predict_snapshots.py "$S" "--$GRID" >>"$OUT/$NAME.log" 2>&1
timeout 300 python3 bench/predict_grid.py "--$GRID-final" --budget=260 \
    >"$OUT/${NAME}_final.jsonl" 2>>"$OUT/$NAME.log"
tar -cJf "$OUT/$NAME-snapshots.tar.xz" -C "$S" .
tail -4 "$OUT/$NAME.log"
wc -l "$OUT/$NAME.jsonl" "$OUT/${NAME}_final.jsonl"
