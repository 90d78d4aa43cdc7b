#!/bin/sh
# Real wrapped snapshots for the reader benchmark (bench/data/real): what an
# OOM dump usually holds, torch's ring of the last --max-entries events of a
# run that made more (its trace starts with frees of blocks allocated before
# it, so the replay reconstructs them), from the runs of hf-*.pickle.
# Device machine (H200, torch 2.11), build-dev/ carried there (the device
# has no -dev packages to build with), made here by
#   make BUILD=build-dev STATIC_DEPS=1 build-dev/memdiag build-dev/libmemdiag_capture.so
#   OUT=DIR sh tests/gpu/bench_ring.sh
# Results in $OUT: hf-*-ring.pickle.xz and log.
set -u
OUT=${OUT:?set OUT}
log=$OUT/log
M=$(pwd)/build-dev/memdiag
[ -x "$M" ] || { echo "no $M: carry build-dev" >"$log"; exit 1; }
W=$(mktemp -d)
ring() { # NAME RUN-OPTIONS... -- COMMAND...
    name=$1; shift
    echo "== $name: $*" >>"$log"
    PYTHONUNBUFFERED=1 timeout 400 "$M" run --quiet -o "$W/$name" "$@" >>"$log" 2>&1
    echo "   exit $?" >>"$log"
    f=$W/$name/rank0.pickle
    [ -s "$f" ] || return
    python3 - "$f" >>"$log" 2>&1 <<'PY'
import os, pickle, sys
s = pickle.load(open(sys.argv[1], "rb"))
t = s["device_traces"][0]
print("   %d bytes, %d events, first %s, %d segments" %
      (os.path.getsize(sys.argv[1]), len(t), t[0]["action"] if t else "-", len(s["segments"])))
PY
    "$M" summary "$f" >>"$log" 2>&1
    xz -T0 -6 -c "$f" >"$OUT/$name.pickle.xz"
}
ring hf-qwen2-ring --stacks python --max-entries 100000 -- \
    python3 examples/hf_train.py --model qwen2 --steps 150 --bf16
ring hf-llama-ring --stacks all --max-entries 100000 -- \
    python3 examples/hf_train.py --model llama --steps 40
rm -rf "$W"
