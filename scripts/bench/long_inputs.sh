#!/usr/bin/env bash
# Time and peak memory of one long input through the `embed` example, at 512, 2k, 8k and 16k tokens, in f32, int8 and bf16.
# Usage: scripts/bench/long_inputs.sh [model folder, default target/bench-e2e/base (made by scripts/bench/bench_e2e.py)] [long_inputs.py options]
#   e.g. scripts/bench/long_inputs.sh target/bench-e2e/base --precisions bf16 --lengths 8192,16384 --no-result-file
#        scripts/bench/long_inputs.sh target/bench-e2e/base --embed OTHER/embed --commit HASH   # a binary built elsewhere
# Each length runs in its own process (/usr/bin/time gives the peak RSS); a 16-token run per precision gives the
# baseline of loading the model, which "RSS over the 16-token run" subtracts. The encode time is embed's own
# (load excluded). Writes a result file under benchmarks/results/ ("kind": "long-inputs"; benchmarks/README.md)
# unless --no-result-file; render it into docs/long-inputs.md with scripts/bench/render_results.py.
set -euo pipefail
cd "$(dirname "$0")/../.."
model=target/bench-e2e/base
if [ $# -gt 0 ] && [ "${1#-}" = "$1" ]; then model=$1; shift; fi
cargo build -q --release --example embed
python=python3
[ -x .venv/bin/python ] && python=.venv/bin/python
exec "$python" scripts/bench/long_inputs.py --model "$model" "$@"
