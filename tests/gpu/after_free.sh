#!/bin/sh
# Does memdiag run slower right after pickle.load than after itself? A
# Firecracker guest may report freed memory to its host, which takes the
# pages back; the next process to touch them then pays the host's faults
# as well as its own. Times a bench file's run (build/pcount, one run:
# wall, task clock, faults, user/system ms) after a run of its own and
# after pickle.load of the same file, with 0 and 3 s between; then
# build/memcost after itself and after 512 MB freed 3 s before. Carried:
#   cc -O2 -static -o build/pcount bench/pcount.c
#   cc -O2 -static -o build/memcost bench/memcost.c
#   strip -o bench/out/md-new build/memdiag; bench/out/shared (bench_ab.sh)
#   run: OUT=... sh tests/gpu/after_free.sh, carry those.
set -u
OUT=${OUT:?set OUT}
M=${M:-bench/out/md-new}
F=bench/out/${FILE:-stateonly-bare-8}.pickle
PY=/usr/bin/python3
[ -x "$PY" ] || PY=python3
sh tests/gpu/bench_files.sh >/dev/null 2>&1
one() { build/pcount 1 "$M" summary "$F" 2>&1 | tail -n 1 | sed "s/^median/$1/"; }
{
    uname -r; cat /sys/kernel/mm/transparent_hugepage/enabled
    ls /sys/bus/virtio/drivers 2>/dev/null | tr '\n' ' '; echo
    grep -E "MemFree|MemTotal" /proc/meminfo
    build/pcount 1 /bin/true | head -n 1
    for s in 0 3; do
        for i in 1 2 3 4 5 6; do
            "$M" summary "$F" >/dev/null; sleep "$s"
            one "self+${s}s"
            "$PY" -c 'import pickle,sys; pickle.load(open(sys.argv[1],"rb"))' "$F"; sleep "$s"
            one "pkl+${s}s "
        done
    done
    echo "== memcost after itself"
    build/memcost 5 >/dev/null; build/memcost 5
    echo "== memcost 3 s after 512 MB freed"
    "$PY" -c 'b = bytearray(512 << 20); b[::4096] = b"x" * len(b[::4096])'; sleep 3
    build/memcost 5
} >"$OUT/after_free.txt" 2>&1
cat "$OUT/after_free.txt"
