#!/bin/sh
# Reader benchmark: memdiag summary (read + replay + analysis + report)
# against python3's pickle.load alone (read only) on the same files, in one
# run on one machine. Prints time ratio, MB/s and peak RSS / file size.
#   bench/run.sh [SIZES...]      default: 10000 100000 1000000 5000000
# Files are generated into bench/out/ (ignored by git) and kept for reruns.
set -eu
cd "$(dirname "$0")/.."
M=build/memdiag
[ -x "$M" ] || make -s all
mkdir -p bench/out
sizes=${*:-10000 100000 1000000 5000000}
for n in $sizes; do
    f=bench/out/synthetic-$n.pickle
    [ -s "$f" ] || python3 bench/gen_snapshot.py "$n" "$f"
done
for x in ../shared/fixtures/bench/*.xz; do
    [ -e "$x" ] || continue
    b=bench/out/$(basename "$x" .xz)
    [ -s "$b" ] || xz -dc "$x" >"$b"
done
measure() { # measure CMD... -> "seconds maxrss_kb"
    /usr/bin/time -f "%e %M" "$@" >/dev/null 2>bench/out/time.txt || { cat bench/out/time.txt; exit 1; }
    tail -n 1 bench/out/time.txt
}
printf '%-34s %9s %9s %9s %8s %9s %9s\n' file MB memdiag_s pickle_s speedup MB/s rss/file
for f in bench/out/*.pickle; do
    mb=$(awk -v b="$(stat -c %s "$f")" 'BEGIN{printf "%.1f", b/1e6}')
    best=999999; rss=0
    for i in 1 2 3; do
        set -- $(measure "$M" summary "$f")
        best=$(awk -v a="$best" -v b="$1" 'BEGIN{print (b<a)?b:a}'); rss=$2
    done
    set -- $(measure python3 -c 'import pickle,sys; pickle.load(open(sys.argv[1],"rb"))' "$f")
    py=$1
    awk -v f="$(basename "$f")" -v mb="$mb" -v m="$best" -v p="$py" -v rss="$rss" -v sz="$(stat -c %s "$f")" \
        'BEGIN{m2=(m>0.005)?m:0.005; printf "%-34s %9s %9.2f %9.2f %7.1fx %9.0f %9.2f\n", f, mb, m, p, p/m2, mb/m2, rss*1024/sz}'
done
