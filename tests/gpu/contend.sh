#!/bin/sh
# Does one reading thread slow while other CPUs are busy, on the device host?
# (bench/contend.c; session 46.) Carry build/contend and build/stages-static
# (static: cc ... bench/stages.c build/libmemdiag.a -static ...) and
# bench/out/shared (as tests/gpu/bench_ab.sh). Results in $OUT/contend.txt: the host's CPU topology,
# then big_gamma's read alone and beside 1-15 busy threads, free or pinned
# to other cores or to CPU 0's hyperthread sibling.
set -u
OUT=${OUT:?set OUT}
C=build/contend F=${F:-bench/out/big_gamma.pickle}
for x in bench/out/shared/*.xz bench/data/real/*.pickle.xz; do
    b=bench/out/$(basename "$x" .xz)
    [ -s "$b" ] || xz -dc "$x" >"$b"
done
python3 bench/gen_snapshot.py 10000 bench/out/synthetic-10000.pickle >/dev/null
python3 bench/gen_snapshot.py 100000 bench/out/synthetic-100000.pickle >/dev/null
python3 bench/state_heavy.py --bare bench/out/big_gamma.pickle bench/out/stateonly-bare-8.pickle 8 >/dev/null
{
    lscpu | grep -E "^(Model name|Thread|Core|Socket|CPU\(s\)|NUMA|CPU max|CPU MHz|L3)"
    lscpu -e=CPU,CORE,SOCKET,NODE 2>/dev/null
    sib=$(cat /sys/devices/system/cpu/cpu0/topology/thread_siblings_list 2>/dev/null)
    echo "cpu0 siblings: $sib"
    # one CPU of every core but CPU 0's
    others=$(lscpu -p=CPU,CORE 2>/dev/null | grep -v '^#' | sort -t, -k2,2n -u |
             awk -F, '$2 != 0 {print $1}' | paste -sd, -)
    echo "other cores: $others"
    mate=$(echo "$sib" | tr ',-' '\n\n' | grep -vx 0 | head -n 1)
    $C "$F" 15 alu free
    [ -n "$others" ] && $C "$F" 15 alu "$others" && $C "$F" 15 mem "$others"
    [ -n "$mate" ] && $C "$F" 15 alu "$mate" && $C "$F" 15 mem "$mate"
    $C burst 21
    all=$(seq -s, 1 $(($(nproc) - 1)))
    $C "$F" 15 alu "$all"
} >"$OUT/contend.txt" 2>&1
# each stage of the read alone (build/stages-static, if carried)
if [ -x build/stages-static ]; then
    for f in big_gamma synthetic-100000 stateonly-bare-8 synthetic-10000 hf-qwen2-ring; do
        [ -s bench/out/$f.pickle ] && echo "== $f" && build/stages-static bench/out/$f.pickle 20
    done >"$OUT/stages.txt" 2>&1
fi
# the trace replayed as it is read (MEMDIAG_FOLLOW=1) on the 4-16 MB files,
# if bench/out/md-new is carried
if [ -x bench/out/md-new ]; then
    for f in synthetic-100000 hf-qwen2-ring big_gamma; do
        F=bench/out/$f.pickle
        echo "== $f"
        python3 bench/ab.py 15 "bench/out/md-new summary $F" "MEMDIAG_FOLLOW=1 bench/out/md-new summary $F"
        for v in "" 1; do
            printf 'rss FOLLOW=%s:' "$v"
            for i in 1 2 3; do
                MEMDIAG_FOLLOW=$v /usr/bin/time -f ' %M' bench/out/md-new summary $F 2>&1 >/dev/null | tail -n 1 | tr -d '\n'
            done
            echo
        done
    done >"$OUT/follow.txt" 2>&1
fi
