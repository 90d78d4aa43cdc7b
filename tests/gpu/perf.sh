#!/bin/sh
# Where memdiag's time goes on the device host, sampled: the host has no perf,
# so this machine's perf travels with its libraries and loader, compressed
# (the carry limit), its Perl and Python scripting libraries replaced by
# stubs (bench/perfkit.sh). Kernel stacks come whole (frame pointers); user
# samples are by symbol only. Carried:
#   sh bench/perfkit.sh             (build/perfkit.tar.xz)
#   xz -9 -k -c build/memdiag >build/memdiag.xz  (unstripped, for symbols)
#   bench/out/shared as for bench_ab.sh
#   run: OUT=... sh tests/gpu/perf.sh, carry build/perfkit.tar.xz,
#        build/memdiag.xz, bench/out/shared
# Results in $OUT/perf-FILE.txt: self time by dso and symbol, then inclusive
# time by symbol (syscalls, faults, exit), of RUNS runs (default 40). FILES:
# the bench files (default three). $OUT/host.txt: kernel and THP settings.
set -u
OUT=${OUT:?set OUT}
T=$(mktemp -d)
tar xJf build/perfkit.tar.xz -C "$T" && K=$T/perfkit
M=$T/memdiag
xz -dc build/memdiag.xz >"$M" && chmod +x "$M"
perf() { "$K/ld-linux-x86-64.so.2" --library-path "$K" "$K/perf" "$@"; }
sh tests/gpu/bench_files.sh >/dev/null 2>&1
{
    nproc; grep -m1 "model name" /proc/cpuinfo; uname -a; date -u
    for f in /sys/kernel/mm/transparent_hugepage/enabled \
             /sys/kernel/mm/transparent_hugepage/defrag \
             /proc/sys/kernel/perf_event_paranoid /proc/sys/kernel/kptr_restrict; do
        printf '%s: %s\n' "$f" "$(cat $f 2>&1)"
    done
    grep -E "MemTotal|MemFree|AnonHugePages" /proc/meminfo
} >"$OUT/host.txt" 2>&1
files=${FILES:-"stateonly-bare-8 synthetic-100000 big_gamma"}
for f in $files; do
    F=bench/out/$f.pickle
    perf record -q -F 20000 -e cpu-clock -g -o "$OUT/$f.data" -- \
        sh -c "for i in \$(seq ${RUNS:-40}); do $M summary $F >/dev/null; done" \
        >"$OUT/perf-$f.txt" 2>&1
    {
        echo "== self, by dso and symbol"
        perf report -i "$OUT/$f.data" --stdio --comms memdiag --no-children \
            --sort dso,sym -g none --percent-limit 0.4
        echo "== inclusive, by symbol"
        perf report -i "$OUT/$f.data" --stdio --comms memdiag --children \
            --sort sym -g none --percent-limit 2
        echo "== kernel callers of clear_page (where the zeroed pages are asked)"
        perf report -i "$OUT/$f.data" --stdio --comms memdiag --no-children \
            --sort sym -g caller,2,callee,function,percent --symbols clear_page_erms,clear_page_rep,clear_page_orig \
            --percent-limit 1
    } >>"$OUT/perf-$f.txt" 2>&1
    rm -f "$OUT/$f.data"
done
head -c 3000 "$OUT/host.txt"
