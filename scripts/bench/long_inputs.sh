#!/usr/bin/env bash
# Time and peak memory of one long input through the `embed` example, at 512, 2k, 8k and 16k tokens.
# Usage: scripts/bench/long_inputs.sh [model folder, default target/bench-e2e/base (made by scripts/bench/bench_e2e.py)]
# Each length runs in its own process (/usr/bin/time gives the peak RSS); a 16-token run gives the baseline of
# loading the model, which the "encode" column subtracts.
set -euo pipefail
cd "$(dirname "$0")/../.."
model="${1:-target/bench-e2e/base}"
cargo build -q --release --example embed
dir="$(mktemp -d)"
words=(the quick brown fox jumps over a lazy dog and then)
line() { local n=$1 out=""; for ((i = 0; i < n; i++)); do out+="${words[i % ${#words[@]}]} "; done; echo "$out"; }
run() {
  local n=$1
  line $((n - 2)) >"$dir/in.txt"
  /usr/bin/time -f "%e %M" -o "$dir/time" target/release/examples/embed --model "$model" --max-length "$n" \
    --input "$dir/in.txt" --output "$dir/out.jsonl" 2>/dev/null
  cat "$dir/time"
}
read -r base_s base_kb < <(run 16)
echo "model: $model; baseline (load + 16 tokens): ${base_s} s, peak RSS $((base_kb / 1024)) MiB"
echo "| tokens | encode (s) | peak RSS (MiB) | RSS over baseline (MiB) |"
echo "| ---: | ---: | ---: | ---: |"
for n in 512 2048 8192 16384; do
  read -r s kb < <(run "$n")
  printf "| %d | %.2f | %d | %d |\n" "$n" "$(echo "$s - $base_s" | bc)" $((kb / 1024)) $(((kb - base_kb) / 1024))
done
rm -rf "$dir"
