#!/bin/sh
# Reader benchmark: memdiag summary (read + replay + analysis + report)
# against pickle.load alone (read only; Debian's python3, see PYTHON below) on the
# same files, in one run on one machine. Prints time ratio, MB/s, peak RSS / file size,
# and MB/s on one CPU without memdiag's helper threads (1cpu_MB/s).
#   bench/run.sh [SIZES...]      default: 10000 100000 1000000 5000000
# Files are generated into bench/out/ (ignored by git) and kept for reruns.
set -eu
cd "$(dirname "$0")/.."
M=${MEMDIAG:-build/memdiag} # MEMDIAG=OTHER/memdiag: another build against the same files
[ -x "$M" ] || make -s all
mkdir -p bench/out
sizes=${*:-10000 100000 1000000 5000000}
for n in $sizes; do
    f=bench/out/synthetic-$n.pickle
    [ -s "$f" ] || python3 bench/gen_snapshot.py "$n" "$f"
done
# real H200 snapshots: the shared ones, and two larger ones of transformers
# models trained under `memdiag run` (bench/data/real/README.md)
for x in ../shared/fixtures/bench/*.xz bench/data/real/*.pickle.xz; do
    [ -e "$x" ] || continue
    b=bench/out/$(basename "$x" .xz)
    [ -s "$b" ] || xz -dc "$x" >"$b"
done
# a snapshot with no trace (torch.cuda.memory_snapshot() of a job recording
# nothing) as large as a big job's: big_gamma's state 32 times (16 MB)
[ -s bench/out/big_gamma.pickle ] && [ ! -s bench/out/stateonly-32.pickle ] &&
    python3 bench/state_heavy.py bench/out/big_gamma.pickle bench/out/stateonly-32.pickle 32 >/dev/null
# and one whose blocks carry no stacks (a job that never recorded a
# history): the densest snapshot there is, 56 bytes a block (3.5 MB)
[ -s bench/out/big_gamma.pickle ] && [ ! -s bench/out/stateonly-bare-8.pickle ] &&
    python3 bench/state_heavy.py --bare bench/out/big_gamma.pickle bench/out/stateonly-bare-8.pickle 8 >/dev/null
# and an inference job's (transformers' generate(), 716 169 events: tests/data/patterns)
g=tests/data/patterns/generate/rank0.pickle.xz
[ -s bench/out/generate-llama.pickle ] || xz -dc "$g" >bench/out/generate-llama.pickle
# The baseline interpreter: Debian's python3 where there is one (what a fresh
# machine runs), else python3's real binary, never a wrapper in front of it
# (pyenv's shim is a shell script: ~45 ms more on every start). PYTHON=...
# chooses another.
if [ -z "${PYTHON:-}" ]; then
    if [ -x /usr/bin/python3 ]; then PYTHON=/usr/bin/python3
    else PYTHON=$(python3 -c 'import sys; print(sys.executable)'); fi
fi
echo "baseline: $PYTHON ($("$PYTHON" -c 'import sys; print(sys.version.split()[0])'))"
# peak RSS in KB (GNU time: a fork of a process as small as it is; a
# python parent would count its own pages, the child's before its exec)
rss_kb() {
    if [ -x /usr/bin/time ]; then /usr/bin/time -f "%M" "$@" 2>&1 >/dev/null | tail -n 1
    else echo nan; fi
}
# one CPU and no helper threads (no read-ahead, no prefault): the reading
# speed a single core gives, best of 3; the timer is pinned and memdiag
# inherits it (taskset inside the timing added its own start: 3.5 ms on a
# host where /bin/true takes 1.7)
pin=""; command -v taskset >/dev/null 2>&1 && pin="taskset -c 0"
one_cpu() { MEMDIAG_THREADS=1 MEMDIAG_PREFAULT=0 $pin python3 bench/wall.py 3 "$M" summary "$1"; }
# speedup: the median over rounds of pickle.load's time / memdiag's in the
# same round (bench/pair.py), with the lowest and highest round beside it
printf '%-30s %8s %10s %10s %8s %11s %7s %9s %9s\n' file MB memdiag_s pickle_s speedup range MB/s rss/file 1cpu_MB/s
for f in bench/out/*.pickle; do
    sz=$(stat -c %s "$f")
    rounds=5; [ "$sz" -gt 100000000 ] && rounds=1
    set -- $(python3 bench/pair.py $rounds "$f" "$M" "$PYTHON") || exit 1
    r=$(rss_kb "$M" summary "$f")
    o=$(one_cpu "$f")
    awk -v f="$(basename "$f")" -v sz="$sz" -v m="$1" -v p="$2" -v x="$3" -v lo="$4" -v hi="$5" -v r="$r" -v o="$o" \
        'BEGIN{printf "%-30s %8.1f %10.4f %10.4f %7.1fx %5.1f-%-5.1f %7.0f %9.2f %9.0f\n", f, sz/1e6, m, p, x, lo, hi, sz/1e6/m, r*1024/sz, sz/1e6/o}'
done
