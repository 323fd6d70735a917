#!/usr/bin/env bash
# The Python binding's cost in instructions (valgrind's callgrind): the wheel's encode against the embed example's. Run: scripts/bench/binding_instructions.sh [PYTHON] [MODEL] [TSV]
# Timing cannot resolve a few percent on a 2-core VM, where one process varies by about 10%; instruction
# counts can (the same within 0.1% run to run here). Each side runs twice under callgrind, on one thread
# (the pipeline's and rayon's global pool): once encoding every sentence of the file and once encoding the
# first alone; the difference is the cost of encoding the rest, load and start-up (Python's included)
# cancelled out. The model is small by default (the sim fixture, hidden 32), where the binding's own work
# weighs the most against the forward passes. PYTHON must have the wheel installed (pip install ./python);
# the embed example is built when missing.
set -euo pipefail
cd "$(dirname "$0")/../.."
python="${1:-python3}"
model="${2:-tests/fixtures/pipelines/sim}"
tsv="${3:-../shared/data/glue/SST-2/dev.tsv}"
embed="${CARGO_TARGET_DIR:-target}/release/examples/embed"
[[ -x "$embed" ]] || cargo build --release --example embed
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$python" - "$tsv" "$work" <<'PY'
import sys
lines = open(sys.argv[1], encoding="utf-8").read().split("\n")
column = lines[0].split("\t").index("sentence")
sentences = [line.split("\t")[column] for line in lines[1:] if line.strip()]
open(f"{sys.argv[2]}/all.txt", "w", encoding="utf-8").write("\n".join(sentences) + "\n")
open(f"{sys.argv[2]}/one.txt", "w", encoding="utf-8").write(sentences[0] + "\n")
PY
cat >"$work/wheel.py" <<'PY'
import sys
from roformer_rs import SentenceEncoder
sentences = open(sys.argv[2], encoding="utf-8").read().split("\n")[:-1]
SentenceEncoder(sys.argv[1], threads=1).encode(sentences, batch_size=32)
PY
export RAYON_NUM_THREADS=1 PYTHONHASHSEED=0
count() {  # instructions of one run, all threads
    valgrind --tool=callgrind --callgrind-out-file="$work/cg.out" "$@" 2>&1 >/dev/null |
        sed -n 's/.*Collected : \([0-9]*\).*/\1/p'
}
declare -A wheel example
for input in one all; do
    example[$input]=$(count "$embed" --model "$model" --input "$work/$input.txt" --output "$work/out.npy" \
        --threads 1 --batch-size 32)
    wheel[$input]=$(count "$python" "$work/wheel.py" "$model" "$work/$input.txt")
done
lines=$(wc -l <"$work/all.txt")
awk -v ea="${example[all]}" -v eo="${example[one]}" -v wa="${wheel[all]}" -v wo="${wheel[one]}" -v n="$lines" 'BEGIN {
    e = ea - eo; w = wa - wo
    printf "embed example: %.1f M instructions for %d sentences more than for one\n", e / 1e6, n - 1
    printf "wheel:         %.1f M\n", w / 1e6
    printf "wheel / example: %.4f (throughput, by instructions: %.3fx the example'"'"'s)\n", w / e, e / w
}'
