#!/bin/sh
# Regenerates src/cli/hot.ld, the order of the static CLI's hot code and
# constants (see scripts/hot_text.py): what `memdiag summary` and `diagnose
# --json` touch on the bundled seed-exercise snapshots, a synthetic one and
# two with no trace (tests/data/snapmodes),
# in the order they first touch it, by valgrind's lackey; then what the CPU
# itself runs that valgrind does not show (glibc's string functions picked
# for this CPU, the vDSO's setup), found by the page faults of runs of the
# ordered binary outside the hot code, until none are left. Needs valgrind
# and perf; run after changes to what summary runs (a few minutes).
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
ORDER="-ffunction-sections -fdata-sections"
python3 bench/gen_snapshot.py 10000 "$T/synthetic.pickle"
# and snapshots with no trace, with stacks and without (their own paths:
# the blocks as listed, the live set by block size)
for m in state norecord; do xz -dc "tests/data/snapmodes/$m.pickle.xz" >"$T/$m.pickle"; done
INPUTS="$(ls tests/data/seed-exercise/*.pickle) $T/synthetic.pickle $T/state.pickle $T/norecord.pickle"
# and, for the fault rounds only (too long for lackey), inputs that start
# the helper threads: a compressed file (read and decompressed ahead) and
# a 6 MB one (read ahead, and the heap faulted ahead where faults are
# dear); their code outside the hot code cost a 3.5 MB snapshot 8 windows
# of the kernel's fault-around, 0.5 MB resident. What only they fault is
# laid last (--late): first among the rest it took the small inputs' code
# over one more window.
python3 bench/gen_snapshot.py 100000 "$T/synthetic-100000.pickle"
LARGER="tests/data/alpha-small.pickle.xz $T/synthetic-100000.pickle"
# traced apart: each constant section its own, so that a string read is
# found where its function put it, not merged into another's
$CC_FLAGS $ORDER -o "$T/md" $LINK -Wl,--unique='.rodata.*' -Wl,-Map="$T/md.map"
entry=$(readelf -hW "$T/md" | awk '/Entry point/ { print $4 }')
# (runs as a user's: the CLI's own choices, such as its probe of what a
# page fault costs, are code every run executes)
# lackey's trace, each 16 bytes' first touch in order: "I ADDR" or "D ADDR"
trace() {
    valgrind --tool=lackey \
        --trace-mem=yes --log-fd=3 "$T/md" "$@" 3>&1 >/dev/null 2>/dev/null |
        awk '$1 ~ /^[ILSM]$/ { split($2, a, ","); k = substr(a[1], 1, length(a[1]) - 1)
                               t = $1 == "I" ? "I" : "D"
                               if (!(k in s)) { s[k] = 1; print t, a[1] } }'
}
# TRACES=DIR keeps the traces there, or reuses those it holds: they stand
# as long as the code they traced (the map's build) does not change
TR=${TRACES:-$T}
mkdir -p "$TR"
if ! ls "$TR"/trace.* >/dev/null 2>&1; then
    n=0
    for f in $INPUTS; do
        for c in summary "diagnose --json"; do
            n=$((n + 1))
            trace $c "$f" >"$TR/trace.$n" &
            [ $((n % 2)) -eq 1 ] || wait
        done
    done
    # and the threads beside the replay and analysis (stacks classified,
    # live sets probed), which hosts of three CPUs a file start: their
    # start's code and constants (merged with others' alike) are hot there
    MEMDIAG_ASIDE=1 MEMDIAG_THREADS=4 trace summary "$T/synthetic.pickle" >"$TR/trace.aside"
    wait
fi
: >"$T/also"
: >"$T/late"
# the page faults of one run of the ordered binary, after a line "RUN":
# VARS (the environment, words) then the command's own words
fault_run() {
    vars=$1
    shift
    env $vars perf record -q -e page-faults -c 1 -d -o "$T/pf" "$T/hot" "$@" >/dev/null 2>&1
    echo RUN
    perf script -i "$T/pf" -F ip,addr 2>/dev/null
}
# those of runs on the inputs $1...: summary and diagnose as a user runs
# them here, and summary as where faults are cheap (no helper threads, no
# huge heap)
faults() {
    for f in "$@"; do
        fault_run X=1 summary "$f"
        fault_run X=1 diagnose --json "$f"
        fault_run "MEMDIAG_HUGEHEAP=0 MEMDIAG_PREFAULT=0" summary "$f"
    done
}
# rounds: what the ordered binary faults outside its hot code and constants
# (as a user runs it here, and as where faults are cheap: no helpers)
for round in 1 2 3 4 5 6 7 8 9 10; do
    python3 scripts/hot_text.py "$T/md.map" "$entry" "$TR"/trace.* --also "$T/also" --late "$T/late" >"$T/hot.ld"
    $CC_FLAGS $ORDER -o "$T/hot" $LINK -Wl,-T,"$T/hot.ld" -Wl,-Map="$T/hot.map"
    hentry=$(readelf -hW "$T/hot" | awk '/Entry point/ { print $4 }')
    faults $INPUTS >"$T/faults"
    faults $LARGER >"$T/faults.late"
    python3 scripts/hot_text.py --faults "$T/faults" "$T/hot.map" "$hentry" >"$T/new"
    python3 scripts/hot_text.py --faults "$T/faults.late" "$T/hot.map" "$hentry" |
        grep -vxF -f "$T/new" -f "$T/also" >"$T/new.late" || true
    echo "round $round: $(cat "$T/new" "$T/new.late" | grep -c . || true) sections outside"
    before=$(cat "$T/also" "$T/late" | wc -l)
    cat "$T/new" >>"$T/also"
    cat "$T/new.late" >>"$T/late"
    sort -u -o "$T/also" "$T/also"
    sort -u -o "$T/late" "$T/late"
    grep -vxF -f "$T/also" "$T/late" >"$T/late.only" || true
    mv "$T/late.only" "$T/late"
    [ "$(cat "$T/also" "$T/late" | wc -l)" -gt "$before" ] || break # none left, or none placeable
done
python3 scripts/hot_text.py "$T/md.map" "$entry" "$TR"/trace.* --also "$T/also" --late "$T/late" --final >src/cli/hot.ld
# the final script (--final adds other CPUs' string functions, so no round
# linked it) linked once: that it links, and the hot code's size
$CC_FLAGS $ORDER -o "$T/hot" $LINK -Wl,-T,src/cli/hot.ld
set -- $(readelf -SW "$T/hot" | awk '{ for (i = 1; i < NF; i++) if ($i == ".text.memdiag_hot") print $(i + 2), $(i + 4) }')
size=$2
echo "src/cli/hot.ld: $(grep -c '^    \*' src/cli/hot.ld) patterns, hot code $((0x$size)) bytes"
