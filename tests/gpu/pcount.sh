#!/bin/sh
# Where memdiag's time goes on the device host, which has no perf: each
# bench file's runs counted by build/pcount (task clock, faults, context
# switches, and user/kernel cycles and instructions where the guest has a
# PMU), with its helper threads and with MEMDIAG_THREADS=1; /bin/true and
# `memdiag --version` for the process's own cost. Carried (static builds):
#   cc -O2 -static -o build/pcount bench/pcount.c
#   strip -o bench/out/md-new build/memdiag
#   mkdir -p bench/out/shared && cp ../shared/fixtures/bench/*.xz bench/out/shared/
#   run: OUT=... sh tests/gpu/pcount.sh, carry build/pcount, bench/out/md-new,
#        bench/out/shared
# Results in $OUT/pcount.txt. FILES: the bench files (default three).
set -u
OUT=${OUT:?set OUT}
M=bench/out/md-new
sh tests/gpu/bench_files.sh >/dev/null 2>&1
files=${FILES:-"stateonly-bare-8 synthetic-10000 big_gamma"}
{
    nproc; grep -m1 "model name" /proc/cpuinfo; date -u
    for f in $files; do
        echo "== $f $(stat -c %s bench/out/$f.pickle)"
        build/pcount 15 "$M" summary "bench/out/$f.pickle" 2>&1 | sed -n '1p;$p'
        echo "-- MEMDIAG_THREADS=1"
        MEMDIAG_THREADS=1 build/pcount 15 "$M" summary "bench/out/$f.pickle" 2>&1 | tail -n 1
    done
    echo "== /bin/true"
    build/pcount 9 /bin/true 2>&1 | tail -n 1
    echo "== memdiag --version"
    build/pcount 9 "$M" --version 2>&1 | tail -n 1
} >"$OUT/pcount.txt" 2>&1
cat "$OUT/pcount.txt"
