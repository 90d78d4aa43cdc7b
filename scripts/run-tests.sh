#!/bin/sh
# Runs every unit test binary and the CLI tests; prints one closing line
# "N passed, N failed" and exits non-zero if anything failed.
build=${1:-build}
pass=0; fail=0
for t in "$build"/tests/test_*; do
    [ -x "$t" ] || continue
    if "$t"; then pass=$((pass + 1)); else fail=$((fail + 1)); echo "FAILED: $t"; fi
done
for t in tests/cli/test_cli.sh tests/python/test_run.sh; do
    if MEMDIAG="$build/memdiag" sh "$t"; then pass=$((pass + 1)); else fail=$((fail + 1)); echo "FAILED: $t"; fi
done
if MEMDIAG="$build/memdiag" MEMDIAG_LIB="$build/libmemdiag_capture.so" python3 tests/python/test_runtime.py; then
    pass=$((pass + 1)); else fail=$((fail + 1)); echo "FAILED: tests/python/test_runtime.py"; fi
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
