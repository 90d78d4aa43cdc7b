#!/bin/sh
# opt and phi for `memdiag predict`, in one call on the device machine:
# the building grid and one snapshot per precision (read while modeling), and
# the held-out grid (compared once the model is written).
#   OUT=/some/dir sh tests/gpu/predict_optphi.sh
set -u
OUT=${OUT:?set OUT to a directory}
S=$(mktemp -d)
export PYTHONUNBUFFERED=1
timeout 150 python3 bench/predict_grid.py --opt-phi --budget=120 >"$OUT/optphi.jsonl" 2>"$OUT/optphi.log"
timeout 90 python3 bench/predict_snapshots.py "$S" --opt-phi >>"$OUT/optphi.log" 2>&1
timeout 300 python3 bench/predict_grid.py --opt-phi-final --budget=260 >"$OUT/optphi_final.jsonl" 2>>"$OUT/optphi.log"
tar -cJf "$OUT/optphi-snapshots.tar.xz" -C "$S" .
tail -4 "$OUT/optphi.log"
wc -l "$OUT"/optphi*.jsonl
