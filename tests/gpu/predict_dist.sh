#!/bin/sh
# Data-parallel steps for predict (device machine with 2 GPUs: nvidia-h200-x2).
#   OUT=/some/dir sh tests/gpu/predict_dist.sh
# $OUT/dist.jsonl: one row per rank and case (bench/predict_dist.py); compare
# with `python3 bench/predict_eval.py --rows dist.jsonl` (DDP rows; ZeRO and
# FSDP are measured for the model to come).
set -u
OUT=${OUT:?set OUT to a directory}
BUDGET=${BUDGET:-400} PYTHONUNBUFFERED=1 timeout 540 \
    python3 -m torch.distributed.run --nproc-per-node 2 bench/predict_dist.py \
    >"$OUT/dist.jsonl" 2>"$OUT/dist.log"
tail -n 5 "$OUT/dist.log"; wc -l "$OUT/dist.jsonl"
