#!/bin/sh
# gpt_neox (Pythia) for `memdiag predict`, in one call on the device machine:
# the building grid and one snapshot per precision (read while modeling), and
# the held-out grid (compared once the model is written).
#   OUT=/some/dir sh tests/gpu/predict_neox.sh
set -u
OUT=${OUT:?set OUT to a directory}
S=$(mktemp -d)
export PYTHONUNBUFFERED=1
timeout 150 python3 bench/predict_grid.py --neox --budget=120 >"$OUT/neox.jsonl" 2>"$OUT/neox.log"
timeout 90 python3 bench/predict_snapshots.py "$S" --neox >>"$OUT/neox.log" 2>&1
timeout 300 python3 bench/predict_grid.py --neox-final --budget=260 >"$OUT/neox_final.jsonl" 2>>"$OUT/neox.log"
tar -cJf "$OUT/neox-snapshots.tar.xz" -C "$S" .
tail -4 "$OUT/neox.log"
wc -l "$OUT"/neox*.jsonl
