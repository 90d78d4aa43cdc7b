#!/bin/sh
# Runs every unit test binary and the CLI tests; prints one closing line
# "N passed, N failed" and exits non-zero if anything failed.
build=${1:-build}
pass=0; fail=0
for t in "$build"/tests/test_*; do
    [ -x "$t" ] || continue
    if "$t"; then pass=$((pass + 1)); else fail=$((fail + 1)); echo "FAILED: $t"; fi
done
if MEMDIAG="$build/memdiag" sh tests/cli/test_cli.sh; then pass=$((pass + 1)); else fail=$((fail + 1)); echo "FAILED: tests/cli/test_cli.sh"; fi
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
