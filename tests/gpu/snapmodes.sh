#!/bin/sh
# Snapshots written with each of torch's recording modes (examples/snapmodes.py:
# enabled="state", no recording, torch.cuda.memory_snapshot()'s bare list,
# context="alloc", stacks="python", an out-of-memory observer's dump), read back
# by memdiag on the device machine. Needs build-dev/memdiag (tests/gpu/memdiag_run.sh).
# Results in $OUT: snapmodes.tar.xz (the snapshots, xz'd, and what memdiag said) and log.
set -u
OUT=${OUT:?set OUT}
M=$(pwd)/build-dev/memdiag
W=$(mktemp -d)
log=$OUT/snapmodes.log
for c in ${ONLY:-state norecord public allocctx pystacks oomdump}; do
    PYTHONUNBUFFERED=1 timeout 300 python3 examples/snapmodes.py --case "$c" --out "$W/$c.pickle" \
        >"$W/$c.out" 2>&1
    echo "== $c: exit $?" >>"$log"
    tail -n 5 "$W/$c.out" >>"$log"
    "$M" summary "$W/$c.pickle" >"$W/$c.summary.txt" 2>>"$log"
    "$M" diagnose "$W/$c.pickle" >"$W/$c.diagnosis.txt" 2>>"$log"
    "$M" diagnose --json "$W/$c.pickle" >"$W/$c.diagnosis.json" 2>>"$log"
    xz -9e -T2 "$W/$c.pickle"
done
tar -cJf "$OUT/snapmodes.tar.xz" -C "$W" .
cat "$log"
