#!/bin/sh
# Regenerates src/cli/hot.ld, the order of the static CLI's hot code (see
# scripts/hot_text.py): the functions `memdiag summary` and `diagnose --json`
# execute on the bundled seed-exercise snapshots, by valgrind's callgrind,
# then what the CPU itself runs that valgrind does not show (glibc's string
# functions picked for this CPU, the vDSO's setup), found by the page faults
# of runs of the ordered binary outside the hot section, until none are
# left. Needs valgrind and perf; run after changes to what summary runs.
#   sh scripts/hot_text.sh
# (CC_FLAGS, LINK and the commands are split into words on purpose)
# shellcheck disable=SC2086,SC2046
set -eu
cd "$(dirname "$0")/.."
if ! command -v valgrind >/dev/null || ! command -v perf >/dev/null; then
    echo "hot_text.sh: needs valgrind and perf" >&2
    exit 2
fi
make -s build/memdiag
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
# the Makefile's own link of the CLI (`make cli-link`), relinked here
CC_FLAGS=$(make -s cli-link | sed -n 1p)
LINK=$(make -s cli-link | sed -n 2p)
INPUTS=$(ls tests/data/seed-exercise/*.pickle)
$CC_FLAGS -ffunction-sections -o "$T/md" $LINK -Wl,-Map="$T/md.map"
nm -n "$T/md" >"$T/md.nm"
for f in $INPUTS; do
    for c in summary "diagnose --json"; do
        MEMDIAG_THREADS=1 MEMDIAG_HUGEHEAP=0 MEMDIAG_PREFAULT=0 valgrind -q --tool=callgrind \
            --callgrind-out-file="$T/cg" "$T/md" $c "$f" >/dev/null
        callgrind_annotate --auto=no --threshold=100 "$T/cg" |
            awk '$1 ~ /^[0-9,]+$/ && $2 ~ /^\(/ { sub(/ \[.*$/, ""); n = split($0, a, ":"); print a[n] }'
    done
done | sed "s/'[0-9]*$//" | sort -u >"$T/funcs"
# rounds: the ordered binary's exec faults outside its hot section
for round in 1 2 3 4 5 6; do
    python3 scripts/hot_text.py "$T/md.map" "$T/md.nm" $(cat "$T/funcs") >"$T/hot.ld"
    $CC_FLAGS -ffunction-sections -o "$T/hot" $LINK -Wl,-T,"$T/hot.ld"
    set -- $(readelf -SW "$T/hot" | awk '{ for (i = 1; i < NF; i++) if ($i == ".text.memdiag_hot") print $(i + 2), $(i + 4) }')
    lo=$1 size=$2
    entry=$(nm "$T/hot" | awk '$3 == "_start" { print $1 }')
    for f in $INPUTS; do
        for c in summary "diagnose --json"; do
            MEMDIAG_HUGEHEAP=0 MEMDIAG_PREFAULT=0 perf record -q -e page-faults -c 1 -d \
                -o "$T/pf" "$T/hot" $c "$f" >/dev/null 2>&1
            echo RUN
            perf script -i "$T/pf" -F ip,addr 2>/dev/null
        done
    done >"$T/faults"
    nm -n "$T/hot" >"$T/hot.nm"
    new=$(python3 - "$T/faults" "$T/hot.nm" "$lo" "$size" "$entry" <<'EOF'
import bisect, sys
faults, nmfile, lo, size, entry = sys.argv[1], sys.argv[2], *(int(x, 16) for x in sys.argv[3:])
syms = [(int(p[0], 16), p[2]) for p in (l.split() for l in open(nmfile))
        if len(p) == 3 and p[1] in "tTwWiI"]
addrs = [a for a, _ in syms]
runs, new = [], set()
for line in open(faults):
    p = line.split()
    if p == ["RUN"]:
        runs.append([])
    elif len(p) >= 2 and runs:
        runs[-1].append((int(p[0], 16), int(p[1], 16)))
for run in runs:
    # the first fault in user space is at the entry point: the load address
    base = next((a - entry for a, ip in run if a == ip and ip < 1 << 47), None)
    for a, ip in run:
        off = ip - base if base is not None else -1
        if a >> 12 == ip >> 12 and 0 <= off < 1 << 24 and not lo <= off < lo + size:
            new.add(syms[bisect.bisect_right(addrs, off) - 1][1])
print("\n".join(sorted(new - {"_init", "_fini"})))
EOF
)
    echo "round $round: $(echo "$new" | grep -c . || true) functions outside"
    [ -n "$new" ] || break
    before=$(wc -l <"$T/funcs")
    echo "$new" >>"$T/funcs"
    sort -u -o "$T/funcs" "$T/funcs"
    [ "$(wc -l <"$T/funcs")" -gt "$before" ] || break # none placeable
done
cp "$T/hot.ld" src/cli/hot.ld
echo "src/cli/hot.ld: $(grep -c '^    \*' src/cli/hot.ld) patterns, hot section $((0x$size)) bytes"
