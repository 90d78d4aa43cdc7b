#!/bin/sh
# The reader benchmark on the device host (no GPU work: its CPUs and page
# faults differ from the development machine's, and bench/RESULTS.md keeps
# both). The static CLI and the shared H200 snapshots (compressed: the tree
# and what is carried must fit in 64 MiB) are carried, as the device has
# neither the -dev packages nor ../shared:
#   mkdir -p bench/out/shared && cp ../shared/fixtures/bench/*.xz bench/out/shared/
#   run: OUT=... sh tests/gpu/bench_host.sh, carry build/memdiag, bench/out/shared
# Results in $OUT: host.txt, run.txt (bench/run.sh), seed.txt (the seed
# exercise's snapshots, bench/pair.py), ab.txt (memdiag's own switches),
# rss.txt (peak RSS on the seed exercise's snapshots; OLD=another build's
# too, carried stripped beside it: `strip -o bench/out/md-old OLD/memdiag`).
# M=bench/out/md-new (a stripped build/memdiag) where the tree is too big for both.
set -u
OUT=${OUT:?set OUT}
M=${M:-build/memdiag}
[ -x "$M" ] || { echo "no $M: carry build/memdiag" >"$OUT/host.txt"; exit 1; }
export MEMDIAG="$M" # bench/run.sh's
{
    nproc
    grep -m1 "model name" /proc/cpuinfo
    /usr/bin/python3 --version 2>&1 || python3 --version
    cat /sys/kernel/mm/transparent_hugepage/enabled 2>/dev/null
    date -u
} >"$OUT/host.txt" 2>&1
mkdir -p bench/out
for x in bench/out/shared/*.xz; do
    [ -e "$x" ] && xz -dc "$x" >"bench/out/$(basename "$x" .xz)"
done
PY=/usr/bin/python3
[ -x "$PY" ] || PY=$(python3 -c 'import sys; print(sys.executable)')
timeout 300 sh bench/run.sh 10000 100000 >"$OUT/run.txt" 2>&1
for f in tests/data/seed-exercise/snap-*.pickle; do
    printf '%s ' "$(basename "$f")"
    python3 bench/pair.py 5 "$f" "$M" "$PY"
done >"$OUT/seed.txt" 2>&1
# what memdiag's helpers do here: threads, prefault, the huge heap
{
    for f in tests/data/seed-exercise/snap-gamma-medium-rank0.pickle \
             bench/out/synthetic-10000.pickle bench/out/synthetic-100000.pickle \
             bench/out/big_gamma.pickle; do
        echo "== $f"
        python3 bench/ab.py 21 "/bin/true" "$M summary $f" "MEMDIAG_THREADS=1 $M summary $f" \
            "MEMDIAG_PREFAULT=0 $M summary $f" "MEMDIAG_HUGEHEAP=1 $M summary $f"
    done
} >"$OUT/ab.txt" 2>&1
for f in tests/data/seed-exercise/snap-*.pickle bench/out/synthetic-10000.pickle; do
    for b in "$M" ${OLD:-}; do
        printf '%s %s %s %s\n' "$(basename "$f")" "$(stat -c %s "$f")" "$b" \
            "$(for k in 1 2 3; do /usr/bin/time -f %M "$b" summary "$f" 2>&1 >/dev/null | tail -n 1; done | sort -n | head -n 1)"
    done
done >"$OUT/rss.txt" 2>&1
echo done >>"$OUT/host.txt"
