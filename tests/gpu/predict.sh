#!/bin/sh
# GPU side of issue 5 in one call (device machine: H200, torch 2.11).
# Needs build-dev/ (the device has no -dev packages), carried over:
#   make BUILD=build-dev STATIC_DEPS=1 build-dev/memdiag
#   OUT=/some/dir sh tests/gpu/predict.sh
# Runs `memdiag probe` (calibration.json), then measures the
# released-model grid ($GRID, default --real: real.jsonl), held out
# from the model; bench/predict_eval.py compares predict with it.
set -u
OUT=${OUT:?set OUT to a directory}
[ -x build-dev/memdiag ] || { echo "build-dev/memdiag missing (see the header)"; exit 1; }
build-dev/memdiag probe -o "$OUT/calibration.json" >"$OUT/probe.log" 2>&1
echo "probe exit $?" >>"$OUT/probe.log"
# GRID=--final for the check measured once after the model was frozen
GRID=${GRID:---real}
name=$(echo "$GRID" | tr -d -)
PYTHONUNBUFFERED=1 timeout ${GRID_SECONDS:-420} python3 bench/predict_grid.py $GRID --budget=${GRID_BUDGET:-380} \
    >"$OUT/$name.jsonl" 2>"$OUT/$name.log"
cat "$OUT/probe.log" "$OUT/calibration.json"
tail -2 "$OUT/$name.log"
wc -l "$OUT/$name.jsonl"
