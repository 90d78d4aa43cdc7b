#!/bin/sh
# Layer streaming steps for predict (bench/predict_stream.py, one GPU).
#   OUT=/some/dir [STREAM_GC=1] sh tests/gpu/predict_stream.sh
# $OUT/stream.jsonl; compare: `python3 bench/predict_eval.py --rows stream.jsonl`.
set -u
OUT=${OUT:?set OUT to a directory}
BUDGET=${BUDGET:-240} PYTHONUNBUFFERED=1 timeout 300 python3 bench/predict_stream.py \
    >"$OUT/stream.jsonl" 2>"$OUT/stream.log"
tail -n 3 "$OUT/stream.log"; wc -l "$OUT/stream.jsonl"; grep -c error "$OUT/stream.jsonl"
