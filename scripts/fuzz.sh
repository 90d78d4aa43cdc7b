#!/bin/sh
# Builds the libFuzzer target with ASan+UBSan and runs it for N seconds
# (default 60) from a corpus of the synthetic snapshots and real prefixes.
set -eu
secs=${1:-60}
out=build-fuzz
mkdir -p "$out/corpus"
make -s BUILD="$out" "$out/gen/page_js.c"  # the pages' script, as the library embeds it
srcs=$(ls src/util/*.c src/pickle/*.c src/snapshot/*.c src/model/*.c src/analyze/*.c src/capture/*.c \
          src/predict/*.c src/render/*.c)
clang -std=c11 -D_GNU_SOURCE -g -O1 -fsanitize=fuzzer,address,undefined \
    -fno-sanitize-recover=all -Iinclude -Isrc $srcs "$out/gen/page_js.c" fuzz/fuzz_snapshot.c \
    -o "$out/fuzz_snapshot" -ljansson -lz -lzstd -llzma -lm -ldl -lpthread
cp tests/data/synthetic/*.pickle tests/data/synthetic/*.json tests/data/fuzz-regress/* "$out/corpus/"
for f in tests/data/runs/*/*.mdcap tests/data/driver/*/*.mdcap tests/data/loops/*/rank0.mdcap \
         tests/data/sharing/*/rank0*.mdcap; do   # same names in each run: prefix the run
    cp "$f" "$out/corpus/$(basename "$(dirname "$f")")-$(basename "$f")"
done
cp tests/data/seed-exercise/alpha-small.json "$out/corpus/"
for f in tests/data/predict/*.json; do cp "$f" "$out/corpus/config-$(basename "$f")"; done
head -c 60000 tests/data/seed-exercise/snap-alpha-small-rank0.pickle >"$out/corpus/real-prefix"
# trace entries without frames (the reader's fast loop takes those whole)
xz -dc tests/data/builds/cdist/rank0.pickle.xz | head -c 60000 >"$out/corpus/real-prefix-bare"
# torch's state alone (memory_snapshot() of a job recording nothing): its
# segments read whole with their blocks (rec_nested)
xz -dc tests/data/snapmodes/norecord.pickle.xz | head -c 60000 >"$out/corpus/real-prefix-state"
rc=0
"$out/fuzz_snapshot" -max_total_time="$secs" -max_len=65536 -timeout=10 -rss_limit_mb=2048 \
    -artifact_prefix="$out/" -dict=fuzz/pickle.dict -print_final_stats=1 "$out/corpus" \
    >"$out/fuzz.log" 2>&1 || rc=$?
tail -n 12 "$out/fuzz.log"
[ "$rc" -eq 0 ] || { echo "fuzz: FAILED (exit $rc); reproducer in $out/crash-*" >&2; exit 1; }
echo "fuzz: no crash in $secs s"
