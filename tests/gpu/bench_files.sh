#!/bin/sh
# The bench files in bench/out, made where missing on the device host (no
# ../shared there): the real ones decompressed from bench/out/shared and
# bench/data/real, the synthetic ones generated. Run by bench_ab.sh and
# contend.sh from the repository root.
for x in bench/out/shared/*.xz bench/data/real/*.pickle.xz; do
    b=bench/out/$(basename "$x" .xz)
    [ -s "$b" ] || xz -dc "$x" >"$b"
done
python3 bench/gen_snapshot.py 10000 bench/out/synthetic-10000.pickle >/dev/null
python3 bench/gen_snapshot.py 100000 bench/out/synthetic-100000.pickle >/dev/null
python3 bench/state_heavy.py --bare bench/out/big_gamma.pickle bench/out/stateonly-bare-8.pickle 8 >/dev/null
