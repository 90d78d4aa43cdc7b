#!/bin/sh
# Two builds of memdiag against each other and against pickle.load on the
# device host (no GPU work: its 16 CPUs, fast Python and cheap page faults
# are where memdiag is furthest from 10x). Carried, as the device has
# neither the -dev packages nor ../shared (both builds stripped, static):
#   strip -o bench/out/md-old OLD/memdiag; strip -o bench/out/md-new build/memdiag
#   mkdir -p bench/out/shared && cp ../shared/fixtures/bench/*.xz bench/out/shared/
#   run: OUT=... sh tests/gpu/bench_ab.sh, carry bench/out/md-old, bench/out/md-new,
#        bench/out/shared
# Results in $OUT: host.txt, ab.txt (bench/ab.py, min / median ms of each
# build), pair.txt (bench/pair.py: each build against pickle.load, the
# median speedup and its range), rss.txt (peak RSS KB, 3 runs each). VARIANT (e.g. VARIANT=MEMDIAG_ASIDE=0): the
# new build under that environment too, in ab.txt; several, separated by
# "|" (VARIANT="MEMDIAG_ASIDE=0|MEMDIAG_FOLLOW=walk"). FILES: the bench
# files to time (default all seven).
set -u
OUT=${OUT:?set OUT}
A=bench/out/md-old B=bench/out/md-new
PY=/usr/bin/python3
[ -x "$PY" ] || PY=$(python3 -c 'import sys; print(sys.executable)')
{
    nproc; grep -m1 "model name" /proc/cpuinfo; "$PY" --version; date -u
} >"$OUT/host.txt" 2>&1
sh tests/gpu/bench_files.sh
files=${FILES:-"big_gamma synthetic-100000 hf-qwen2-ring stateonly-bare-8 synthetic-10000 big_beta_all hf-llama-all"}
# the builds to time, a line each: old, new, and new under each VARIANT
builds=$(printf '%s\n%s\n' "$A" "$B"
         [ -n "${VARIANT:-}" ] && printf '%s\n' "$VARIANT" | tr '|' '\n' | sed "s|\$| $B|")
for f in $files; do
    F=bench/out/$f.pickle
    echo "== $f $(stat -c %s "$F")"
    set --
    while IFS= read -r m; do set -- "$@" "$m summary $F"; done <<EOF
$builds
EOF
    python3 bench/ab.py 15 "$@"
done >"$OUT/ab.txt" 2>&1
for f in $files; do
    F=bench/out/$f.pickle
    for m in "$A" "$B"; do
        printf '%s %s ' "$f" "$m"
        python3 bench/pair.py 5 "$F" "$m" "$PY"
    done
done >"$OUT/pair.txt" 2>&1
# peak RSS in KB of each build (and the new one under each VARIANT), 3 runs
# (GNU time: a python parent's child counts the parent's pages before its exec)
rss() { # [VAR=value...] COMMAND...
    [ -x /usr/bin/time ] || { echo n/a; return; }
    vars=
    while [ $# -gt 0 ]; do
        case $1 in *=*) vars="$vars $1"; shift ;; *) break ;; esac
    done
    env $vars /usr/bin/time -f %M "$@" 2>&1 >/dev/null | tail -n 1
}
for f in $files; do
    F=bench/out/$f.pickle
    printf '%s\n' "$builds" | while IFS= read -r m; do
        printf '%s %s:' "$f" "$m"
        for i in 1 2 3; do printf ' %s' "$(rss $m summary "$F")"; done
        echo
    done
done >"$OUT/rss.txt" 2>&1
echo done >>"$OUT/host.txt"
