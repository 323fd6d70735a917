"""Loads the folder `finetune` saved (tests/fixtures/finetune/model) with transformers and writes its logits for the
training texts to tests/fixtures/finetune/transformers_logits.json. Run by scripts/make_finetune_fixture.sh."""

import json
from pathlib import Path

import torch
from transformers import AutoTokenizer, RoFormerForSequenceClassification

ROOT = Path(__file__).resolve().parent.parent
FOLDER = ROOT / "tests/fixtures/finetune"

model = RoFormerForSequenceClassification.from_pretrained(FOLDER / "model").eval()
tokenizer = AutoTokenizer.from_pretrained(FOLDER / "model")
texts = [line.split("\t")[0] for line in (FOLDER / "train.tsv").read_text().splitlines()[1:]]
rows = []
with torch.no_grad():
    for t in texts:
        enc = tokenizer(t, return_tensors="pt")
        rows.append({"text": t, "input_ids": enc["input_ids"][0].tolist(), "logits": model(**enc).logits[0].tolist()})
labels = model.config.id2label
(FOLDER / "transformers_logits.json").write_text(json.dumps({"id2label": labels, "rows": rows}, indent=1))
print(type(tokenizer).__name__, labels, len(rows))
