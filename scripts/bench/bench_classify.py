# Sentences/s of transformers on the bundled model (the peer of `cargo bench --bench classify`). Run: .venv/bin/python scripts/bench/bench_classify.py
"""Sentences per second of transformers on the bundled model and the corpus of benches/classify.rs, on 2 threads.

Usage: .venv/bin/python scripts/bench/bench_classify.py
"""

import json
import time
from pathlib import Path

import torch
from transformers import AutoTokenizer, RoFormerForSequenceClassification

torch.set_num_threads(2)
ROOT = Path(__file__).resolve().parents[2]
texts = json.loads((ROOT / "tests/fixtures/tokenizer/corpus.json").read_text())["singles"]
model = RoFormerForSequenceClassification.from_pretrained(ROOT / "models/roformer-sst2").eval()
tokenizer = AutoTokenizer.from_pretrained(ROOT / "models/roformer-sst2")


def run(batch_size):
    order = sorted(range(len(texts)), key=lambda i: len(texts[i]))  # the same length sorting as ours
    with torch.no_grad():
        for start in range(0, len(order), batch_size):
            batch = [texts[i] for i in order[start:start + batch_size]]
            enc = tokenizer(batch, padding=True, truncation=True, max_length=128, return_tensors="pt")
            torch.softmax(model(**enc).logits, -1)


for batch_size in (1, 32):
    run(batch_size)
    runs, start = 0, time.perf_counter()
    while time.perf_counter() - start < 5.0:
        run(batch_size)
        runs += 1
    per = (time.perf_counter() - start) / runs
    print(f"batch {batch_size}: {per * 1e3:.1f} ms for {len(texts)} texts, {len(texts) / per:.0f} texts/s")
