#!/bin/sh
# Everything GPU-side in one call (device machine: H200, torch 2.11):
# captures real snapshots of examples/workloads.py for the CI fixtures in
# tests/data/captured/, each with torch's own counters beside it, and
# compares memdiag's replay with those counters where build/memdiag came
# along (carried: the CLI is linked statically).
#   OUT=/some/dir [CASES="name ..."] sh tests/gpu/run.sh
# Results: $OUT/captures.tar.xz (snapshots .pickle.xz + .json) and $OUT/log.
set -u
OUT=${OUT:?set OUT to a directory}
W=$(mktemp -d)
log=$OUT/log
py=python3
run() { # NAME ARGS...: only the names in $CASES when it is set
    name=$1; shift
    case " ${CASES:-$name} " in *" $name "*) ;; *) return ;; esac
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
# empty_cache() each step: free pages of the expandable segments unmapped,
# inside blocks as well as at their ends; and a ring of that run's last events
run ragged-unmap      --case ragged --batch 8 --steps 12 --stacks python --alloc-conf expandable_segments:True --empty-cache
run ragged-unmap-ring --case ragged --batch 8 --steps 12 --stacks python --alloc-conf expandable_segments:True --empty-cache --max-entries 3000
run vocab             --case vocab --batch 8 --steps 4 --stacks python
run oom               --case oom --stacks python
run oom-expandable    --case oom --stacks python --alloc-conf expandable_segments:True
run alpha-small-all   --case alpha --stacks all
run beta-compiled     --case beta --compile default --stacks python
run beta-cudagraphs   --case beta --compile reduce-overhead --stacks python
run beta-checkpointing --case beta --checkpointing --stacks python
run alpha-fp16        --case alpha --precision fp16 --stacks python
if [ "$($py -c 'import torch; print(torch.cuda.device_count())')" -ge 2 ]; then
    run beta-two-devices --case beta --devices 2 --stacks python
    # DDP and FSDP2 over NCCL, a file pair per rank (NAME-rankN)
    py="$py -m torch.distributed.run --nproc-per-node 2"
    run beta-ddp  --case beta --stacks python --rank-zero-extra 6
    run beta-fsdp --case beta --stacks python --fsdp 2
    run beta-fsdp1 --case beta --stacks python --fsdp 1
    py=python3
fi
# memdiag's replay against torch's counters, where a built memdiag came along
if [ -x build/memdiag ]; then
    for j in "$W"/*.json; do
        echo "== compare $(basename "$j" .json): $(build/memdiag diagnose --json "${j%.json}.pickle" |
            python3 tests/cli/compare_samples.py "$j" 0.01)" >>"$log" 2>&1
        build/memdiag summary "${j%.json}.pickle" >>"$log" 2>&1
    done
fi
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
