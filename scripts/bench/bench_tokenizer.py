# Tokens/s of transformers' tokenizers (the peer of `cargo bench --bench tokenizer`). Run: .venv/bin/python scripts/bench/bench_tokenizer.py
"""Tokens per second of transformers' tokenizers on the corpus that benches/tokenizer.rs uses.

Usage: .venv/bin/python scripts/bench/bench_tokenizer.py
"""

import json
import time
from pathlib import Path

from transformers import BertTokenizer, RoFormerTokenizer

ROOT = Path(__file__).resolve().parents[2]


def vocab(name):
    lines = (ROOT / "tests/fixtures/vocab" / name / "vocab.txt").read_text(encoding="utf-8").split("\n")
    return {t.rstrip("\r"): i for i, t in enumerate(lines[:-1] if lines[-1] == "" else lines)}


texts = json.loads((ROOT / "tests/fixtures/tokenizer/corpus.json").read_text())["singles"]
for name, tok in (("roformer_chinese_base", RoFormerTokenizer(vocab=vocab("roformer_chinese_base"))),
                  ("bert-base-uncased", BertTokenizer(vocab=vocab("bert-base-uncased")))):
    enc = tok(texts, truncation=True, max_length=512, padding="longest")
    tokens = sum(sum(m) for m in enc["attention_mask"])
    runs, start = 0, time.perf_counter()
    while time.perf_counter() - start < 3.0:
        tok(texts, truncation=True, max_length=512, padding="longest")
        runs += 1
    per = (time.perf_counter() - start) / runs
    print(f"{name}: {per * 1e3:.2f} ms per batch of {len(texts)}, {tokens / per / 1e3:.0f}k tokens/s")
