#!/bin/sh
# CLI behaviour on real and hostile inputs: exit codes, the one-line error
# format, JSON validity, directory input and rank naming.
M=${MEMDIAG:-build/memdiag}
D=tests/data
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
n=0; bad=0
check() { # check NAME COMMAND... : the command must succeed
    n=$((n + 1)); name=$1; shift
    if ! "$@" >"$T/out" 2>"$T/err"; then bad=$((bad + 1)); echo "not ok $n - $name"; cat "$T/err"; else echo "ok $n - $name"; fi
}

# the README's example output is what the binary prints
check "README examples agree with the binary" python3 tests/cli/readme_examples.py "$M" README.md

# real snapshots: summary works and shows the indicators
check "summary of a real snapshot" sh -c "$M summary $D/seed-exercise/snap-alpha-small-rank0.pickle | grep -q 'maximum_peak_allocated_mib *155.2'"
check "compressed input" sh -c "$M summary $D/alpha-small.pickle.zst | grep -q 'first_step_persistent_change_mib *64.0'"
check "- reads standard input" sh -c "cat $D/alpha-small.pickle.zst | $M summary - | grep -q 'first_step_persistent_change_mib *64.0'"
check "a snapshot through a pipe, plain and compressed (not sniffed away)" sh -c "cat $D/seed-exercise/snap-alpha-small-rank0.pickle | $M summary /dev/stdin | grep -q 'maximum_peak_allocated_mib *155.2' && cat $D/alpha-small.pickle.zst | $M summary /dev/stdin | grep -q 'first_step_persistent_change_mib *64.0'"
check "diagnose --json is valid JSON with schema 1" sh -c "$M diagnose --json $D/seed-exercise/snap-beta-ddp-rank0.pickle $D/seed-exercise/snap-beta-ddp-rank1.pickle | python3 -c 'import json,sys; d=json.load(sys.stdin); assert d[\"schema\"]==1 and [r[\"rank\"] for r in d[\"ranks\"]]==[0,1] and d[\"ranks\"][0][\"indicators\"][\"largest_forward_increase_mib\"]>200'"
for f in $D/seed-exercise/snap-*.pickle $D/synthetic/*.pickle $D/captured/*.pickle.xz; do
    check "diagnose --json validates against schema 1: $(basename $f)" sh -c "$M diagnose --json $f | python3 tests/cli/validate_json.py"
done
check "cross-rank finding in JSON" sh -c "$M diagnose --json $D/seed-exercise/snap-beta-ddp-rank0.pickle $D/seed-exercise/snap-beta-ddp-rank1.pickle | python3 -c 'import json,sys; d=json.load(sys.stdin); assert [f[\"kind\"] for f in d[\"findings\"]]==[\"rank_imbalance\"]'"
check "diagnose text names the leak" sh -c "$M diagnose $D/seed-exercise/snap-gamma-small-rank0.pickle | grep -q 'leak: memory grows by 52.4 MiB every step'"
for j in $D/seed-exercise/*.json $D/synthetic/seed-small-context.json; do
    check "seed JSON report validates against schema 1: $(basename $j)" sh -c "$M diagnose --json $j | python3 tests/cli/validate_json.py"
done
check "seed JSON and its snapshot together" sh -c "$M summary $D/seed-exercise/gamma-small.json $D/seed-exercise/snap-gamma-small-rank0.pickle | grep -q 'phase samples, no allocator history'"
for j in $D/captured/*.json; do
    c=${j%.json}
    check "replay equals torch's counters: $(basename $c)" sh -c "$M diagnose --json $c.pickle.xz | python3 tests/cli/compare_samples.py $j 0.01"
done
C=$D/captured
check "compiled model: the backward begins after the compiled forward (its frames hold autograd.Function.apply)" sh -c "$M diagnose --json $C/beta-compiled.pickle.xz | python3 -c 'import json,sys; s=json.load(sys.stdin)[\"ranks\"][0][\"steps\"][1]; assert abs(s[\"after_forward_mib\"]-219.097)<0.01, s'"
check "compiled model: sites are the model's lines, not Inductor's generated modules" sh -c "$M summary $C/beta-compiled.pickle.xz | sed -n '/top sites/,/allocator/p' > $T/cs.txt && grep -q 'workloads.py:110 forward' $T/cs.txt && ! grep -q torchinductor $T/cs.txt"
check "CUDA graphs: a graphed backward with no model lines keeps its generated frame" sh -c "$M summary $C/beta-cudagraphs.pickle.xz | grep -q 'temporaries .*torchinductor_root/.*partition_0'"
check "CUDA graphs: the private pool's reserved memory is named, in text and JSON; none without graphs" sh -c "$M summary $C/beta-cudagraphs.pickle.xz | grep -q 'pools       114.0 MiB reserved at the end is in 1 private pool' && $M diagnose --json $C/beta-cudagraphs.pickle.xz | python3 -c 'import json,sys; p=json.load(sys.stdin)[\"ranks\"][0][\"private_pools\"]; assert p==dict(count=1, segments=24, reserved_mib=114.0, allocated_mib=0.0), p' && ! $M summary $C/beta-compiled.pickle.xz | grep -q 'private pool'"
check "two devices of one process: compared as devices, advice about the split" sh -c "$M diagnose $C/beta-two-devices.pickle.xz > $T/td.txt && grep -q '== devices compared' $T/td.txt && grep -q '^== cuda:1  ' $T/td.txt && grep -q 'rank_imbalance: cuda:0 peaks 29.4 MiB (21%) above cuda:1' $T/td.txt && grep -q 'One process spreads the model' $T/td.txt && grep -q 'cross-device findings' $T/td.txt"
check "FSDP2 and FSDP1: sharded parameters count as parameters, and the state is known to be sharded" sh -c "$M diagnose $C/beta-fsdp-rank0.pickle.xz > $T/fs.txt && grep -q 'parameters: 17.2 MiB; state / parameters = 2.01' $T/fs.txt && grep -q 'FSDP already shards it' $T/fs.txt && $M diagnose $C/beta-fsdp1-rank0.pickle.xz > $T/fs1.txt && grep -q 'parameters: 16.7 MiB; state / parameters = 2.08' $T/fs1.txt && grep -q 'FSDP already shards it' $T/fs1.txt"
check "DDP with rank-0 extras: imbalance across the rank files; FSDP2's balanced ranks: none" sh -c "$M diagnose --json $C/beta-ddp-rank0.pickle.xz $C/beta-ddp-rank1.pickle.xz | python3 -c 'import json,sys; d=json.load(sys.stdin); assert [f[\"summary\"] for f in d[\"findings\"]]==[\"rank 0 peaks 165.2 MiB (65%) above rank 1\"], d[\"findings\"]' && $M diagnose --json $C/beta-fsdp-rank0.pickle.xz $C/beta-fsdp-rank1.pickle.xz | python3 -c 'import json,sys; assert json.load(sys.stdin)[\"findings\"]==[]'"
check "two rank files are still ranks" sh -c "$M summary $D/seed-exercise/snap-beta-ddp-rank0.pickle $D/seed-exercise/snap-beta-ddp-rank1.pickle | grep -q '== ranks compared'"
# run directories written by `memdiag run` on 2 x H200 (tests/gpu/memdiag_run.sh)
R=$D/runs
check "real DDP run: rank imbalance from snapshots and captures, once" sh -c "$M diagnose --json $R/ddp | python3 -c 'import json,sys; d=json.load(sys.stdin); assert [f[\"kind\"] for f in d[\"findings\"]]==[\"rank_imbalance\"], d[\"findings\"]; assert sorted(r[\"kind\"] for r in d[\"ranks\"])==[\"capture\",\"capture\",\"snapshot\",\"snapshot\"]'"
check "driver-level tracing on real runs (DDP, expandable segments, a CUDA program alone and through the C API, torch.compile, SIGKILL, torch.profiler) and memdiag run --driver" python3 tests/cli/check_driver.py "$M"
check "real OOM run: the oom finding with the per-process limit" sh -c "$M diagnose $R/oom 2>/dev/null | grep -q 'failed at the process.s limit of 2863.1 MiB'"
check "real HF run: both 32 MiB cuBLAS workspaces found (one from RoPE's a @ b, no matmul frame)" sh -c "$M diagnose --json $R/hf | python3 -c 'import json,sys; d=json.load(sys.stdin); f=[x for x in d[\"ranks\"][0][\"findings\"] if x[\"kind\"]==\"library_workspace\"]; sys.exit(0 if f and f[0][\"bytes\"]==67108864 else 1)'"
check "real HF run: AdamW state 2x, logits at 12 bytes per element, transformers sites" sh -c "$M diagnose $R/hf > $T/hf.txt 2>&1 && grep -q 'AdamW keeps 385.8 MiB of state, 1.99 x' $T/hf.txt && grep -q '12.0 bytes per logit element' $T/hf.txt && grep -q 'modeling_llama.py' $T/hf.txt"
check "real leak under memdiag run: snapshot and capture agree" sh -c "$M diagnose $R/gamma > $T/g.txt 2>&1 && test \$(grep -c 'leak: memory grows by 53.2 MiB every step' $T/g.txt) -eq 2"
for r in ddp gamma hf trainer lightning trainer-dp split stray stray-context hf-split; do
    check "real run $r: each rank's snapshot and capture give the same indicators" sh -c "$M diagnose --json $R/$r | python3 tests/cli/compare_run.py 0.01"
done
# training-loop patterns memdiag was not written against (examples/patterns.py on an H200)
for r in hookleak detachleak cacheleak accum evalloop keepgrads ema warmup lossitem auroc resnet vit rankleak fsdpleak; do
    check "pattern run $r: snapshot and capture give the same indicators" sh -c "$M diagnose --json $D/patterns/$r | python3 tests/cli/compare_run.py 0.01"
done
check "pattern runs: a hook keeping outputs, logits kept detached, a GPU cache and a torchmetrics AUROC are leaks with what they keep named; accumulation, eval, kept grads, EMA, warm-up, loss.item(), ResNet-50, ViT-B/16 and generate() are not, an EMA copy's growth is named as made once; a leak on one DDP rank is that rank's and named across ranks, a hook under FSDP2 leaks on both" python3 tests/cli/check_patterns.py $M $D/patterns
for r in $(ls $D/loops); do
    check "loop run $r: snapshot and capture give the same indicators" sh -c "$M diagnose --json $D/loops/$r | python3 tests/cli/compare_run.py 0.01"
done
check "other loop shapes (examples/loops.py: GPT-2, a GAN, LoRA, accelerate, peft, a GNN): a state-dict copy, validation outputs or logits kept each step are leaks, a GAN's kept batches judged iteration to iteration; a loss summed as a tensor, a growing sequence length, retain_graph are not; LoRA's optimizer state against the trained parameters; a graph held past backward named at the peak" python3 tests/cli/check_loops.py $M $D/loops
# more shapes (examples/shapes.py on an H200); a gradient penalty's forward ends at its
# autograd.grad in the snapshot, at loss.backward() in the capture: that indicator differs
for r in $(ls $D/shapes); do
    skip=; [ "$r" = gp ] && skip=largest_forward_increase_mib
    check "shape run $r: snapshot and capture give the same indicators" sh -c "$M diagnose --json $D/shapes/$r | python3 tests/cli/compare_run.py 0.01 $skip"
done
check "more shapes (examples/shapes.py): a kept view keeps its whole logits, predictions kept every step are a small leak, a gradient hook's kept gradients are made in backward, a request loop's cache leaks call to call; a gradient penalty, a dataset on the GPU, CUDA graphs, torch.compile, a mixture of experts, random lengths, per-epoch metrics and empty_cache() are no leaks" python3 tests/cli/check_shapes.py $M $D/shapes
# memory that changes by design (examples/schedules.py on an H200)
for r in $(ls $D/schedules); do
    check "schedule run $r: snapshot and capture give the same indicators" sh -c "$M diagnose --json $D/schedules/$r 2>/dev/null | python3 tests/cli/compare_run.py 0.01"
done
check "schedules (examples/schedules.py): an OOM caught and retried smaller is a warning, its attempts no steps, the peak named there; an evaluation's peak named; layers unfrozen add memory once; L-BFGS's history explained; none a leak" python3 tests/cli/check_schedules.py $M $D/schedules
# library features (examples/libraries.py on an H200)
for r in $(ls $D/libraries); do
    check "library run $r: snapshot and capture give the same indicators" sh -c "$M diagnose --json $D/libraries/$r | python3 tests/cli/compare_run.py 0.01"
done
check "libraries (examples/libraries.py): a custom autograd.Function keeping its inputs leaks; activations offloaded to the CPU, a side-stream prefetcher, cuDNN's autotuner, the HF Trainer's evaluation do not; the Trainer's gathered evaluation logits are named at the peak" python3 tests/cli/check_libraries.py $M $D/libraries
# data-parallel habits on 2 GPUs (examples/distributed.py on 2 x H200)
for r in $(ls $D/distributed); do
    check "distributed run $r: each rank's snapshot and capture give the same indicators" sh -c "$M diagnose --json $D/distributed/$r | python3 tests/cli/compare_run.py 0.01"
done
check "distributed (examples/distributed.py): DDP's buckets are gradients, ZeroRedundancyOptimizer's state this rank's share (its step counted once), no_sync accumulation's steps the optimizer's; none a leak" python3 tests/cli/check_distributed.py $M $D/distributed
# serving loops (examples/serving.py on an H200): calls compared, no steps
for r in $(ls $D/serving); do
    check "serving run $r: snapshot and capture give the same indicators" sh -c "$M diagnose --json $D/serving/$r | python3 tests/cli/compare_run.py 0.01"
done
check "serving (examples/serving.py): chat sessions' KV caches kept are a leak named as KV caches; sessions dropping theirs, a static cache, requests of random shapes (fragmentation) are not" python3 tests/cli/check_serving.py $M $D/serving
# part of a model trained (examples/finetune.py on an H200)
for r in $(ls $D/finetune); do
    check "finetune run $r: snapshot and capture give the same indicators" sh -c "$M diagnose --json $D/finetune/$r | python3 tests/cli/compare_run.py 0.01"
done
check "finetune (examples/finetune.py): a frozen backbone's head-only state and no_grad peak; SparseAdam beside AdamW stepping back to back, iterations of 2 steps from both files" python3 tests/cli/check_finetune.py $M $D/finetune
check "the seed's gamma keeps whole graphs: many forward allocations a step from many stacks" sh -c "$M diagnose $D/seed-exercise/snap-gamma-small-rank0.pickle | grep -q 'leak: memory grows by 52.4 MiB every step and is never freed: each step.s autograd graph (forward activations) is kept alive' && $M diagnose $D/seed-exercise/snap-gamma-small-rank0.pickle | grep -Eq '^        - [0-9.]+ forward allocations a step stay, from 1[0-9] call stacks: what the layers saved for backward'"
check "real OOM run: snapshot and capture agree, the failing step's peak too (the exit sample)" sh -c "$M diagnose --json $R/oom | python3 tests/cli/compare_run.py 0.01"
check "DataParallel (the HF Trainer on 2 GPUs, one process): cuda:1's steps from cuda:0's annotations, its own capture series, the rank shared" sh -c "$M summary $R/trainer-dp > $T/dp.txt && grep -q \"found from optimizer annotations (cuda:0's; this device has none)\" $T/dp.txt && grep -q '^    step 1              64.0      848.7       64.0       64.0        64.0  1348.7' $T/dp.txt && grep -q '^== rank 0 cuda:1  .*rank0.mdcap  \[phase samples of a further device of the process\]' $T/dp.txt && grep -Eq '^  0 +1 +1348.7 ' $T/dp.txt"
check "DDP, rank 1 keeping 300 MiB on cuda:0: from the snapshots alone, one cross-rank finding naming the stray GPU and its site" sh -c "$M diagnose --json $R/stray/rank0.pickle.xz $R/stray/rank1.pickle.xz | python3 -c 'import json,sys; f=json.load(sys.stdin)[\"findings\"]; assert [(x[\"kind\"], x[\"rank\"], x[\"device\"], x[\"summary\"]) for x in f]==[(\"rank_imbalance\", 1, 0, \"rank 1 holds 300.0 MiB on cuda:0, rank 0\x27s GPU\")] and f[0][\"sites\"][0][\"site\"].endswith(\"workloads.py:233 train\"), f'"
check "with the captures, NVML's figure for that process on cuda:0 (its CUDA context too), the snapshot's sites kept, once" sh -c "$M diagnose --json $R/stray | python3 -c 'import json,sys; f=json.load(sys.stdin)[\"findings\"]; assert len(f)==1 and f[0][\"summary\"]==\"rank 1 holds 910.0 MiB on cuda:0, rank 0\x27s GPU\" and f[0][\"sites\"][0][\"bytes\"]==300<<20 and any(e.startswith(\"NVML: rank 1\x27s process uses 910.0 MiB of cuda:0, 300.0 MiB of it PyTorch\") for e in f[0][\"evidence\"]), f'"
check "the same from the capture files alone (their further-device series)" sh -c "$M diagnose $R/stray/rank0.mdcap $R/stray/rank1.mdcap | grep -q 'rank_imbalance: rank 1 holds 910.0 MiB on cuda:0, rank 0.s GPU'"
check "DDP, rank 1 asking cuda:0 for its free memory: that CUDA context alone (no allocation, no trace) found from NVML's samples" sh -c "$M diagnose $R/stray-context > $T/sc.txt && grep -q 'rank_imbalance: rank 1 holds 518.0 MiB on cuda:0, rank 0.s GPU' $T/sc.txt && grep -q 'NVML: rank 1.s process uses 518.0 MiB of cuda:0, 0.0 MiB of it PyTorch allocations' $T/sc.txt"
check "a transformers model placed by accelerate on cuda:1 while torch's annotations name cuda:0: every step found in the process's events, the idle device called so" sh -c "$M summary $R/hf-split > $T/hs.txt && grep -q \"steps       5, found from optimizer annotations (cuda:0's; this device has none)\" $T/hs.txt && grep -q 'cuda:1 peaks 3560.8 MiB above cuda:0, which holds almost nothing' $T/hs.txt"
check "a model split over two GPUs, annotations on cuda:0 only: cuda:1's steps are the process's, its after-forward where the backward began on cuda:1" sh -c "$M summary $D/synthetic/multi_device.pickle | sed -n '/== cuda:1/,\$p' > $T/md.txt && grep -q \"steps       4, found from optimizer annotations (cuda:0's\" $T/md.txt && test \$(grep -Ec '^    step [0-3] +2.0 +5.0 +3.0 +3.0 +2.0 +6.0' $T/md.txt) -eq 4"
check "the same with cuda:1's history cut short (its ring buffer overflowed): only the step that began after its first event" sh -c "$M summary $D/synthetic/multi_device_truncated.pickle | sed -n '/== cuda:1/,\$p' > $T/mdt.txt && grep -q 'steps       1, found' $T/mdt.txt && grep -Eq '^    step 3 +2.0 +5.0 +3.0 +3.0 +2.0 +6.0' $T/mdt.txt"
check "the stray device is shown, and ranks compare by their own GPUs" sh -c "$M summary $R/stray > $T/st.txt && grep -q '^== ranks compared' $T/st.txt && grep -Eq '^  1 +0 +300.0 .*rank1.pickle.xz  \(a further GPU of the process\)' $T/st.txt"
check "HF Trainer (model.zero_grad, 2 micro-batches, bf16): zero_grad found from frames ends each step" sh -c "$M summary $R/trainer | grep -q '^    step 0             170.8      738.0      408.4      749.9       576.4  1443.4'"
check "gradient accumulation: the second micro-batch's saved tensors count as activations at the peak, not temporaries" sh -c "$M summary $R/trainer/rank0.pickle.xz | grep -q 'live at peak by category: parameters 170.8 MiB, gradients 170.5 MiB, optimizer_state 341.6 MiB, activations 535.6 MiB, library_workspace 64.0 MiB, temporaries 500.0 MiB'"
check "PyTorch Lightning (forward, zero_grad, backward inside optimizer.step's closure): every step found, its phases inside the step" sh -c "$M summary $R/lightning > $T/pl.txt && grep -q 'steps       6, found from optimizer annotations' $T/pl.txt && grep -q '^    step 0             129.1      198.1      322.2      578.5       578.5   706.6' $T/pl.txt && grep -q '^    step 5             578.5      486.4      578.5      578.5       578.5   706.6' $T/pl.txt"
check "PyTorch Lightning without annotations (torch < 2.5): the frames give the same steps and phases" sh -c "$M summary $D/derived/lightning-noann.pickle.xz > $T/pln.txt && grep -q 'steps       6, found from stack frames' $T/pln.txt && grep '^    step ' $T/pln.txt > $T/pln.rows && $M summary $R/lightning/rank0.pickle.xz | grep '^    step ' > $T/pl.rows && cmp -s $T/pln.rows $T/pl.rows"
check "run directories validate against schema 1" sh -c "for r in $R/*; do $M diagnose --json \$r 2>/dev/null | python3 tests/cli/validate_json.py || exit 1; done"
# real captures without annotations: steps from stack frames, same figures
check "frames fallback equals torch's counters (Python stacks)" sh -c "$M diagnose --json $D/derived/gamma-small-py-noann.pickle.xz | python3 tests/cli/compare_samples.py $D/captured/gamma-small-py.json 0.01 && $M summary $D/derived/gamma-small-py-noann.pickle.xz | grep -q 'found from stack frames'"
check "frames fallback on C++ stacks matches the seed JSON's indicators" sh -c "$M diagnose --json $D/derived/snap-beta-small-noann.pickle.xz | python3 -c 'import json,sys; i=json.load(sys.stdin)[\"ranks\"][0][\"indicators\"]; assert abs(i[\"first_step_persistent_change_mib\"]-131.35)<1 and abs(i[\"largest_forward_increase_mib\"]-84.46)<1, i'"
check "frames fallback still names the leak and AdamW" sh -c "$M diagnose $D/derived/gamma-small-py-noann.pickle.xz | grep -q 'leak: memory grows by 53.2' && $M diagnose $D/derived/beta-small-py-noann.pickle.xz | grep -q 'Adam/AdamW keeps'"
# predict: the peak, its breakdown, the verdict; --validate against a real run
check "predict text for a real config" sh -c "$M predict --model $D/predict/qwen2.json --batch 4 --seq 1024 --optimizer adamw --precision bf16-autocast --gpu H100 | grep -q '225609856 parameters' && $M predict --model $D/predict/qwen2.json --batch 4 --seq 1024 --optimizer adamw --precision bf16-autocast | grep -q 'peak .* MiB .* at loss backward'"
check "predict --json: the breakdown sums to the peak, within 1% of the measured step" sh -c "$M predict --model $D/predict/qwen2.json --batch 4 --seq 1024 --optimizer adamw --precision bf16-autocast --json | python3 -c 'import json,sys; d=json.load(sys.stdin); p=d[\"peak_allocated_bytes\"]; assert sum(d[\"breakdown\"].values())==p and d[\"peak_phase\"]==\"loss backward\" and d[\"reserved_high_bytes\"]>=d[\"reserved_bytes\"]>=p and abs(p/13618726400-1)<0.01, p'"
check "predict --json: a seed preset's peak within 1% of the seed exercise's" sh -c "$M predict --model seed:medium --batch 2 --seq 512 --optimizer adamw --json | python3 -c 'import json,sys; d=json.load(sys.stdin); assert abs(d[\"peak_allocated_bytes\"]/2**20/671.71-1)<0.01 and d[\"unsupported\"] is None and d[\"model\"][\"parameters\"]==27550720'"
check "predict --validate: the HF run's peak and floor within 1%, workspace exact" sh -c "$M predict --model $D/predict/hf-run-llama.json --batch 8 --seq 512 --outputs dropped --validate $R/hf --json | python3 -c 'import json,sys; v=json.load(sys.stdin)[\"validation\"]; c={x[\"name\"]:x for x in v[\"components\"]}; assert v[\"step\"]==4 and 0.99<c[\"floor\"][\"ratio\"]<=1 and c[\"library_workspaces\"][\"ratio\"]==1 and 0.99<c[\"peak\"][\"ratio\"]<1.01 and c[\"peak\"][\"measured_bytes\"]==3734831104'"
check "predict --validate text names the run, the step and the peak" sh -c "$M predict --model seed:small --batch 8 --seq 128 --optimizer sgd --validate $D/seed-exercise/snap-alpha-small-rank0.pickle | grep -q 'step 5' && $M predict --model seed:small --batch 8 --seq 128 --optimizer sgd --validate $D/seed-exercise/snap-alpha-small-rank0.pickle | grep -q 'peak .* 155.2 MiB'"
check "predict: the context in the verdict is the probe's, the run's figure less the driver's 615 MiB reservation" sh -c "$M diagnose $R/hf | grep -q 'non_framework: 1367.9 MiB' && $M predict --model seed:small --batch 1 --seq 8 --json | python3 -c 'import json,sys; c=json.load(sys.stdin)[\"cuda_context_bytes\"]/2**20; assert c==806158336/2**20 and abs(1367.9-615-c)<20, c'"
check "predict --calibration: the probe's file replaces the defaults" sh -c "$M predict --model $D/predict/llama.json --batch 1 --seq 128 --calibration $D/predict/calibration-h200.json --json | python3 -c 'import json,sys; assert json.load(sys.stdin)[\"cuda_context_bytes\"]==806158336'"
check "predict --calibration of a bad file: one error line naming it" sh -c "echo '{\"memdiag_calibration\":1,\"loss_bytes_per_logit\":-3}' > $T/cal.json; $M predict --model seed:small --batch 1 --seq 8 --calibration $T/cal.json 2>$T/c.err; test \$? -eq 2 && test \$(wc -l < $T/c.err) -eq 1 && grep -q 'cal.json.*loss_bytes_per_logit' $T/c.err"
check "predict --outputs dropped lowers a loss-backward peak by the logits" sh -c "a=\$($M predict --model $D/predict/llama.json --batch 4 --seq 1024 --json | python3 -c 'import json,sys; print(json.load(sys.stdin)[\"peak_allocated_bytes\"])'); b=\$($M predict --model $D/predict/llama.json --batch 4 --seq 1024 --outputs dropped --json | python3 -c 'import json,sys; print(json.load(sys.stdin)[\"peak_allocated_bytes\"])'); test \$((a - b)) -eq 524288000"
check "predict --lora: peft's trainable count, the frozen base's gradients gone" sh -c "$M predict --model $D/predict/llama.json --batch 2 --seq 1024 --lora 16 --json | python3 -c 'import json,sys; d=json.load(sys.stdin); t=d[\"training\"]; assert t[\"trainable_parameters\"]==319488 and t[\"lora_rank\"]==16 and d[\"static\"][\"gradients\"]<2**21, d'"
check "predict --checkpointing and --attention eager move the peak the measured way" sh -c "for o in '' --checkpointing '--attention eager'; do $M predict --model $D/predict/llama.json --batch 2 --seq 1024 --precision bf16-autocast \$o --json | python3 -c 'import json,sys; print(json.load(sys.stdin)[\"peak_allocated_bytes\"])'; done > $T/three; python3 -c 'import sys; a,g,e=map(int,open(sys.argv[1])); assert g<a<e, (a,g,e)' $T/three"
check "predict --ddp --gradient-as-bucket-view: the DDP run's rank 0 peak within 2%" sh -c "$M predict --model seed:small --batch 8 --seq 256 --ddp --gradient-as-bucket-view --validate $R/ddp --json | python3 -c 'import json,sys; d=json.load(sys.stdin); c={x[\"name\"]:x for x in d[\"validation\"][\"components\"]}; assert 0.98<c[\"peak\"][\"ratio\"]<1.02 and d[\"static\"][\"ddp_buckets\"]>0 and d[\"caveat\"] is None, d'"
check "predict --parallel: zero1 and fsdp below ddp, fsdp's gathered parameters shown, ranks differ under zero1" sh -c "for o in ddp zero1 fsdp; do $M predict --model $D/predict/qwen2.json --batch 2 --seq 1024 --parallel \$o --world 2 --json; done > $T/par && $M predict --model $D/predict/qwen2.json --batch 2 --seq 1024 --parallel zero1 --world 2 --rank 1 --json >> $T/par && python3 -c 'import json,sys; d,z,f,z1=[json.loads(l) for l in open(sys.argv[1])]; p=lambda x: x[\"peak_allocated_bytes\"]; assert p(f)<p(z1)<p(z)<p(d) and f[\"training\"][\"gathered_at_peak\"]>0 and d[\"caveat\"] is None, (p(d),p(z),p(z1),p(f))' $T/par"
check "predict --parallel fsdp without --world, or a rank past it: one line, exit 2" sh -c "$M predict --model $D/predict/qwen2.json --batch 2 --seq 1024 --parallel fsdp 2>$T/w.err; test \$? -eq 2 && grep -q 'world size' $T/w.err && test \$(wc -l < $T/w.err) -eq 1 && ! $M predict --model $D/predict/qwen2.json --batch 2 --seq 1024 --parallel zero1 --world 2 --rank 2 2>/dev/null"
check "predict --stream-layers: without --lora one line and exit 2; with it, one more buffer is one more layer" sh -c "$M predict --model $D/predict/llama.json --batch 1 --seq 2048 --stream-layers 2 2>$T/s.err; test \$? -eq 2 && grep -q 'LoRA' $T/s.err && for k in 2 3; do $M predict --model $D/predict/llama.json --batch 1 --seq 2048 --precision bf16-pure --lora 8 --stream-layers \$k --json; done > $T/st && python3 -c 'import json,sys; a,b=[json.loads(l)[\"static\"][\"weights\"] for l in open(sys.argv[1])]; assert 22e6 < b-a < 25e6, b-a' $T/st"
check "predict --optimizer adamw8bit: refused by name, exit 2" sh -c "$M predict --model $D/predict/llama.json --batch 1 --seq 128 --optimizer adamw8bit 2>$T/o.err; test \$? -eq 2 && grep -q '8-bit optimizers are not modeled' $T/o.err"
check "predict --model of a model directory reads its config.json" sh -c "mkdir -p $T/llama-dir && cp $D/predict/llama.json $T/llama-dir/config.json && $M predict --model $T/llama-dir --batch 1 --seq 128 | grep -q '133182464 parameters' && $M predict --model $T --batch 1 --seq 128 2>&1 | grep -q 'config.json'"
# diff: the same job before and after a change
S=$D/seed-exercise
check "diff: the leak gone, the peak's change in the headline" sh -c "$M diff $S/snap-gamma-medium-rank0.pickle $S/snap-beta-medium-rank0.pickle > $T/d.txt && grep -q '=>  peak allocated 1934.5 -> 671.7 MiB (-1262.8, -65.3%); gone: leak; new: optimizer_state, activations' $T/d.txt && grep -q 'growth between steps *1371.9 *0.0 *-1371.9' $T/d.txt && grep -q 'activations *1646.3 *273.4 *-1372.9' $T/d.txt && grep -q 'gone  \[critical\] leak' $T/d.txt"
check "diff: a file against itself changes nothing, lists no site" sh -c "$M diff $S/snap-alpha-small-rank0.pickle $S/snap-alpha-small-rank0.pickle > $T/d.txt && grep -q 'peak allocated unchanged at 155.2 MiB' $T/d.txt && ! grep -q 'sites at peak' $T/d.txt && ! grep -Eq '^    (gone|new) ' $T/d.txt"
check "diff: seed JSON reports (phase samples)" sh -c "$M diff $S/gamma-medium.json $S/beta-medium.json | grep -q 'gone: leak'"
check "diff: run directories pair snapshots and captures by rank and GPU; the stray GPU's job finding kept, smaller" sh -c "$M diff $R/stray $R/stray-context > $T/d.txt && test \$(grep -c '^== rank' $T/d.txt) -eq 6 && grep -q '== rank 1 (cuda:0, a further GPU of the process), snapshot: only before' $T/d.txt && grep -q 'kept  \[warning\] rank_imbalance (cuda:0): 910.0 -> 518.0 MiB' $T/d.txt && grep -q 'peak (NVML) *910.0 *518.0 *-392.0' $T/d.txt"
check "diff: a site whose line moved with the code is one site (file:199->202)" sh -c "$M diff --top 100 $R/stray/rank0.pickle.xz $R/stray-context/rank0.pickle.xz > $T/d.txt && grep -q 'workloads.py:199->202 loss_of' $T/d.txt && grep -q 'workloads.py:129->132 forward' $T/d.txt && ! grep -q 'workloads.py:276 train' $T/d.txt && test \$(sed -n '/sites at peak/,/findings/p' $T/d.txt | wc -l) -eq 6"
for pair in "$S/snap-gamma-medium-rank0.pickle $S/snap-beta-medium-rank0.pickle" "$R/stray $R/stray-context" "$S/gamma-medium.json $S/beta-medium.json" "$R/oom $R/gamma"; do
    check "diff --json validates: $pair" sh -c "$M diff --json $pair | python3 tests/cli/validate_diff.py"
done
check "diff --fail-above: exit 1 and one line per rank whose peak grew past it; 0 when it fell or stayed within" sh -c "$M diff --fail-above 5 $S/snap-alpha-small-rank0.pickle $S/snap-gamma-small-rank0.pickle >/dev/null 2>$T/fa; test \$? -eq 1 && grep -q 'rank 0 (cuda:0, snapshot): peak allocated grew 190.1%, 155.2 -> 450.2 MiB' $T/fa && test \$(wc -l < $T/fa) -eq 1 && $M diff --fail-above 5 $S/snap-gamma-small-rank0.pickle $S/snap-alpha-small-rank0.pickle >/dev/null && $M diff --fail-above 200 $S/snap-alpha-small-rank0.pickle $S/snap-gamma-small-rank0.pickle >/dev/null"
check "diff with one input, three, or an unreadable one: one line, exit 2" sh -c "for a in '$S/gamma-medium.json' '$S/gamma-medium.json $S/gamma-medium.json $S/gamma-medium.json' '$S/gamma-medium.json $T/none.pickle'; do $M diff \$a 2>$T/e; test \$? -eq 2 && test \$(wc -l < $T/e) -eq 1 || exit 1; done"
# flamegraph: live memory by whole stack
G=$S/snap-gamma-small-rank0.pickle
cat > "$T/mib_sum" <<'EOS'
awk '{s+=$NF} END {printf "%.4f", s/1048576}'
EOS
check "flamegraph --folded: the stacks hold exactly the peak's live bytes, and the end's" sh -c "test \$($M flamegraph --folded $G | sh $T/mib_sum) = \$($M diagnose --json $G | python3 -c 'import json,sys; print(\"%.4f\" % json.load(sys.stdin)[\"ranks\"][0][\"peak\"][\"allocated_mib\"])') && test \$($M flamegraph --folded --at end $G | sh $T/mib_sum) = 412.0552"
check "flamegraph --python: no C++ frame left, the same bytes" sh -c "$M flamegraph --folded --python $G > $T/f.txt && ! grep -q '??:0\|\.cpp:\|\.h:' $T/f.txt && test \$(sh $T/mib_sum < $T/f.txt) = \$($M flamegraph --folded $G | sh $T/mib_sum) && grep -q '^(C++ frames only' $T/f.txt"
check "flamegraph --at oom: what was live when the request failed (the OOM run)" sh -c "$M flamegraph --folded --at oom $R/oom 2>/dev/null | sh $T/mib_sum | grep -qx 2837.6763"
check "flamegraph --at SECONDS: the state at that time" sh -c "test \$($M flamegraph --folded --at 2.5 $G | sh $T/mib_sum) = 33.4248 && test \$($M flamegraph --folded --at 0 $G | wc -l) -eq 0"
check "flamegraph HTML: self-contained, its script draws every frame inside its parent, zooms and searches (node)" sh -c "$M flamegraph -o $T/fg.html $G > $T/fg.out && grep -q 'wrote .*450.2 MiB live at the peak' $T/fg.out && node tests/cli/check_page.js $T/fg.html forward | grep -q 'total_mib 450.2 zoom ok search \"matched'"
check "flamegraph HTML of a real transformers run (C++ frames, deep stacks)" sh -c "$M flamegraph -o $T/hf.html $R/hf >/dev/null 2>&1 && node tests/cli/check_page.js $T/hf.html attention >/dev/null"
check "flamegraph refuses to replace a file without --force" sh -c "! $M flamegraph -o $T/fg.html $G 2>$T/e && grep -q 'exists; pass --force' $T/e && $M flamegraph --force -o $T/fg.html $G >/dev/null"
check "flamegraph errors: no OOM, two snapshots, a capture, a bad --at, no -o: one line, exit 2" sh -c "for a in '--folded --at oom $G' '--folded $R/ddp' '--folded $R/oom/rank0.mdcap' '--folded --at x $G' '$G' '--folded --device 7 $G'; do $M flamegraph \$a 2>$T/e >/dev/null; test \$? -eq 2 && test \$(wc -l < $T/e) -eq 1 || exit 1; done"
# report: one page with everything
check "report: a snapshot's page draws its timeline (6 steps, the peak), the peak's step event by event (its 589 events) and the flame graph (node)" sh -c "$M report -o $T/r.html $G > $T/r.out && grep -q 'wrote .*1 snapshot traces' $T/r.out && grep -q 'leak</span>: memory grows by 52.4 MiB every step' $T/r.html && grep -q 'between_step_growth_mib</td><td class=\"n\">262.2<' $T/r.html && grep -q '<tr><td>step 5</td><td class=\"n\">359.2</td>' $T/r.html && node tests/cli/check_page.js $T/r.html forward | grep -q '^timeline columns 1000 steps 6 in_steps [1-9][0-9]* peak 450.2; timeline columns 589 steps 1 in_steps 589 peak 450.2; flame nodes [0-9]* total_mib 450.2 zoom ok'"
check "report: a run directory (snapshots and captures of 2 ranks, a stray GPU) draws its 11 parts and the cross-rank finding" sh -c "$M report -o $T/rs.html $R/stray >/dev/null && grep -q '<h2>Across ranks</h2>' $T/rs.html && grep -q 'rank 1 holds 910.0 MiB on cuda:0' $T/rs.html && test \$(node tests/cli/check_page.js $T/rs.html | tr ';' '\n' | wc -l) -eq 11"
check "report of a seed JSON report (samples only)" sh -c "$M report -o $T/rj.html $S/gamma-medium.json >/dev/null && node tests/cli/check_page.js $T/rj.html | grep -q '^timeline columns 27 steps 6 in_steps [1-9][0-9]* peak 1934.5$'"
check "report and flamegraph of hostile frame names: shown as text, nothing breaks out of the page or a folded line" sh -c "$M report -o $T/h.html $D/synthetic/hostile_names.pickle >/dev/null && ! grep -q '<script>alert\|<img' $T/h.html && node tests/cli/check_page.js $T/h.html alert | grep -q 'matched 20.0 MiB (100.0%)' && $M flamegraph -o $T/hf2.html $D/synthetic/hostile_names.pickle >/dev/null && ! grep -q '<script>alert\|<img' $T/hf2.html && test \$($M flamegraph --folded $D/synthetic/hostile_names.pickle | wc -l) -eq 1 && test \$($M flamegraph --folded $D/synthetic/hostile_names.pickle | tr -cd ';' | wc -c) -eq 1"
for f in $D/synthetic/*.pickle $D/captured/*.pickle.xz $S/snap-*.pickle; do
    check "report and flamegraph pages draw: $(basename $f)" sh -c "$M report --force -o $T/each.html $f >/dev/null 2>&1 && node tests/cli/check_page.js $T/each.html >/dev/null && $M flamegraph --force -o $T/each-f.html $f >/dev/null 2>&1 && node tests/cli/check_page.js $T/each-f.html >/dev/null"
done
for d in $D/patterns/*/; do # run directories: every rank's snapshot and capture on one page
    check "report of the pattern run $(basename $d) draws" sh -c "$M report --force -o $T/pat.html $d >/dev/null 2>&1 && node tests/cli/check_page.js $T/pat.html >/dev/null"
done
check "pages and exports of every fuzz reproducer: exit 0 or 2, one line on failure, never a crash" sh -c "for f in $D/fuzz-regress/*; do for c in 'report --force -o $T/fz.html' 'export --format csv' 'export --format perfetto' 'export --format torch-snapshot --force -o $T/fz.pickle' 'flamegraph --folded' 'diff $G'; do $M \$c \$f >/dev/null 2>$T/fz.err; rc=\$?; test \$rc -eq 0 -o \$rc -eq 2 || { echo \"\$c \$f: exit \$rc\"; exit 1; }; test \$rc -eq 0 || test \$(wc -l < $T/fz.err) -eq 1 || { echo \"\$c \$f: \$(cat $T/fz.err)\"; exit 1; }; done; done"
check "report refuses to replace a file, needs -o, reads what summary reads: one line, exit 2" sh -c "! $M report -o $T/r.html $G 2>$T/e && grep -q 'exists; pass --force' $T/e && $M report $G 2>$T/e; test \$? -eq 2 && test \$(wc -l < $T/e) -eq 1 && $M report -o $T/x.html $T/none.pickle 2>$T/e; test \$? -eq 2 && test ! -e $T/x.html && ls $T | grep -vq tmp"
# export: the replayed history for other tools
check "export csv: a row per trace entry; its allocated column peaks at the replay's peak and ends at the end's" sh -c "$M export $G --format csv > $T/e.csv && python3 -c 'import csv,sys; r=list(csv.DictReader(open(sys.argv[1]))); assert len(r)==3597, len(r); a=[int(x[\"allocated\"]) for x in r]; assert max(a)==472035840 and a[-1]==432071168, (max(a), a[-1]); assert {x[\"phase\"] for x in r} >= {\"forward\",\"backward\"}; assert {x[\"step\"] for x in r} >= {\"0\",\"5\"}' $T/e.csv && test \$(python3 -c 'print(round(472035840/1048576, 4))') = \$($M diagnose --json $G | python3 -c 'import json,sys; print(round(json.load(sys.stdin)[\"ranks\"][0][\"peak\"][\"allocated_mib\"], 4))')"
check "export csv quotes a field with a comma or a quote (hostile names)" sh -c "$M export $D/synthetic/hostile_names.pickle --format csv | python3 -c 'import csv,sys; r=list(csv.reader(sys.stdin)); assert len(r)==9 and all(len(x)==12 for x in r), r; assert r[1][11].startswith(\"/home/u/<img src=x onerror=alert(2)>,\\\"x\\\".py:7 \"), r[1]'"
check "export perfetto: valid trace JSON, counters keep the peak under --points, steps and phases as slices" sh -c "$M export $G --format perfetto --points 100 -o $T/e.json && python3 -c 'import json,sys; ev=json.load(open(sys.argv[1]))[\"traceEvents\"]; c=[e for e in ev if e[\"ph\"]==\"C\"]; x=[e[\"name\"] for e in ev if e[\"ph\"]==\"X\"]; assert len(c)<=102 and abs(max(e[\"args\"][\"allocated MiB\"] for e in c)-450.168)<0.001, len(c); assert x.count(\"step 5\")==1 and x.count(\"forward\")==6 and x.count(\"backward\")==6, x; ts=[e[\"ts\"] for e in c]; assert ts==sorted(ts)' $T/e.json"
check "export folded is the flame graph's folded stacks" sh -c "$M export $G --format folded --at end > $T/a.txt && $M flamegraph --folded --at end $G | cmp - $T/a.txt"
check "export torch-snapshot of the whole trace: Python's pickle reads it in torch's schema, and memdiag gives the same indicators" sh -c "$M export $G --format torch-snapshot -o $T/t.pickle && python3 -c 'import pickle,sys; d=pickle.load(open(sys.argv[1],\"rb\")); assert set(d)=={\"segments\",\"device_traces\",\"allocator_settings\",\"external_annotations\"}, d.keys(); g=d[\"segments\"][0]; assert {\"device\",\"address\",\"total_size\",\"allocated_size\",\"active_size\",\"requested_size\",\"stream\",\"segment_type\",\"segment_pool_id\",\"is_expandable\",\"frames\",\"blocks\"}<=set(g); b=g[\"blocks\"][0]; assert set(b)=={\"address\",\"size\",\"requested_size\",\"state\",\"frames\"}; e=d[\"device_traces\"][0][1]; assert e[\"action\"]==\"alloc\" and e[\"frames\"][-1][\"name\"]==\"<module>\", e; assert len(d[\"device_traces\"][0])==3597' $T/t.pickle && $M diagnose --json $T/t.pickle | python3 -c 'import json,sys; print(json.load(sys.stdin)[\"ranks\"][0][\"indicators\"])' > $T/t1 && $M diagnose --json $G | python3 -c 'import json,sys; print(json.load(sys.stdin)[\"ranks\"][0][\"indicators\"])' | cmp - $T/t1"
check "export torch-snapshot of a window: replayed from its end state, every event's allocated and reserved are the original's" sh -c "$M export $G --format torch-snapshot --events 1000-2500 -o $T/w.pickle && $M export $G --format csv > $T/full.csv && $M export $T/w.pickle --format csv > $T/win.csv && python3 -c 'import csv,sys; f=list(csv.DictReader(open(sys.argv[1]))); w=list(csv.DictReader(open(sys.argv[2]))); assert len(w)==1501; assert all((r[\"allocated\"],r[\"reserved\"])==(f[1000+i][\"allocated\"],f[1000+i][\"reserved\"]) for i,r in enumerate(w))' $T/full.csv $T/win.csv"
check "export torch-snapshot --steps 2-3: the two steps, as the original has them" sh -c "$M export $G --format torch-snapshot --steps 2-3 -o $T/s.pickle && $M summary $T/s.pickle > $T/s.txt && grep -q 'steps       2, found from optimizer annotations' $T/s.txt && grep -q 'step 0             202.2      254.6      293.0      293.0       254.6   293.7' $T/s.txt && grep -q 'step 1             254.6      306.9      344.0      344.0       306.9   344.8' $T/s.txt"
check "export torch-snapshot of real runs with C++ stacks, a split model (one GPU's trace each) and an OOM: each reads back with that GPU's peak" sh -c "for x in 'hf 0' 'split 0' 'split 1' 'oom 0'; do set -- \$x; f=$R/\$1/rank0.pickle.xz; $M export \$f --format torch-snapshot --device \$2 -o $T/\$1\$2.pickle 2>/dev/null || exit 1; a=\$($M diagnose --json \$f 2>/dev/null | python3 -c 'import json,sys; print([x[\"peak\"][\"allocated_mib\"] for x in json.load(sys.stdin)[\"ranks\"] if x[\"kind\"]==\"snapshot\" and x[\"device\"]==int(sys.argv[1])])' \$2); b=\$($M diagnose --json $T/\$1\$2.pickle | python3 -c 'import json,sys; print([x[\"peak\"][\"allocated_mib\"] for x in json.load(sys.stdin)[\"ranks\"]])'); test \"\$a\" = \"\$b\" || { echo \"\$x: \$a vs \$b\"; exit 1; }; done"
check "export torch-snapshot of a split model without --device: both GPUs' traces and segments, each reads back with its indicators" sh -c "$M export $R/split/rank0.pickle.xz --format torch-snapshot -o $T/sp.pickle 2>/dev/null && $M diagnose --json $R/split/rank0.pickle.xz 2>/dev/null | python3 -c 'import json,sys; print([(x[\"device\"],x[\"indicators\"]) for x in json.load(sys.stdin)[\"ranks\"] if x[\"kind\"]==\"snapshot\"])' > $T/sp1 && $M diagnose --json $T/sp.pickle | python3 -c 'import json,sys; print([(x[\"device\"],x[\"indicators\"]) for x in json.load(sys.stdin)[\"ranks\"]])' | cmp - $T/sp1 && test \$(wc -c < $T/sp1) -gt 200 && ! $M export $R/split/rank0.pickle.xz --format torch-snapshot --events 1-5 -o $T/sp2.pickle 2>$T/e && grep -q 'add --device N' $T/e"
check "export torch-snapshot --steps of multi-GPU runs (a split model, DataParallel): every GPU keeps each step of the window, as the original has it" sh -c "$M export $R/split/rank0.pickle.xz --format torch-snapshot --steps 2-3 -o $T/sp23.pickle 2>/dev/null && $M summary $T/sp23.pickle > $T/sp23.txt && test \$(grep -c 'steps       2, found' $T/sp23.txt) -eq 2 && test \$(grep -c 'step [01]             123.8      149.5      146.4      146.4       123.8   167.1' $T/sp23.txt) -eq 2 && test \$(grep -c 'step [01]             104.6      133.1      120.9      120.9       104.6   137.6' $T/sp23.txt) -eq 2 && $M export $R/trainer-dp/rank0.pickle.xz --format torch-snapshot --steps 2-4 -o $T/dp.pickle 2>/dev/null && test \$($M summary $T/dp.pickle | grep -c 'steps       3, found') -eq 2"
check "export torch-snapshot needs -o; --steps outside the trace, --events past its end: one line, exit 2" sh -c "for a in '--format torch-snapshot $G' '--format torch-snapshot --steps 7-9 -o $T/x.pickle $G' '--format torch-snapshot --events 10-99999 -o $T/x.pickle $G' '--format csv --steps 1-2 $G'; do $M export \$a 2>$T/e >/dev/null; test \$? -eq 2 && test \$(wc -l < $T/e) -eq 1 || exit 1; done && test ! -e $T/x.pickle"
check "export errors: no times for perfetto, a bad format, two snapshots: one line, exit 2" sh -c "for a in '$D/synthetic/v2_1.pickle --format perfetto' '$G --format svg' '$R/ddp --format csv' '$G'; do $M export \$a 2>$T/e >/dev/null; test \$? -eq 2 && test \$(wc -l < $T/e) -eq 1 || exit 1; done && $M export $D/synthetic/v2_1.pickle --format csv | grep -q '^0,-1,segment_alloc,'"
check "probe without torch: exit 2 and one line" sh -c "PATH=/usr/bin:/bin $M probe -o $T/cal-out.json 2>$T/p.err; test \$? -eq 2 && test \$(wc -l < $T/p.err) -eq 1 && grep -q 'torch' $T/p.err && test ! -e $T/cal-out.json"
check "predict: a floor that cannot fit is said so" sh -c "$M predict --model $D/predict/qwen3.json --batch 1 --seq 128 --gpu 1GB | grep -q 'does not fit'"
mkdir "$T/run"; cp $D/seed-exercise/snap-beta-ddp-rank1.pickle $D/seed-exercise/snap-beta-ddp-rank0.pickle "$T/run/"
check "directory of per-rank files, sorted by rank, compared" sh -c "$M summary $T/run | grep -q 'rank 0 peaks 165.2 MiB above rank 1'"
S=$D/seed-exercise
check "several snapshots read at once: the same output as one at a time" sh -c "for t in 1 4 ''; do MEMDIAG_THREADS=\$t $M diagnose --json $S/snap-alpha-small-rank0.pickle $S/snap-beta-ddp-rank0.pickle $S/snap-beta-ddp-rank1.pickle $S/snap-gamma-medium-rank0.pickle $D/alpha-small.pickle.zst $S/gamma-small.json > $T/par\$t.json || exit 1; done; cmp $T/par1.json $T/par4.json && cmp $T/par1.json $T/par.json && python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert len(d[\"ranks\"])==6, len(d[\"ranks\"])' $T/par1.json"
# Files are read ahead on a thread of their own (a compressed one, a plain one
# from 2 MiB) where a CPU is left over (MEMDIAG_THREADS=4 says there are: one
# file, four CPUs); a pipe is read on the reader's thread: both must read
# alike, to the end and where the input is cut short.
python3 bench/gen_snapshot.py 40000 "$T/ahead.pickle"
gzip -c "$T/ahead.pickle" >"$T/ahead.pickle.gz"
head -c 2500000 "$T/ahead.pickle" >"$T/ahead-cut.pickle"
head -c 150000 "$T/ahead.pickle.gz" >"$T/ahead-cut.pickle.gz"
cat >"$T/nosrc" <<'EOF'
sed 's|"source":"[^"]*"||g; s|^memdiag: [^:]*: ||' "$@"
EOF
check "a file read ahead reads as through a pipe (plain, gzip)" sh -c "MEMDIAG_THREADS=4 $M diagnose --json $T/ahead.pickle >$T/a1 && MEMDIAG_THREADS=4 $M diagnose --json $T/ahead.pickle.gz >$T/a2 && cat $T/ahead.pickle | $M diagnose --json /dev/stdin >$T/a3 && sh $T/nosrc $T/a1 >$T/b1 && sh $T/nosrc $T/a2 | cmp $T/b1 - && sh $T/nosrc $T/a3 | cmp $T/b1 - && grep -q '\"events\":40000' $T/a1"
for c in ahead-cut.pickle ahead-cut.pickle.gz; do
    check "a cut file read ahead fails as through a pipe: $c" sh -c "MEMDIAG_THREADS=4 $M summary $T/$c 2>$T/r1; test \$? -eq 2 || exit 1; cat $T/$c | $M summary /dev/stdin 2>$T/r2; test \$? -eq 2 && grep -q truncated $T/r1 && sh $T/nosrc $T/r1 >$T/b1 && sh $T/nosrc $T/r2 | cmp $T/b1 -"
done
mkdir "$T/gap"; cp $D/seed-exercise/snap-beta-ddp-rank0.pickle "$T/gap/snap-rank0.pickle"; cp $D/seed-exercise/snap-beta-ddp-rank1.pickle "$T/gap/snap-rank2.pickle"
check "a missing rank is named" sh -c "$M summary $T/gap 2>&1 >/dev/null | grep -q 'rank 1 has no snapshot'"
check "help" sh -c "$M --help | grep -q summary && $M summary --help | grep -q -- --top"

# bad input: exit 2 and exactly one line naming the file
expect_fail() { # NAME STDERR-PATTERN COMMAND...
    n=$((n + 1)); name=$1; pat=$2; shift 2
    "$@" >"$T/out" 2>"$T/err"; rc=$?
    lines=$(wc -l <"$T/err")
    if [ $rc -eq 2 ] && [ "$lines" -eq 1 ] && grep -q "$pat" "$T/err" && [ ! -s "$T/out" ]; then
        echo "ok $n - $name"
    else
        bad=$((bad + 1)); echo "not ok $n - $name (rc=$rc, $lines lines)"; cat "$T/err"
    fi
}
: >"$T/empty.pickle"
printf 'hello\n' >"$T/text.pickle"
head -c 100000 $D/seed-exercise/snap-alpha-small-rank0.pickle >"$T/cut.pickle"
python3 -c 'import sys; sys.stdout.buffer.write(b"\x80\x04\x95\x1d\x00\x00\x00\x00\x00\x00\x00\x8c\x05posix\x94\x8c\x06system\x94\x93\x94\x8c\x02id\x94\x85\x94R\x94.")' >"$T/evil.pickle"
expect_fail "empty file" "empty.pickle: byte 0: empty file" $M summary "$T/empty.pickle"
expect_fail "text file" "text.pickle: byte 0: not a pickle" $M summary "$T/text.pickle"
python3 -c 'import zipfile; z = zipfile.ZipFile("'$T'/model.pt", "w"); z.writestr("archive/data.pkl", b"\x80\x02}q\x00."); z.close()'
expect_fail "a torch.save archive is named as one" "model.pt: byte 0: not a pickle (first byte 0x50): a zip archive, as torch.save writes" $M summary "$T/model.pt"
printf '[1, 2]' >"$T/list.txt"
expect_fail "JSON through a pipe is named as JSON" "not a pickle (first byte 0x5b): JSON text" sh -c "cat $T/list.txt | $M summary /dev/stdin"
expect_fail "truncated file" "cut.pickle: byte 100000: truncated" $M summary "$T/cut.pickle"
printf '\037\213\010\000\000\000\000\000\000\003garbage-garbage' >"$T/bad.pickle.gz"
head -c 20 $D/alpha-small.pickle.gz >"$T/tiny.pickle.gz"
check "a cut gzip file fails where its data ends" sh -c "n=\$(gzip -dc $T/ahead-cut.pickle.gz 2>/dev/null | wc -c); $M summary $T/ahead-cut.pickle.gz 2>&1 | grep -q \"byte \$n: gzip stream is truncated\""
expect_fail "corrupt gzip data is named, not taken for an empty file" "bad.pickle.gz: byte 0: gzip data is corrupt" $M summary "$T/bad.pickle.gz"
expect_fail "a gzip file cut in its header is named as cut" "tiny.pickle.gz: byte 0: gzip stream is truncated" $M summary "$T/tiny.pickle.gz"
expect_fail "object construction refused" "evil.pickle: byte 28: opcode STACK_GLOBAL" $M diagnose --json "$T/evil.pickle"
expect_fail "missing file" "nope.pickle: no such file" $M summary "$T/nope.pickle"
expect_fail "one bad file among good ones" "empty.pickle" $M summary $D/seed-exercise/snap-alpha-small-rank0.pickle "$T/empty.pickle"
head -c 1700000 $S/snap-beta-medium-rank0.pickle >"$T/cut-late.pickle"
# the empty file fails at once, the long cut one last: the first in order is named
expect_fail "bad files read at once: the first bad one in order is named" "cut-late.pickle: byte [0-9]*: truncated" $M summary $S/snap-alpha-small-rank0.pickle "$T/cut-late.pickle" "$T/empty.pickle" $S/snap-gamma-small-rank0.pickle
expect_fail "unknown option" "unknown option '--frob'" $M summary --frob x
expect_fail "unknown command" "unknown command" $M frobnicate
expect_fail "no paths" "needs at least one" $M diagnose --json
expect_fail "predict without shape" "needs --model, --batch and --seq" $M predict --model seed:small
expect_fail "predict of an unknown GPU" "a known GPU" $M predict --model seed:small --batch 1 --seq 8 --gpu potato
expect_fail "predict --outputs of an unknown kind" "kept or dropped" $M predict --model seed:small --batch 1 --seq 8 --outputs maybe
expect_fail "predict --lora of an unknown module" "unknown module 'foo'" $M predict --model $D/predict/llama.json --batch 1 --seq 8 --lora 8:q_proj,foo
expect_fail "predict --lora of a module gpt2 lacks" "LoRA targets not modeled for gpt2" $M predict --model $D/predict/gpt2.json --batch 1 --seq 8 --lora 8:gate_proj
expect_fail "predict --validate needs a later step than the first" "only the first training step" $M predict --model seed:small --batch 1 --seq 8 --validate bench/data/step-snapshots/gpt2-4x512-sgd-bf16-pure.pickle.xz
check "predict --validate of a truncated snapshot: one error line" sh -c "head -c 5000 $D/seed-exercise/snap-alpha-small-rank0.pickle > $T/cut5k.pickle; $M predict --model seed:small --batch 1 --seq 8 --validate $T/cut5k.pickle 2>$T/v.err; test \$? -eq 2 && test \$(wc -l < $T/v.err) -eq 1 && grep -q 'byte 4861: truncated' $T/v.err"
check "predict --validate of a capture file: the floor and the peak from its samples" sh -c "$M predict --model seed:small --batch 8 --seq 256 --ddp --gradient-as-bucket-view --validate $R/ddp/rank0.mdcap --json | python3 -c 'import json,sys; c={x[\"name\"]:x for x in json.load(sys.stdin)[\"validation\"][\"components\"]}; assert 0.98<c[\"peak\"][\"ratio\"]<1.02 and 0.99<c[\"floor\"][\"ratio\"]<1.01 and c[\"weights\"][\"measured_bytes\"] is None'"
check "predict --validate of a seed report: the seed's own measurements" sh -c "$M predict --model seed:medium --batch 2 --seq 512 --optimizer sgd --validate $D/seed-exercise/alpha-medium.json | grep -q 'peak .*457.5 MiB .*1.000'"
expect_fail "predict --validate of a directory without runs" "no snapshot or capture files" $M predict --model seed:small --batch 1 --seq 8 --validate $D/predict
mkdir "$T/nodata"
expect_fail "directory without snapshots" "no snapshot or capture files" $M summary "$T/nodata"

echo "cli: $((n - bad)) passed, $bad failed"
[ $bad -eq 0 ]
