#!/bin/sh
# Data-parallel steps for predict (device machine with 2 GPUs: nvidia-h200-x2).
#   OUT=/some/dir [CASESET=more] sh tests/gpu/predict_dist.sh
# $OUT/dist.jsonl: one row per rank and case (bench/predict_dist.py), "set"
# fit or final; $OUT/snap/: allocator snapshots of each mode's first case.
# Compare: `python3 bench/predict_eval.py --rows dist.jsonl`.
set -u
OUT=${OUT:?set OUT to a directory}
mkdir -p "$OUT/snap"
python3 -c 'import torch; print(torch.__version__, torch.cuda.device_count(), torch.cuda.get_device_name(0))'
SNAPSHOTS="$OUT/snap" BUDGET=${BUDGET:-470} PYTHONUNBUFFERED=1 timeout 570 \
    python3 -m torch.distributed.run --nproc-per-node 2 bench/predict_dist.py \
    >"$OUT/dist.jsonl" 2>"$OUT/dist.log"
tail -n 5 "$OUT/dist.log"; wc -l "$OUT/dist.jsonl"
tar czf "$OUT/snap.tgz" -C "$OUT" snap && rm -r "$OUT/snap"; ls -la "$OUT"
