#!/bin/sh
# `memdiag run` end to end without a GPU: a fake torch (tests/python/
# fake_torch) drives memdiag's real Python glue, sitecustomize and capture
# runtime. Checks files, exit codes, OOM evidence, ranks, the window and
# the chaining of a user's own sitecustomize.
M=${MEMDIAG:-build/memdiag}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
FAKE=$(pwd)/tests/python/fake_torch
TRAIN=$(pwd)/tests/python/fake_train.py
n=0; bad=0
ok() { n=$((n + 1)); if "$@" >"$T/log" 2>&1; then echo "ok $n - $DESC"; else bad=$((bad + 1)); echo "not ok $n - $DESC"; cat "$T/log"; fi; }

DESC="a leaking job: capture, snapshots, manifest and the leak in the summary"
ok sh -c "PYTHONPATH=$FAKE $M run -o $T/a -- python3 $TRAIN --leak 30 --sigusr1 >$T/a.out 2>&1 &&
  test -s $T/a/rank0.mdcap && test -s $T/a/rank0.pickle && test -s $T/a/rank0-signal.pickle &&
  grep -q '\"exit_status\": 0' $T/a/manifest.json && grep -q 'leak: memory grows by 30.0 MiB' $T/a.out &&
  grep -q 'rank0.mdcap: complete, 5 steps' $T/a.out"

DESC="indicators from the capture's samples"
ok sh -c "$M diagnose --json $T/a | python3 -c 'import json,sys; d=json.load(sys.stdin); r=[r for r in d[\"ranks\"] if r[\"kind\"]==\"capture\"][0]; i=r[\"indicators\"]; assert abs(i[\"between_step_growth_mib\"]-120)<1e-6 and abs(i[\"first_step_persistent_change_mib\"]-30)<1e-6, i'"

DESC="a loop that calls no module (raw tensors): the capture's baseline is the first optimizer's making, its indicators whole"
ok sh -c "PYTHONPATH=$FAKE $M run -o $T/raw -- python3 $TRAIN --raw >/dev/null 2>&1 &&
  $M diagnose --json $T/raw/rank0.mdcap | python3 -c 'import json,sys; i=json.load(sys.stdin)[\"ranks\"][0][\"indicators\"]; assert i==dict(first_step_persistent_change_mib=0.0, between_step_growth_mib=0.0, largest_forward_increase_mib=200.0, maximum_peak_allocated_mib=300.0), i'"

DESC="two optimizers in turn (a GAN): the capture says which took each step, and a leak is judged iteration to iteration (none step to step)"
ok sh -c "PYTHONPATH=$FAKE $M run -o $T/gan -- python3 $TRAIN --gan --leak 4 --steps 6 >$T/gan.out 2>&1 &&
  grep -q 'rank0.mdcap: complete, 12 steps' $T/gan.out &&
  $M diagnose $T/gan/rank0.mdcap | grep -q 'leak: memory grows by 4.0 MiB every iteration' &&
  PYTHONPATH=$FAKE $M run -o $T/gan0 -- python3 $TRAIN --gan --steps 6 >$T/gan0.out 2>&1 &&
  ! $M diagnose $T/gan0/rank0.mdcap | grep -q 'leak'"

DESC="a skipped optimizer step (GradScaler) still counts: the capture has every step"
ok sh -c "PYTHONPATH=$FAKE $M run -o $T/s -- python3 $TRAIN --skip-step 0 >$T/s.out 2>&1 &&
  grep -q 'rank0.mdcap: complete, 5 steps' $T/s.out && $M summary $T/s/rank0.mdcap | grep -q '^    step 4 '"

DESC="a step of torch.autograd.grad alone (DP-SGD) ends its forward there; one with a backward after it (a gradient penalty), at the backward"
ok sh -c "PYTHONPATH=$FAKE $M run -o $T/gr -- python3 $TRAIN --grad only >/dev/null 2>&1 &&
  $M summary $T/gr/rank0.mdcap | grep -q 'largest_forward_increase_mib *200.0' &&
  PYTHONPATH=$FAKE $M run -o $T/gb -- python3 $TRAIN --grad then-backward >/dev/null 2>&1 &&
  $M summary $T/gb/rank0.mdcap | grep -q 'largest_forward_increase_mib *300.0'"

DESC="a zero_grad between two passes of one step with no GradScaler (sharpness-aware minimization) ends no step"
ok sh -c "PYTHONPATH=$FAKE $M run -o $T/sam -- python3 $TRAIN --sam >$T/sam.out 2>&1 &&
  grep -q 'rank0.mdcap: complete, 5 steps' $T/sam.out &&
  $M summary $T/sam/rank0.mdcap | grep -q 'between_step_growth_mib *0.0'"

DESC="an attack's forward before the model's zero_grad (adversarial training, no zero_grad after the step): that zero_grad closes the step, snapshot and capture alike"
ok sh -c "for k in grad backward; do PYTHONPATH=$FAKE $M run -o $T/atk-\$k -- python3 $TRAIN --attack \$k >$T/atk.out 2>&1 &&
  grep -q 'rank0.mdcap: complete, 5 steps' $T/atk.out &&
  $M summary $T/atk-\$k/rank0.mdcap | grep -q 'first_step_persistent_change_mib *0.0' &&
  $M summary $T/atk-\$k/rank0.mdcap | grep -q 'step 1 *300.0 *150.0' &&
  ! $M summary $T/atk-\$k/rank0.pickle | grep -q 'nan' &&
  $M summary $T/atk-\$k/rank0.mdcap | grep -q 'between_step_growth_mib *0.0' || exit 1; done"

DESC="PyTorch Lightning's closure (forward, zero_grad, backward inside optimizer.step): every phase where it happens"
ok sh -c "PYTHONPATH=$FAKE $M run -o $T/cl -- python3 $TRAIN --closure >$T/cl.out 2>&1 &&
  grep -q 'rank0.mdcap: complete, 5 steps' $T/cl.out && $M summary $T/cl/rank0.mdcap > $T/cl.txt &&
  grep -q '^    step 0           300.0      150.0      150.0       150.0 ' $T/cl.txt &&
  grep -q '^    step 4           300.0      150.0      150.0       150.0 ' $T/cl.txt"

DESC="a further device of the process (DataParallel's replica on cuda:1) gets a series of its own; a visible, unused cuda:2 none"
ok sh -c "FAKE_TORCH_DEVICES=3 PYTHONPATH=$FAKE $M run -o $T/dp -- python3 $TRAIN --replica 80 >$T/dp.out 2>&1 &&
  grep -q '^== rank 0 capture .*rank0.mdcap (cuda:1): complete, 5 steps' $T/dp.out &&
  ! grep -q 'cuda:2' $T/dp.out && $M summary $T/dp/rank0.mdcap >$T/dp.txt &&
  grep -q '^== rank 0 cuda:1 ' $T/dp.txt && grep -Eq '^    step 4 +80\.0 +0\.0 +0\.0 +0\.0 ' $T/dp.txt &&
  $M diagnose --json $T/dp | python3 -c 'import json,sys; r=[(r[\"device\"], r[\"indicators\"][\"largest_forward_increase_mib\"]) for r in json.load(sys.stdin)[\"ranks\"] if r[\"kind\"]==\"capture\"]; assert r==[(0, 200.0), (1, 80.0)], r'"

DESC="a job that names cuda:1 in its tensors and never calls set_device (cuda:0 stays current): the capture's own series is cuda:1"
ok sh -c "FAKE_TORCH_DEVICES=2 PYTHONPATH=$FAKE $M run -o $T/nd -- python3 $TRAIN --device 1 >$T/nd.out 2>&1 &&
  $M diagnose --json $T/nd/rank0.mdcap | python3 -c 'import json,sys; r=[(r[\"device\"], r[\"indicators\"][\"largest_forward_increase_mib\"]) for r in json.load(sys.stdin)[\"ranks\"]]; assert r==[(1, 200.0)], r'"

DESC="an existing output directory is not reused without --force"
ok sh -c "PYTHONPATH=$FAKE $M run -o $T/a -- python3 $TRAIN; test \$? -eq 2"

DESC="--force reuses it"
ok sh -c "PYTHONPATH=$FAKE $M run --force --quiet -o $T/a -- python3 $TRAIN >/dev/null 2>&1"

DESC="out of memory: exit status 3, OOM record and snapshot"
ok sh -c "PYTHONPATH=$FAKE $M run -o $T/b -- python3 $TRAIN --oom-at 2 >$T/b.out 2>&1; test \$? -eq 3 &&
  test -s $T/b/rank0-oom.pickle && grep -q 'oom: out of memory: a request for 1024.0 MiB' $T/b.out &&
  grep -q '\"exit_status\": 1' $T/b/manifest.json"

DESC="the failing step's peak, after the last hook, is in the capture (sampled at exit)"
ok sh -c "$M diagnose --json $T/b | python3 -c 'import json,sys; r=[r for r in json.load(sys.stdin)[\"ranks\"] if r[\"kind\"]==\"capture\"][0]; assert r[\"indicators\"][\"maximum_peak_allocated_mib\"]==500, r[\"indicators\"]'"

DESC="an out-of-memory error the job caught and retried: its exit status, no step for the failed attempt, the OOM a warning"
ok sh -c "PYTHONPATH=$FAKE $M run -o $T/r -- python3 $TRAIN --oom-retry 2 >$T/r.out 2>&1 &&
  grep -q 'finished with status 0 after 1 out-of-memory error it went on from' $T/r.out &&
  $M summary $T/r/rank0.mdcap | grep -q 'complete, status 0, 5 optimizer steps' &&
  $M diagnose $T/r/rank0.mdcap > $T/r.txt && grep -q 'warning. oom: out of memory (caught: the job went on)' $T/r.txt &&
  grep -q '3 steps ran after the last one' $T/r.txt"

DESC="an optimizer that steps another inside its step (ZeroRedundancyOptimizer): one step each"
ok sh -c "PYTHONPATH=$FAKE $M run -o $T/w -- python3 $TRAIN --wrapped --steps 4 >/dev/null 2>&1 &&
  $M summary $T/w/rank0.mdcap | grep -q 'complete, status 0, 4 optimizer steps'"

DESC="the job's own exit status passes through"
ok sh -c "PYTHONPATH=$FAKE $M run -o $T/c -- python3 -c 'import sys; sys.exit(7)'; test \$? -eq 7"

DESC="per-rank files from RANK/WORLD_SIZE, and a missing rank named"
ok sh -c "cat >$T/launch.sh <<'L'
RANK=0 LOCAL_RANK=0 WORLD_SIZE=3 python3 \$1 &
RANK=1 LOCAL_RANK=1 WORLD_SIZE=3 python3 \$1
wait
L
PYTHONPATH=$FAKE $M run -o $T/d -- sh $T/launch.sh $TRAIN >$T/d.out 2>&1 &&
  test -s $T/d/rank0.mdcap && test -s $T/d/rank1.mdcap &&
  grep -q 'rank 2 of 3 has no capture file' $T/d.out"

DESC="a window of steps: history from step 2 for 2 steps, dumped at its end"
ok sh -c "PYTHONPATH=$FAKE $M run --skip-steps 2 --record-steps 2 -o $T/e -- python3 $TRAIN >/dev/null 2>&1 &&
  test -s $T/e/rank0-window.pickle && test ! -e $T/e/rank0.pickle"

DESC="the user's sitecustomize still runs"
mkdir -p "$T/user"
cat >"$T/user/sitecustomize.py" <<'PY'
import os
open(os.environ["MARK"], "w").write("ran")
PY
ok sh -c "MARK=$T/mark PYTHONPATH=$FAKE:$T/user $M run -o $T/f -- python3 $TRAIN >/dev/null 2>&1 &&
  grep -q ran $T/mark && test -s $T/f/rank0.mdcap"

DESC="two processes of the same rank: the second file gets its pid"
ok sh -c "cat >$T/two.sh <<'L'
python3 \$1 &
python3 \$1
wait
L
PYTHONPATH=$FAKE $M run -o $T/i -- sh $T/two.sh $TRAIN >/dev/null 2>&1 && test -s $T/i/rank0.mdcap && ls $T/i | grep -q 'rank0-pid[0-9]*.mdcap' &&
  test -s $T/i/rank0.pickle && ls $T/i | grep -q 'rank0-pid[0-9]*.pickle'"

DESC="a process that starts CUDA and never allocates (a compile worker) leaves no files, takes no name"
ok sh -c "cat >$T/idle.sh <<'L'
python3 -c 'import torch; torch.cuda._lazy_init()'
python3 \$1
L
PYTHONPATH=$FAKE $M run -o $T/l -- sh $T/idle.sh $TRAIN >$T/l.out 2>&1 && test -s $T/l/rank0.mdcap && test -s $T/l/rank0.pickle &&
  ! ls $T/l | grep -q pid && grep -q 'rank0.mdcap: complete, 5 steps' $T/l.out"

DESC="a failing capture never fails the job"
ok sh -c "PYTHONPATH=$FAKE $M run -o $T/j -- env MEMDIAG_NAME='r{bogus}' python3 $TRAIN >$T/j.out 2>&1; test \$? -eq 0 &&
  grep -q 'memdiag: capture stopped: ValueError: unknown placeholder {bogus}' $T/j.out"

DESC="a bad --name template is refused before the job starts"
ok sh -c "$M run --name 'r{bogus}' -o $T/k -- python3 -c 'print(1)' 2>$T/k.err; test \$? -eq 2 && grep -q 'name: a file name template' $T/k.err"

DESC="file name templates"
ok sh -c "PYTHONPATH=$FAKE $M run --name '{run}-r{rank}' -o $T/g -- python3 $TRAIN >/dev/null 2>&1 &&
  test -s $T/g/g-r0.mdcap"

DESC="a command that never imports torch records nothing, cleanly"
ok sh -c "$M run -o $T/h -- python3 -c 'print(1)' | grep -q 'nothing recorded'"

DESC="explicit API (memdiag.start/dump/stop) and the callbacks' window"
ok sh -c "PYTHONPATH=$FAKE:$(pwd)/python MEMDIAG_LIB=$(dirname $M)/libmemdiag_capture.so MEMDIAG_BIN=$M python3 tests/python/explicit_api.py $T/x"

DESC="probe with a torch that sees no GPU: one line, exit 2, no file"
ok sh -c "PYTHONPATH=$FAKE FAKE_TORCH_NO_CUDA=1 $M probe -o $T/cal.json 2>$T/p.err; test \$? -eq 2 &&
  test \$(wc -l < $T/p.err) -eq 1 && grep -q 'no CUDA device' $T/p.err && test ! -e $T/cal.json"

DESC="probe with a torch whose CUDA fails mid-measurement: one line, exit 2"
ok sh -c "PYTHONPATH=$FAKE $M probe -o $T/cal2.json 2>$T/p2.err; test \$? -eq 2 &&
  test \$(wc -l < $T/p2.err) -eq 1 && grep -q 'memdiag probe: ' $T/p2.err && test ! -e $T/cal2.json"

echo "run: $((n - bad)) passed, $bad failed"
[ "$bad" -eq 0 ]
