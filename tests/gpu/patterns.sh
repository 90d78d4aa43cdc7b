#!/bin/sh
# memdiag's diagnosis on training-loop patterns it was not written against
# (examples/patterns.py: torch's own TransformerEncoder; device machine).
# Needs build-dev/ (see tests/gpu/memdiag_run.sh). Each case runs under
# `memdiag run`; the leak cases must be diagnosed as a leak, the others
# must not be. ONLY="case ..." runs only those; SCRIPT=examples/loops.py
# runs that script's cases (other loop shapes: GPT-2, a GAN, LoRA, ...),
# SCRIPT=examples/infer.py inference loops (generate(), no training step),
# SCRIPT=examples/shapes.py more habits (views kept, gradient hooks, CUDA
# graphs, torch.compile, a gradient penalty, mixture of experts, ...),
# SCRIPT=examples/schedules.py memory that changes by design (an OOM retried
# with a smaller batch, a larger evaluation, layers unfrozen, L-BFGS),
# SCRIPT=examples/libraries.py library features (activations offloaded to the
# CPU, a side-stream prefetcher, cuDNN's autotuner, the HF Trainer's evaluation),
# SCRIPT=examples/distributed.py data-parallel habits on 2 GPUs (ZeRO-1, DDP's
# bucket views, no_sync accumulation), SCRIPT=examples/serving.py serving loops
# (a static KV cache, requests of random shapes, chat sessions),
# SCRIPT=examples/finetune.py part of a model trained (a frozen backbone, sparse
# embeddings with SparseAdam beside AdamW), SCRIPT=examples/growth.py memory that
# grows by design (losses summed before one backward, layers added to the optimizer),
# SCRIPT=examples/resume.py mid-run changes (a checkpoint loaded onto the GPU, a cast
# to bf16, CUDA graphs over several batch sizes), SCRIPT=examples/rlhf.py DPO and a
# rollout loop (generate() then a training step), SCRIPT=examples/tensorparallel.py
# tensor parallelism on 2 GPUs, SCRIPT=examples/fsdp.py FSDP2's mixed precision and
# CPU offload on 2 GPUs, SCRIPT=examples/vision.py memory that varies with the data
# (Mask R-CNN on random sizes and boxes, multi-scale training),
# SCRIPT=examples/research.py methods from papers (SAM, MAML, DP-SGD, MoCo, a
# GradScaler's skipped steps, a capped process, two streams, Hessian products),
# SCRIPT=examples/practice.py everyday practice (the optimizer step's peak, a C
# extension's cudaMalloc, pruning, a CLIP loss, attention weights returned),
# SCRIPT=examples/pipeline.py work split over 2 GPUs (a model split over two
# devices in one process, DDP's gathered contrastive keys), SCRIPT=examples/interop.py
# PyTorch beside JAX, CuPy and torchdiffeq in one process, SCRIPT=examples/habits.py
# habits of notebooks (fp32 master weights, a stale optimizer, a sweep keeping models),
# SCRIPT=examples/sequence.py sequence models (truncated BPTT, T5),
# SCRIPT=examples/dataparallel.py more data parallelism on 2 GPUs (checkpointing under
# DDP and FSDP2, uneven batches, unused parameters), SCRIPT=examples/amp.py fp16
# through accelerate, Lightning and the HF Trainer, the first steps skipped,
# SCRIPT=examples/inference.py more inference loops (growing batches, beams, an index),
# SCRIPT=examples/optimizers.py optimizer state off the textbook multiple,
# SCRIPT=examples/sharing.py a GPU shared with other processes (another job,
# DataLoader workers using CUDA, a sweep's processes on one GPU),
# SCRIPT=examples/launch.py memory the set-up decides (max-autotune's first step,
# a GPU held by a large allocation at the start, DDP ranks that never chose a GPU),
# SCRIPT=examples/lazy.py parameters made during training (LazyLinear, a model built
# at the loop's first iteration), SCRIPT=examples/params.py where parameters come from
# (an ensemble's stacked weights, causal-mask buffers, a model built on the meta device),
# SCRIPT=examples/firststep.py the first optimizer step running out of memory, Muon
# beside AdamW, a Lion optimizer written in the script, SCRIPT=examples/checkpoints.py
# checkpoints on 2 GPUs (FSDP2's full state dict every 3 steps, a resume rank 0 loads),
# SCRIPT=examples/allocconf.py the allocator's settings (max_split_size_mb,
# roundup_power2_divisions, garbage_collection_threshold) and a MemPool,
# SCRIPT=examples/ondevice.py weights made on the GPU itself (a torch.device context,
# raw tensors, from_pretrained(device_map="cuda"), Fabric's init_module),
# SCRIPT=examples/attention.py attention matrices kept for backward (eager
# attention in transformers, nanoGPT's written-out attention) beside SDPA,
# SCRIPT=examples/loading.py ways weights reach the GPU (set_default_device, a
# safetensors checkpoint loaded onto the GPU and kept, load_state_dict(assign=True)),
# SCRIPT=examples/nograd.py inference and evaluation without no_grad (graphs recorded
# for nothing, outputs and losses kept with their graphs), SCRIPT=examples/inferctl.py
# the same inference under no_grad and inference_mode (controls),
# SCRIPT=examples/dpsingle.py nn.DataParallel on 2 GPUs of one process (the
# logits gathered onto cuda:0, or only the losses), SCRIPT=examples/teacher.py
# distillation with the teacher left trainable (its gradients kept) and its control,
# SCRIPT=examples/recover.py an out-of-memory error retried inside the except block,
# after it with the error kept, and after it (the control), SCRIPT=examples/mistakes.py
# loop mistakes memory shows (an optimizer made every step, and its control),
# SCRIPT=examples/tiny.py a dataset kept on the GPU as 200 000 small tensors, and packed,
# SCRIPT=examples/variants.py the OOM retry, teacher and optimizer cases written another way,
# SCRIPT=examples/compiled.py a compiled optimizer step, FlexAttention,
# SCRIPT=examples/outlier.py a long batch at step 5 running out of memory (fatal, or skipped),
# SCRIPT=examples/leakoom.py leaks that end in an out-of-memory error,
# SCRIPT=examples/hfpeft.py the HF Trainer with peft's LoRA (or fully) and gradient checkpointing,
# SCRIPT=examples/domains.py training outside language modeling (an exact GP, wav2vec 2.0, a latent U-Net),
# SCRIPT=examples/metrics.py metrics computed in the step (a second forward kept, a gradient norm by torch.cat),
# SCRIPT=examples/builds.py large tensors the training code builds (pairwise distances by broadcasting, a per-head mask),
# SCRIPT=examples/accumulate.py gradient accumulation keeping each micro-batch's logits,
# SCRIPT=examples/twoviews.py steps that run a model twice for the loss (R-Drop, a mean teacher, SimCLR),
# SCRIPT=examples/adversarial.py adversarial training (PGD by autograd.grad or backward, free training),
# SCRIPT=examples/evalzero.py validation between an optimizer step and the next zero_grad (predictions kept or not),
# SCRIPT=examples/gradnone.py gradients cleared by hand (p.grad = None) or never,
# SCRIPT=examples/carryover.py one autocast around the whole loop (its cast cache kept) and controls,
# SCRIPT=examples/graphnets.py graph networks trained full-batch (GAT's per-edge messages, GCN, GCN on a sparse adjacency),
# SCRIPT=examples/experts.py mixtures of experts from transformers (router logits kept, counted, eager experts, Mixtral's aux loss).
# Results in $OUT: patterns.tar.xz (run directories, diagnoses) and log.
set -u
OUT=${OUT:?set OUT}
M=$(pwd)/build-dev/memdiag
W=$(mktemp -d)
SCRIPT=${SCRIPT:-examples/patterns.py}
case $SCRIPT in
*infer.py) all="gen genleak" ;;
*optimizers.py) all="amsgrad optswitch rmsmoment" ;;
*sharing.py) all="neighbour workers sweep" ;;
*launch.py) all="autotune prealloc samegpu" ;;
*lazy.py) all="lazy buildfirst" ;;
*params.py) all="ensemble buffers metainit" ;;
*firststep.py) all="optoom muon lion" ;;
*checkpoints.py) all="fsdpsave rank0load" ;;
*allocconf.py) all="maxsplit roundup gcthresh mempool" ;;
*ondevice.py) all="ctxdevice handmade hfload fabric" ;;
*attention.py) all="hfeager hfsdpa nanogpt" ;;
*loading.py) all="defaultdev safekept assignload" ;;
*nograd.py) all="gradinfer gradinferleak pplleak" ;;
*inferctl.py) all="nogradinfer inferkeep" ;;
*dpsingle.py) all="dp dploss" ;;
*teacher.py) all="teachergrad teachernograd" ;;
*recover.py) all="retryinside retrykeep retryoutside" ;;
*mistakes.py) all="optinloop optonce outattn" ;;
*tiny.py) all="tinylabels packed" ;;
*variants.py) all="retryrecurse hfteacher optperepoch" ;;
*compiled.py) all="compiledopt flexattn" ;;
*outlier.py) all="longbatch longskip" ;;
*leakoom.py) all="logitsoom graphoom" ;;
*hfpeft.py) all="trainerlora trainerfull" ;;
*domains.py) all="gp audio unet" ;;
*metrics.py) all="dblfwd dblfwdng gradcat" ;;
*builds.py) all="pairdist cdist bigmask causal" ;;
*accumulate.py) all="accumkeep accumargmax" ;;
*twoviews.py) all="rdrop meanteacher simclr" ;;
*adversarial.py) all="pgd pgdbwd free" ;;
*evalzero.py) all="evalkeep evaldrop" ;;
*gradnone.py) all="gradnone gradkeep" ;;
*carryover.py) all="autocastloop autocastfp16 autocaststep autocastaccum" ;;
*graphnets.py) all="gat gcn gcnsparse" ;;
*experts.py) all="routerkeep routercount expertseager mixtralaux" ;;
*inference.py) all="growbatch beam embedleak" ;;
*amp.py) all="accelfp16 plfp16 trainerfp16" ;;
*dataparallel.py) all="ddpckpt fsdpckpt uneven unused" ;;
*sequence.py) all="tbptt t5" ;;
*habits.py) all="masterfp32 twomodels sweepleak" ;;
*interop.py) all="jaxgrab cupypool cupyleak odeint" ;;
*pipeline.py) all="pipe pipeleak gather" ;;
*practice.py) all="optpeak optfused extleak prune clip mhaweights" ;;
*research.py) all="sam maml dpsgd bestkeep bestleak moco scaler fraction twostreams hvp" ;;
*vision.py) all="detection multiscale" ;;
*fsdp.py) all="fsdpmp fsdpoffload" ;;
*tensorparallel.py) all="tp" ;;
*rlhf.py) all="dpo rollout" ;;
*resume.py) all="resume todtype cgshapes" ;;
*growth.py) all="accumgraph addgroups" ;;
*finetune.py) all="frozen sparseemb" ;;
*serving.py) all="staticcache dynserve sessions sessionleak" ;;
*distributed.py) all="zero1 bucketview nosync" ;;
*libraries.py) all="offload prefetch cudnnbench hfeval customfn" ;;
*schedules.py) all="oomretry evalpeak unfreeze replaycap lbfgs" ;;
*shapes.py) all="viewleak smallleak gradhookleak serveleak gp gpudata graphs compiled epochs moe bucketseq emptycache serve" ;;
*loops.py) all="ckptleak evalleak ganleak wganleak zgleak accelleak evalevery totalloss gpt2 gpt2ckpt peftlora distill gnn gan lora growseq retain sgd adafactor" ;;
*) all="hookleak detachleak cacheleak accum evalloop keepgrads ema warmup lossitem auroc resnet vit generate rankleak fsdpleak" ;;
esac
log=$OUT/patterns.log
for c in ${ONLY:-$all}; do
    py=python3
    case $c in rankleak|fsdpleak|zero1|bucketview|nosync|tp|fsdpmp|fsdpoffload|gather|ddpckpt|fsdpckpt|uneven|unused|samegpu|fsdpsave|rank0load) py="python3 -m torch.distributed.run --nproc-per-node 2" ;; esac
    PYTHONUNBUFFERED=1 timeout 300 "$M" run -o "$W/$c" -- $py "$SCRIPT" --case "$c" \
        >"$W/$c.out" 2>&1
    echo "== $c: exit $?" >>"$log"
    tail -n 12 "$W/$c.out" >>"$log"
    "$M" diagnose --json "$W/$c" >"$W/$c.diagnosis.json" 2>>"$log"
    "$M" diagnose "$W/$c" >"$W/$c.diagnosis.txt" 2>>"$log"
done
python3 - "$W" >>"$log" 2>&1 <<'PY'
import json, os, sys
W = sys.argv[1]
# the ranks that leak in each case (none: every other case)
leaks = {"hookleak": {0}, "detachleak": {0}, "cacheleak": {0}, "auroc": {0}, "rankleak": {1},
         "fsdpleak": {0, 1}, "ckptleak": {0}, "evalleak": {0}, "ganleak": {0}, "wganleak": {0}, "zgleak": {0}, "accelleak": {0}, "evalevery": {0}, "genleak": {0},
         "viewleak": {0}, "smallleak": {0}, "gradhookleak": {0}, "serveleak": {0},
         "customfn": {0}, "sessionleak": {0}, "bestleak": {0}, "extleak": {0}, "pipeleak": {0}, "cupyleak": {0}, "sweepleak": {0}, "embedleak": {0}, "gradinfer": {0}, "gradinferleak": {0}, "pplleak": {0}, "nogradinfer": {0}, "inferkeep": {0}, "logitsoom": {0}, "evalkeep": {0}, "evaldrop": {0}, "routerkeep": {0}}
bad = 0
for f in sorted(os.listdir(W)):
    if not f.endswith(".diagnosis.json"):
        continue
    case = f.split(".")[0]
    d = json.load(open(os.path.join(W, f)))
    leaking = {r["rank"] for r in d["ranks"] for x in r["findings"] if x["kind"] == "leak"}
    kinds = [x["kind"] for r in d["ranks"] for x in r["findings"]]
    ok = leaking == leaks.get(case, set())
    bad += not ok
    print(f"{'PASS' if ok else 'FAIL'} {case}: leak on ranks {sorted(leaks.get(case, set()))} "
          f"expected, found {sorted(leaking)}; findings {sorted(set(kinds))}; "
          f"cross-rank {[x['summary'] for x in d['findings']]}")
    for r in d["ranks"]:
        print(f"   {r['source']} {r['indicators']}")
print(f"pattern checks: {'all passed' if not bad else f'{bad} failed'}")
PY
tar -cJf "$OUT/patterns.tar.xz" -C "$W" .
cat "$log"
