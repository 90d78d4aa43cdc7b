#!/bin/sh
# The main job on bundled real data: snapshots of the seed exercise,
# recorded on an H200 with torch 2.11 (tests/data/seed-exercise).
M=${1:-build/memdiag}
D=tests/data/seed-exercise
set -e
echo "\$ memdiag summary $D/snap-gamma-small-rank0.pickle"
"$M" summary "$D/snap-gamma-small-rank0.pickle"
echo
echo "\$ memdiag summary $D/snap-beta-ddp-rank0.pickle $D/snap-beta-ddp-rank1.pickle --top 3"
"$M" summary "$D/snap-beta-ddp-rank0.pickle" "$D/snap-beta-ddp-rank1.pickle" --top 3
echo
echo "\$ memdiag diagnose --json $D/snap-alpha-small-rank0.pickle  (first lines)"
"$M" diagnose --json "$D/snap-alpha-small-rank0.pickle" | python3 -m json.tool 2>/dev/null | head -24 || \
    "$M" diagnose --json "$D/snap-alpha-small-rank0.pickle" | head -c 1200
echo
echo "\$ memdiag diff $D/snap-gamma-small-rank0.pickle $D/snap-alpha-small-rank0.pickle  (the leak fixed; first lines)"
"$M" diff "$D/snap-gamma-small-rank0.pickle" "$D/snap-alpha-small-rank0.pickle" | head -n 12
echo
B=$(dirname "$M")
echo "\$ memdiag report --force -o $B/demo-report.html tests/data/runs/stray"
"$M" report --force -o "$B/demo-report.html" tests/data/runs/stray
echo "  (open it in a browser: memory over time, findings, sites and flame graphs per rank)"
echo
echo "\$ memdiag predict --model tests/data/predict/qwen2.json --batch 4 --seq 1024 --optimizer adamw --precision bf16-autocast --gpu H100"
echo "  (the same step measured on an H200: 12987.8 MiB)"
"$M" predict --model tests/data/predict/qwen2.json --batch 4 --seq 1024 --optimizer adamw \
    --precision bf16-autocast --gpu H100
echo
echo "\$ memdiag predict --model seed:small --batch 8 --seq 256 --ddp --gradient-as-bucket-view --validate tests/data/runs/ddp"
"$M" predict --model seed:small --batch 8 --seq 256 --ddp --gradient-as-bucket-view \
    --validate tests/data/runs/ddp | tail -n 8
