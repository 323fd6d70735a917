"""Writes checkpoints with tokenizers for the pipeline tests, and what transformers gives for them, into
tests/fixtures/pipelines; also metric values from scikit-learn and scipy.

Usage: .venv/bin/python scripts/make_pipeline_fixtures.py   (after: pip install -r scripts/requirements.txt)

Each checkpoint is a full Hugging Face folder (config.json, model.safetensors, vocab.txt, tokenizer_config.json)
with a small English vocab cut from bert-base-uncased. expected.json holds, per input text (or pair), what a user
of transformers gets: tokenizer(text) -> model -> softmax / sigmoid / value, pooled embeddings, fill-mask top-k.
"""

import json
import random
import shutil
from pathlib import Path

import numpy as np
import torch
from scipy.stats import pearsonr, spearmanr
from sklearn.metrics import accuracy_score, f1_score, matthews_corrcoef
from make_model_fixtures import randomise
from transformers import (BertTokenizer, RoFormerConfig, RoFormerForMaskedLM, RoFormerForSequenceClassification,
                          RoFormerModel)

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "tests" / "fixtures" / "pipelines"
STD = 0.3

TEXTS = [
    "it 's a charming and often affecting journey .",
    "the movie was terrible and boring",
    "a great film",
    "",
    "I loved it!",
    "this is not what i expected , but it works",
    "the acting is good but the story is weak and the ending makes no sense at all " * 6,
    "bad",
    "an old man and his dog",
    "what a time to be alive",
]
PAIRS = [
    ("the cat sat on the mat", "a cat was sitting on a mat"),
    ("he went home", "she stayed at work"),
    ("", "an empty first sentence"),
    ("a long first sentence " * 20, "short"),
]
MASKED = ["the [MASK] was good", "i [MASK] this [MASK] .", "[MASK]"]


def small_vocab(extra=()):
    """The vocab of these fixtures, plus the tokens `extra` (bert-base-uncased's pieces of other texts)."""
    full = (ROOT / "tests/fixtures/vocab/bert-base-uncased/vocab.txt").read_text(encoding="utf-8").split("\n")[:-1]
    keep = full[:1] + full[100:104] + full[999:1100] + full[1996:3000]
    # The words of our texts, so that outputs are not all [UNK].
    words = {w for t in TEXTS + [x for p in PAIRS for x in p] + MASKED for w in t.lower().replace("!", " ! ").split()}
    keep += sorted(w for w in words if w in full and w not in keep)
    keep += sorted(t for t in extra if t in full and t not in keep)
    seen, vocab = set(), []
    for t in keep:
        if t not in seen:
            seen.add(t)
            vocab.append(t)
    return vocab


def config(vocab, **kw):
    base = dict(vocab_size=len(vocab), hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                intermediate_size=64, max_position_embeddings=64, pad_token_id=0)
    base.update(kw)
    return RoFormerConfig(**base)


def save(name, model, vocab, expected):
    folder = OUT / name
    shutil.rmtree(folder, ignore_errors=True)
    model.save_pretrained(folder)
    (folder / "vocab.txt").write_text("\n".join(vocab) + "\n", encoding="utf-8")
    (folder / "tokenizer_config.json").write_text(json.dumps(
        {"tokenizer_class": "BertTokenizer", "do_lower_case": True, "model_max_length": 64}, indent=2))
    (folder / "expected.json").write_text(json.dumps(expected, indent=1))
    print(name, sorted(p.name for p in folder.iterdir()))


def encode(tok, text, pair=None):
    return tok(text, pair, truncation=True, max_length=64, return_tensors="pt")


def main():
    torch.manual_seed(0)
    vocab = small_vocab()
    tok = BertTokenizer(vocab={t: i for i, t in enumerate(vocab)}, do_lower_case=True)

    for name, kw, seed in (
        ("cls", dict(num_labels=3, id2label={0: "negative", 1: "neutral", 2: "positive"},
                     label2id={"negative": 0, "neutral": 1, "positive": 2}), 1),
        ("multilabel", dict(num_labels=4, problem_type="multi_label_classification"), 2),
        ("regression", dict(num_labels=1), 3),
    ):
        model = randomise(RoFormerForSequenceClassification(config(vocab, **kw)), seed)
        expected = {"texts": [], "pairs": []}
        with torch.no_grad():
            for key, inputs in (("texts", [(t, None) for t in TEXTS]), ("pairs", PAIRS)):
                for a, b in inputs:
                    enc = encode(tok, a, b)
                    logits = model(**enc).logits[0]
                    if name == "cls":
                        scores = torch.softmax(logits, -1)
                    elif name == "multilabel":
                        scores = torch.sigmoid(logits)
                    else:
                        scores = logits
                    expected[key].append({"input": [a, b], "logits": logits.tolist(), "scores": scores.tolist(),
                                          "truncated": len(tok(a, b)["input_ids"]) > 64})
        save(name, model, vocab, expected)

    # Sentence encoder with junnyu's pooler (linear activation).
    model = randomise(RoFormerModel(config(vocab)), 4)
    pooler = torch.nn.Linear(32, 32)
    with torch.no_grad():
        pooler.weight.copy_(STD * torch.randn(32, 32))
        pooler.bias.copy_(STD * torch.randn(32))
    expected = {"texts": TEXTS, "cls": [], "mean": [], "pooler": []}
    with torch.no_grad():
        for t in TEXTS:
            enc = encode(tok, t)
            h = model(**enc).last_hidden_state[0]
            expected["cls"].append(h[0].tolist())
            expected["mean"].append(h.mean(0).tolist())
            expected["pooler"].append(pooler(h[0]).tolist())
    state = {f"roformer.{k}": v for k, v in model.state_dict().items()}
    state["roformer.pooler.dense.weight"] = pooler.weight.detach().clone()
    state["roformer.pooler.dense.bias"] = pooler.bias.detach().clone()
    folder = OUT / "sim"
    save("sim", model, vocab, expected)
    model.save_pretrained(folder, state_dict=state)
    cfg = json.loads((folder / "config.json").read_text())
    cfg.update({"pooler_activation": "linear"})
    (folder / "config.json").write_text(json.dumps(cfg, indent=2))

    # Fill-mask.
    model = randomise(RoFormerForMaskedLM(config(vocab)), 5)
    model.tie_weights()
    expected = {"texts": MASKED, "top5": []}
    with torch.no_grad():
        for t in MASKED:
            enc = encode(tok, t)
            probs = torch.softmax(model(**enc).logits[0], -1)
            positions = (enc["input_ids"][0] == tok.mask_token_id).nonzero().flatten().tolist()
            expected["top5"].append([
                [[tok.convert_ids_to_tokens(int(i)), int(i), float(p)] for p, i in zip(*probs[pos].topk(5))]
                for pos in positions])
    save("mlm", model, vocab, expected)

    # Metrics on random predictions, from scikit-learn and scipy.
    rng = random.Random(7)
    labels = [rng.randrange(2) for _ in range(200)]
    preds = [l if rng.random() < 0.8 else 1 - l for l in labels]
    labels3 = [rng.randrange(3) for _ in range(150)]
    preds3 = [l if rng.random() < 0.6 else rng.randrange(3) for l in labels3]
    x = [rng.gauss(0, 1) for _ in range(100)]
    y = [a + rng.gauss(0, 0.7) for a in x]
    xt = [round(a) for a in x]  # ties for Spearman
    metrics = {
        "binary": {"predictions": preds, "labels": labels, "accuracy": accuracy_score(labels, preds),
                   "f1": f1_score(labels, preds), "matthews": matthews_corrcoef(labels, preds)},
        "multiclass": {"predictions": preds3, "labels": labels3, "accuracy": accuracy_score(labels3, preds3),
                       "matthews": matthews_corrcoef(labels3, preds3)},
        "regression": {"x": x, "y": y, "xt": xt, "pearson": pearsonr(x, y)[0], "spearman": spearmanr(x, y)[0],
                       "spearman_ties": spearmanr(xt, y)[0]},
    }
    (OUT / "metrics.json").write_text(json.dumps(metrics, indent=1, default=float))


if __name__ == "__main__":
    main()
