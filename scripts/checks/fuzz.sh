#!/usr/bin/env bash
# A longer fuzzing run of every reader of untrusted input (tests/integration/fuzz.rs):
# config.json, the safetensors header, the shard index, vocab.txt + tokenizer_config.json, TSV,
# sentence-transformers folders.
# Usage: scripts/checks/fuzz.sh [cases per target, default 20000]
set -euo pipefail
cd "$(dirname "$0")/../.."
cases="${1:-20000}"
log="$(mktemp)"
start=$(date +%s)
if PROPTEST_CASES="$cases" cargo test --release --test integration -- fuzz:: --nocapture --test-threads 2 >"$log" 2>&1; then
  status="all passed"
else
  status="FAILED"
fi
grep -E '^fuzz |panicked|minimal failing input' "$log" || true
total=$(grep -Eo '[0-9]+ cases' "$log" | awk '{s += $1} END {print s + 0}')
echo "$total cases in $(( $(date +%s) - start )) s over $(grep -c '^fuzz ' "$log") targets: $status"
[ "$status" = "all passed" ] || { tail -40 "$log"; exit 1; }
