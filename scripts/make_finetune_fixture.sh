#!/usr/bin/env bash
# Fine-tunes the `cls` pipeline fixture on tests/fixtures/finetune/train.tsv with this crate, then has transformers
# load the saved folder and write its logits (tests/fixtures/finetune/transformers_logits.json).
# Usage: bash scripts/make_finetune_fixture.sh   (needs the Python reference: pip install -r scripts/requirements.txt)
set -euo pipefail
cd "$(dirname "$0")/.."
out=tests/fixtures/finetune/model
rm -rf "$out"
cargo run --release --example finetune -- --model tests/fixtures/pipelines/cls \
  --train tests/fixtures/finetune/train.tsv --dev tests/fixtures/finetune/train.tsv \
  --text-col sentence --label-col label --epochs 5 --batch-size 4 --lr 1e-3 --seed 1 --max-length 64 --output "$out"
.venv/bin/python scripts/check_finetuned.py
