#!/bin/sh
# Does one reading thread slow while other CPUs are busy, on the device host?
# And what do the replay as it is read and the split read give there?
# (bench/contend.c; session 46.) Carry build/contend and build/stages-static
# (static: cc ... bench/stages.c build/libmemdiag.a -static ...),
# bench/out/md-new (a stripped memdiag) and bench/out/shared (as
# tests/gpu/bench_ab.sh). PARTS (default all): contend (contend.txt: the
# host's CPU topology, then big_gamma's read alone and beside 1-15 busy
# threads: multiplying, walking memory or mapping it, pinned to other
# cores or not, and short bursts of parallel work), stages (stages.txt:
# build/stages-static of five files), follow (follow.txt: md-new's summary
# with the trace replayed as it is read, with and without the prefault
# thread, and split, as bench/ab.py times them, and peak RSS).
set -u
OUT=${OUT:?set OUT}
PARTS=${PARTS:-"contend stages follow"}
C=build/contend F=${F:-bench/out/big_gamma.pickle}
sh tests/gpu/bench_files.sh
case $PARTS in *contend*)
{
    uname -r
    lscpu | grep -E "^(Model name|Thread|Core|Socket|CPU\(s\)|NUMA|CPU max|CPU MHz|L3)"
    sib=$(cat /sys/devices/system/cpu/cpu0/topology/thread_siblings_list 2>/dev/null)
    echo "cpu0 siblings: $sib"
    # one CPU of every core but CPU 0's
    others=$(lscpu -p=CPU,CORE 2>/dev/null | grep -v '^#' | sort -t, -k2,2n -u |
             awk -F, '$2 != 0 {print $1}' | paste -sd, -)
    echo "other cores: $others"
    mate=$(echo "$sib" | tr ',-' '\n\n' | grep -vx 0 | head -n 1)
    $C "$F" 15 alu free
    [ -n "$others" ] && $C "$F" 15 alu "$others" && $C "$F" 15 mem "$others" &&
        $C "$F" 15 mm "$others"
    [ -n "$mate" ] && $C "$F" 15 alu "$mate" && $C "$F" 15 mem "$mate"
    $C burst 21
} >"$OUT/contend.txt" 2>&1
esac
# each stage of the read alone
case $PARTS in *stages*)
    for f in big_gamma synthetic-100000 stateonly-bare-8 synthetic-10000 hf-qwen2-ring; do
        echo "== $f" && build/stages-static bench/out/$f.pickle 20
    done >"$OUT/stages.txt" 2>&1
esac
# the trace replayed as it is read (MEMDIAG_FOLLOW=1) on the 4-16 MB files,
# alone and with the prefault thread; the split read, and with one malloc
# arena (its threads' heaps grown by mprotect take the address space's lock)
case $PARTS in *follow*)
    M=bench/out/md-new
    for f in ${FILES:-synthetic-100000 hf-qwen2-ring big_gamma}; do
        F=bench/out/$f.pickle
        echo "== $f"
        python3 bench/ab.py 15 "$M summary $F" "MEMDIAG_FOLLOW=1 $M summary $F" \
            "MEMDIAG_FOLLOW=1 MEMDIAG_PREFAULT=1 $M summary $F" \
            "MEMDIAG_SPLIT=4 $M summary $F" \
            "MEMDIAG_SPLIT=4 GLIBC_TUNABLES=glibc.malloc.arena_max=1 $M summary $F"
        for v in "" "MEMDIAG_FOLLOW=1" "MEMDIAG_FOLLOW=1 MEMDIAG_PREFAULT=1"; do
            printf 'rss %s:' "$v"
            for i in 1 2 3; do
                env $v /usr/bin/time -f ' %M' $M summary $F 2>&1 >/dev/null | tail -n 1 | tr -d '\n'
            done
            echo
        done
    done >"$OUT/follow.txt" 2>&1
esac
