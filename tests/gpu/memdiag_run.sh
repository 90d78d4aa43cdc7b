#!/bin/sh
# memdiag run on real GPUs (device machine, 2 x H200): every anonymous
# workload on one GPU, an OOM, DDP over NCCL with rank-zero extra samples,
# and the capture overhead on step time. Needs build-dev/ from
#   make BUILD=build-dev STATIC_DEPS=1 build-dev/memdiag build-dev/libmemdiag_capture.so
# ONLY="name ..." runs only those workloads (no C program; no overhead unless
# OVERHEAD="mode ..." asks for it, REPS=N times each).
# Results in $OUT: memdiag-run.tar.xz (run directories, diagnoses) and log.
set -u
OUT=${OUT:?set OUT}
M=$(pwd)/build-dev/memdiag
W=$(mktemp -d)
log=$OUT/log
WL="python3 examples/workloads.py"
echo "== gpus: $(nvidia-smi --query-gpu=name --format=csv,noheader | tr '\n' ' ')" >>"$log"
check() { # NAME EXPECTED-STATUS COMMAND...: only the names in $ONLY when it is set
    name=$1; want=$2; shift 2
    case " ${ONLY:-$name} " in *" $name "*) ;; *) return ;; esac
    PYTHONUNBUFFERED=1 timeout 400 "$@" >"$W/$name.out" 2>&1
    got=$?
    echo "== $name: exit $got (want $want)" >>"$log"
    tail -n 40 "$W/$name.out" >>"$log"
    "$M" diagnose --json "$W/$name" >"$W/$name.diagnosis.json" 2>>"$log"
}
for c in alpha beta gamma; do
    check "$c" 0 "$M" run -o "$W/$c" -- $WL --case "$c" --plain
done
check oom 3 "$M" run -o "$W/oom" -- $WL --case oom --plain
# torch.compile under capture: the global hooks must not break tracing or CUDA graphs
check compiled 0 "$M" run -o "$W/compiled" -- $WL --case beta --compile default --plain
check cudagraphs 0 "$M" run -o "$W/cudagraphs" -- $WL --case beta --compile reduce-overhead --plain
# fp16 with a GradScaler, which skips the first optimizer step: still 6 steps
check fp16 0 "$M" run -o "$W/fp16" -- $WL --case alpha --precision fp16 --plain
check ddp 0 "$M" run -o "$W/ddp" -- python3 -m torch.distributed.run --nproc-per-node 2 \
    examples/workloads.py --case beta --plain --rank-zero-extra 6
# DDP where rank 1 also keeps 300 MiB on cuda:0, rank 0's GPU
check stray 0 "$M" run -o "$W/stray" -- python3 -m torch.distributed.run --nproc-per-node 2 \
    examples/workloads.py --case beta --plain --stray 300
# the same with only a CUDA context on cuda:0 (seen by NVML alone)
check stray-context 0 "$M" run -o "$W/stray-context" -- python3 -m torch.distributed.run \
    --nproc-per-node 2 examples/workloads.py --case beta --plain --stray-context
# a Hugging Face model from a config, trained under memdiag run
check hf 0 "$M" run -o "$W/hf" -- python3 examples/hf_train.py --model llama --batch 8 --seq 512
# the same model spread over both GPUs by accelerate (device_map="auto"), one process
check hf-split 0 "$M" run -o "$W/hf-split" -- python3 examples/hf_train.py --model llama --batch 8 --seq 512 --device-map auto
# Hugging Face's Trainer: accelerate, 2 micro-batches a step, bf16, model.zero_grad
check trainer 0 env CUDA_VISIBLE_DEVICES=0 "$M" run -o "$W/trainer" -- python3 examples/hf_trainer.py --accumulate 2 --steps 6
# the same with two GPUs visible and no launcher: the Trainer wraps the model in
# DataParallel (replicas on cuda:1, one process); the capture follows both devices
check trainer-dp 0 "$M" run -o "$W/trainer-dp" -- python3 examples/hf_trainer.py --accumulate 2 --steps 6
# a model split over two GPUs of one process
check split 0 "$M" run -o "$W/split" -- $WL --case beta --devices 2 --plain
# every tensor on cuda:1 by name, no set_device: cuda:0 stays current with a context
# only; the process's own series must be cuda:1's
check offdevice 0 "$M" run -o "$W/offdevice" -- $WL --case beta --device 1 --plain
check trainer-ddp 0 "$M" run -o "$W/trainer-ddp" -- python3 -m torch.distributed.run --nproc-per-node 2 \
    examples/hf_trainer.py --accumulate 2 --steps 6
# PyTorch Lightning: forward, zero_grad and backward inside optimizer.step's closure
check lightning 0 "$M" run -o "$W/lightning" -- python3 examples/pl_train.py --steps 6
if [ -z "${ONLY:-}" ]; then # the C API and the overhead: full runs only
    # a plain CUDA C program using the C API
    if nvcc -Iinclude examples/cuda_phases.cu -Lbuild-dev -lmemdiag_capture -Xlinker -rpath=$(pwd)/build-dev \
            -o "$W/cuda_phases" >>"$log" 2>&1; then
        mkdir -p "$W/cuda"
        "$W/cuda_phases" "$W/cuda/rank0.mdcap" >>"$log" 2>&1
        "$M" summary "$W/cuda" >"$W/cuda.out" 2>&1
        echo "== cuda: $(grep -c leak "$W/cuda.out") leak lines" >>"$log"
        tail -n 20 "$W/cuda.out" >>"$log"
    else
        echo "== cuda: nvcc build failed" >>"$log"
    fi
fi
# Capture overhead on step time: beta, medium preset, batch 8 (seed 000's setting).
# Modes run interleaved (rep-major) so a lease's drift falls on all alike; "record" is
# torch's recorder alone (Python stacks, no memdiag). All modes on full runs, none
# under ONLY unless OVERHEAD="modes ..." names them; REPS runs of each (3).
if [ -z "${OVERHEAD+set}" ]; then
    if [ -z "${ONLY:-}" ]; then OVERHEAD="plain record none python python-alloc all"; else OVERHEAD=; fi
fi
for rep in $(seq 1 "${REPS:-3}"); do
    for mode in $OVERHEAD; do
        B="--case beta --preset medium --batch 8 --steps 60 --plain --time"
        case $mode in
            plain) $WL $B >"$W/t.out" 2>&1 ;;
            record) $WL $B --record >"$W/t.out" 2>&1 ;;
            record1m) $WL $B --record --max-entries 1000000 >"$W/t.out" 2>&1 ;;
            python200k) "$M" run --quiet --force --stacks python --max-entries 200000 \
                -o "$W/ovh-$mode" -- $WL $B >"$W/t.out" 2>&1 ;;
            python-alloc) "$M" run --quiet --force --stacks python --context alloc -o "$W/ovh-$mode" -- \
                $WL $B >"$W/t.out" 2>&1 ;;
            *) "$M" run --quiet --force --stacks "$mode" -o "$W/ovh-$mode" -- $WL $B >"$W/t.out" 2>&1 ;;
        esac
        echo "overhead $mode rep $rep: $(grep step_ms "$W/t.out")" >>"$log"
    done
done
rm -rf "$W"/ovh-*
# the right cause for each workload, from memdiag's own JSON
python3 - "$W" >>"$log" 2>&1 <<'PY'
import json, os, subprocess, sys
W = sys.argv[1]
want = {"alpha": ({"library_workspace"}, {"leak", "optimizer_state"}),
        "beta": ({"optimizer_state", "library_workspace"}, {"leak"}),
        "gamma": ({"leak", "library_workspace"}, {"optimizer_state"}),
        "oom": ({"oom"}, set()), "hf": ({"optimizer_state", "logits"}, {"leak"}),
        "compiled": ({"optimizer_state"}, {"leak"}), "cudagraphs": ({"optimizer_state"}, {"leak"}),
        "fp16": ({"library_workspace"}, {"leak", "optimizer_state"}),
        "trainer": ({"optimizer_state", "logits"}, {"leak"}),
        "lightning": ({"optimizer_state"}, {"leak"}),
        "trainer-ddp": ({"optimizer_state", "logits"}, {"leak"}),
        "trainer-dp": ({"optimizer_state", "logits"}, {"leak"}),
        "split": ({"optimizer_state"}, {"leak"}), "stray": ({"optimizer_state"}, {"leak"}),
        "ddp": ({"optimizer_state"}, {"leak"}), "hf-split": ({"optimizer_state"}, {"leak"}), "stray-context": ({"optimizer_state"}, {"leak"}),
        "offdevice": ({"optimizer_state"}, {"leak"})}
bad = 0
for run, (must, must_not) in want.items():
    if not os.path.exists(f"{W}/{run}.diagnosis.json"):
        continue  # not selected by ONLY
    d = json.load(open(f"{W}/{run}.diagnosis.json"))
    kinds = {f["kind"] for r in d["ranks"] for f in r["findings"]}
    ok = must <= kinds and not (must_not & kinds)
    bad += not ok
    print(f"{'PASS' if ok else 'FAIL'} {run}: {sorted(kinds)}")
for run in want:  # each rank's snapshot and capture give the same indicators
    if not os.path.exists(f"{W}/{run}.diagnosis.json"):
        continue
    with open(f"{W}/{run}.diagnosis.json") as f:
        r = subprocess.run([sys.executable, "tests/cli/compare_run.py", "0.01"], stdin=f,
                           capture_output=True, text=True)
    bad += r.returncode != 0
    print(f"{'PASS' if r.returncode == 0 else 'FAIL'} {run}: snapshot and capture agree: "
          f"{r.stdout.strip()}")
for run in ("compiled", "cudagraphs"):  # compile workers leave no files, no hook warning
    if os.path.isdir(f"{W}/{run}"):
        files = sorted(f for f in os.listdir(f"{W}/{run}") if not f.startswith("driver-pid"))
        out = open(f"{W}/{run}.out").read()
        ok = files == ["manifest.json", "rank0.mdcap", "rank0.pickle"] and "global hooks" not in out
        bad += not ok
        print(f"{'PASS' if ok else 'FAIL'} {run} files: {files}")
if os.path.isdir(f"{W}/fp16"):
    ok = "rank0.mdcap: complete, 6 steps" in open(f"{W}/fp16.out").read()
    bad += not ok
    print(f"{'PASS' if ok else 'FAIL'} fp16: a skipped optimizer step still counts")
if os.path.exists(f"{W}/ddp.diagnosis.json"):
    d = json.load(open(f"{W}/ddp.diagnosis.json"))
    ok = ([f["kind"] for f in d["findings"]] == ["rank_imbalance"] and
          "rank 0" in d["findings"][0]["summary"])
    bad += not ok
    print(f"{'PASS' if ok else 'FAIL'} ddp: {[f['summary'] for f in d['findings']]}")
if os.path.exists(f"{W}/stray.diagnosis.json"):  # rank 1's tensor on rank 0's GPU, named
    d = json.load(open(f"{W}/stray.diagnosis.json"))
    ok = any(f["kind"] == "rank_imbalance" and f["summary"].startswith("rank 1 holds") and
             "on cuda:0, rank 0's GPU" in f["summary"] for f in d["findings"])
    bad += not ok
    print(f"{'PASS' if ok else 'FAIL'} stray: {[f['summary'] for f in d['findings']]}")
if os.path.exists(f"{W}/stray-context.diagnosis.json"):  # a context alone, from NVML
    d = json.load(open(f"{W}/stray-context.diagnosis.json"))
    ok = any(f["kind"] == "rank_imbalance" and f["summary"].startswith("rank 1 holds") and
             "on cuda:0, rank 0's GPU" in f["summary"] for f in d["findings"])
    bad += not ok
    print(f"{'PASS' if ok else 'FAIL'} stray-context: {[f['summary'] for f in d['findings']]}")
if os.path.exists(f"{W}/offdevice.diagnosis.json"):  # own device: where the memory is
    d = json.load(open(f"{W}/offdevice.diagnosis.json"))
    caps = [r["device"] for r in d["ranks"] if r["kind"] == "capture"]
    out = open(f"{W}/offdevice.out").read()
    ok = caps[:1] == [1] and "== rank 0 (cuda:1)" in out
    bad += not ok
    print(f"{'PASS' if ok else 'FAIL'} offdevice: own device cuda:1: capture series {caps}")
print(f"gpu checks: {'all passed' if not bad else f'{bad} failed'}")
PY
tar -cJf "$OUT/memdiag-run.tar.xz" -C "$W" .
cat "$log"
