#!/bin/sh
# Second capture batch: the retained-graph leak with Python-only stacks,
# complete and through an overflowing ring buffer. Same layout as run.sh.
set -u
OUT=${OUT:?set OUT}
W=$(mktemp -d)
log=$OUT/log
for spec in "gamma-small-py --case gamma --stacks python" \
            "gamma-small-ring --case gamma --stacks python --max-entries 2500"; do
    set -- $spec
    name=$1; shift
    echo "== $name: $*" >>"$log"
    PYTHONUNBUFFERED=1 timeout 300 python3 examples/workloads.py --out "$W/$name" "$@" >>"$log" 2>&1
    echo "   exit $?" >>"$log"
done
python3 -c 'import lzma,sys,pathlib
for p in sorted(pathlib.Path(sys.argv[1]).glob("*.pickle")):
    p.with_suffix(".pickle.xz").write_bytes(lzma.compress(p.read_bytes(), preset=9)); p.unlink()' "$W"
tar -cJf "$OUT/captures.tar.xz" -C "$W" .
cat "$log"
