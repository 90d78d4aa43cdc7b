#!/bin/sh
# GPU side of issue 5 in one call (device machine: H200, torch 2.11):
#   OUT=/some/dir sh tests/gpu/predict.sh
# Builds memdiag, runs `memdiag probe` (calibration.json), then measures the
# released-model grid (real.jsonl, bench/predict_grid.py --real), held out
# from the model; bench/predict_eval.py compares predict with it.
set -u
OUT=${OUT:?set OUT to a directory}
make -s BUILD=build-dev STATIC_DEPS=1 build-dev/memdiag >"$OUT/build.log" 2>&1 || { cat "$OUT/build.log"; exit 1; }
build-dev/memdiag probe -o "$OUT/calibration.json" >"$OUT/probe.log" 2>&1
echo "probe exit $?" >>"$OUT/probe.log"
PYTHONUNBUFFERED=1 timeout ${GRID_SECONDS:-420} python3 bench/predict_grid.py --real --budget=${GRID_BUDGET:-380} \
    >"$OUT/real.jsonl" 2>"$OUT/real.log"
cat "$OUT/probe.log" "$OUT/calibration.json"
tail -2 "$OUT/real.log"
wc -l "$OUT/real.jsonl"
