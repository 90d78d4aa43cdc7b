#!/bin/sh
# Driver-level tracing on real GPUs (device machine, 2 x H200): memdiag run's
# CUPTI tracer in a torch job (default allocator, expandable segments,
# cudaMallocAsync), under DDP (NCCL's buffers), in a plain CUDA program,
# beside torch.profiler, and its cost on step time. Needs build-dev/ from
#   make BUILD=build-dev STATIC_DEPS=1 build-dev/memdiag build-dev/libmemdiag_capture.so
# Results in $OUT: driver-runs.tar.xz (run directories: capture files,
# snapshots as .xz, summaries) and log. REPS=N overhead runs of each mode (3).
set -u
OUT=${OUT:?set OUT}
M=$(pwd)/build-dev/memdiag
W=$(mktemp -d)
log=$OUT/log
WL="python3 examples/workloads.py"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
echo "== gpus: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tr '\n' ' ')" >>"$log"
python3 -c 'import torch; print("torch", torch.__version__, torch.version.cuda)' >>"$log" 2>&1
ls /usr/local/cuda/lib64/libcupti* >>"$log" 2>&1
python3 - >>"$log" 2>&1 <<'PY'
import torch, os  # which libcupti torch's process holds
torch.zeros(1, device="cuda")
print([l.split()[-1] for l in open("/proc/self/maps") if "cupti" in l][:1])
PY
run() { # NAME COMMAND... (SKIP="name ..." leaves some out: ddp on a one-GPU machine)
    name=$1; shift
    case " ${SKIP:-} " in *" $name "*) return ;; esac
    PYTHONUNBUFFERED=1 timeout 300 "$@" >"$W/$name.out" 2>&1
    echo "== $name: exit $? ($(ls "$W/$name" 2>/dev/null | tr '\n' ' '))" >>"$log"
    tail -n 30 "$W/$name.out" >>"$log"
    "$M" summary "$W/$name" >"$W/$name.summary" 2>&1
    "$M" diagnose --json "$W/$name" >"$W/$name.json" 2>>"$log"
    grep -A7 'driver-level' "$W/$name.summary" >>"$log"
}
run beta "$M" run -o "$W/beta" -- $WL --case beta --plain
run expandable env PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True "$M" run -o "$W/expandable" -- \
    $WL --case beta --plain
run async env PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync "$M" run -o "$W/async" -- \
    $WL --case alpha --plain
run ddp "$M" run -o "$W/ddp" -- python3 -m torch.distributed.run --nproc-per-node 2 \
    examples/workloads.py --case beta --plain
# torch.compile's workers initialise CUDA and allocate nothing: no driver file of theirs
run compiled "$M" run -o "$W/compiled" -- $WL --case beta --compile default --plain
# torch.profiler inside the job: CUPTI has one subscriber (CUDA 13.0)
cat >"$W/prof.py" <<'PY'
import torch
from torch.profiler import profile, ProfilerActivity
x = torch.randn(1024, 1024, device="cuda")
with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as p:
    for _ in range(3):
        y = x @ x
    torch.cuda.synchronize()
k = [e for e in p.events() if e.device_type == torch.autograd.DeviceType.CUDA]
print("profiler CUDA events:", len(k))
PY
run profiler "$M" run -o "$W/profiler" -- python3 "$W/prof.py"
# SIGKILL a second and a half after a 1 GiB allocation: the driver file holds it
run killed "$M" run -o "$W/killed" -- python3 -c "import torch, os, time
x = torch.empty(2**28, device='cuda'); time.sleep(1.5); os.kill(os.getpid(), 9)"
if nvcc -Iinclude examples/cuda_phases.cu -Lbuild-dev -lmemdiag_capture -Xlinker -rpath=$(pwd)/build-dev \
        -o "$W/cuda_phases" >>"$log" 2>&1; then
    mkdir -p "$W/cuda"
    run cuda "$M" run -o "$W/cuda" --force -- "$W/cuda_phases" "$W/cuda/rank0.mdcap"
else
    echo "== cuda: nvcc build failed" >>"$log"
fi
# cost per driver call: a microbenchmark, plain, traced, and under CUPTI with an empty
# callback (what is CUPTI's; OLD=dir of another build's libmemdiag_capture.so to
# compare with), interleaved
if nvcc -O2 -o "$W/driver_cost" bench/driver_cost.cu >>"$log" 2>&1 &&
        cc -O2 -fPIC -shared -o "$W/libcupti_floor.so" bench/cupti_floor.c -ldl >>"$log" 2>&1; then
    mkdir -p "$W/dc"
    for rep in 1 2 3; do
        echo "cost plain rep $rep: $("$W/driver_cost")" >>"$log"
        echo "cost traced rep $rep: $(MEMDIAG_OUT="$W/dc" CUDA_INJECTION64_PATH=$(pwd)/build-dev/libmemdiag_capture.so "$W/driver_cost")" >>"$log"
        echo "cost cupti-floor rep $rep: $(CUDA_INJECTION64_PATH="$W/libcupti_floor.so" MEMDIAG_CUPTI=/usr/local/cuda/lib64/libcupti.so "$W/driver_cost")" >>"$log"
        [ -n "${OLD:-}" ] && echo "cost old rep $rep: $(MEMDIAG_OUT="$W/dc" CUDA_INJECTION64_PATH=$(pwd)/$OLD/libmemdiag_capture.so "$W/driver_cost")" >>"$log"
        rm -f "$W"/dc/*
    done
    rm -rf "$W/dc" "$W/driver_cost" "$W/libcupti_floor.so"
fi
[ -n "${COST_ONLY:-}" ] && exit 0
# cost on step time: beta, medium preset, batch 8, modes interleaved
for rep in $(seq 1 "${REPS:-3}"); do
    for mode in ${MODES:-plain off on async-off async-on}; do
        B="--case beta --preset medium --batch 8 --steps 60 --plain --time"
        case $mode in
            plain) $WL $B >"$W/t.out" 2>&1 ;;
            off|on) "$M" run --quiet --force --driver $mode -o "$W/ovh" -- $WL $B >"$W/t.out" 2>&1 ;;
            async-*) PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync "$M" run --quiet --force \
                --driver ${mode#async-} -o "$W/ovh" -- $WL $B >"$W/t.out" 2>&1 ;;
        esac
        echo "overhead $mode rep $rep: $(grep step_ms "$W/t.out")" >>"$log"
    done
done
rm -rf "$W/ovh" "$W/cuda_phases"
for d in "$W"/*/; do
    for p in "$d"*.pickle; do [ -e "$p" ] && xz -T0 -6 "$p"; done
done
tar -C "$W" -cJf "$OUT/driver-runs.tar.xz" .
