#!/bin/sh
# Everything GPU-side in one call (device machine: H200, torch 2.11):
# captures real snapshots of examples/workloads.py for the CI fixtures in
# tests/data/captured/, each with torch's own counters beside it.
#   OUT=/some/dir sh tests/gpu/run.sh
# Results: $OUT/captures.tar.xz (snapshots .pickle.xz + .json) and $OUT/log.
set -u
OUT=${OUT:?set OUT to a directory}
W=$(mktemp -d)
log=$OUT/log
py=python3
run() { # NAME ARGS...
    name=$1; shift
    echo "== $name: $*" >>"$log"
    PYTHONUNBUFFERED=1 timeout 300 $py examples/workloads.py --out "$W/$name" "$@" >>"$log" 2>&1
    echo "   exit $?" >>"$log"
}
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader >"$log" 2>&1
$py -c 'import torch; print("torch", torch.__version__, torch.version.cuda)' >>"$log" 2>&1
run alpha-small-py    --case alpha --stacks python
run beta-small-py     --case beta --stacks python
run gamma-small-py    --case gamma --stacks python
run keptloss-small-py --case keptloss --stacks python
run gamma-small-ring  --case gamma --stacks python --max-entries 2500
run beta-medium-bf16  --case beta --preset medium --batch 4 --precision bf16 --stacks python
run ragged            --case ragged --batch 8 --steps 12 --stacks python
run ragged-expandable --case ragged --batch 8 --steps 12 --stacks python --alloc-conf expandable_segments:True
run vocab             --case vocab --batch 8 --steps 4 --stacks python
run oom               --case oom --stacks python
$py - "$W" <<'PY' >>"$log" 2>&1
import lzma, sys, pathlib
for p in sorted(pathlib.Path(sys.argv[1]).glob("*.pickle")):
    data = p.read_bytes()
    p.with_suffix(".pickle.xz").write_bytes(lzma.compress(data, preset=9))
    p.unlink()
    print(p.name, len(data), "bytes")
PY
tar -cJf "$OUT/captures.tar.xz" -C "$W" .
ls -la "$W" >>"$log"
cat "$log"
