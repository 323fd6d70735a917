# Step 2 of the built-in model's distillation (issue 39): the transfer set. Run after teacher.py:
#   .venv/bin/python scripts/distill/augment.py
"""Builds the transfer set the student learns from: SST-2 train plus augmented sentences, each with the teacher's
logits.

Augmentation follows Tang et al. 2019 ("Distilling Task-Specific Knowledge from BERT into Simple Neural Networks"),
per word of a training sentence (SST-2's text is already split on spaces):
- masking: with probability 0.1 the word becomes `[MASK]`;
- a swap for a word of the same kind: with probability 0.1 the word becomes one of its 8 nearest neighbours among the
  teacher's whole-word input embeddings (cosine). Tang et al. swap by part of speech, which needs a tagger's data that
  this machine cannot download; TinyBERT swaps by embedding neighbours, as here. A neighbour may flip the sentiment
  ("good" and "bad" are close): the teacher relabels every sentence, which is the point;
- n-gram sampling: with probability 0.25, the result is cut to a random n-gram, n from 1 to 5.
`--per-sentence` (default 3) sentences are drawn for each training example, and `--per-long-sentence` (default 3 too)
for one of at least `--long-words` (default 10) words. (SST-2 train is mostly short phrases, dev whole sentences;
10 per long example, 351k sentences in all, did not help the student: models/roformer-sst2/README.md.) Duplicates of
each other or of a training sentence are dropped. SST-2 dev is not read. Seeded (`--seed`, default 0): the defaults
give the 196,035 sentences the shipped model learned from.

A teacher then labels every sentence, the originals included: its two logits are stored, and an original keeps its
gold label too. The labeller is `--labeller` (default `teacher-mpnet`, the all-mpnet-base-v2 teacher of `teacher.py
--base mpnet`, 94.27% on dev, labelling under bf16 autocast as it was trained: 13.4 min on the 2-core AMX Xeon);
`--labeller teacher` gives the MiniLM teacher's labels, which the shipped model before it learned from. Writes
target/distill/transfer.jsonl (or `--out NAME`), one {"text", "logits", "label"?} per line, and beside it
transfer.json (counts, minutes, CPU).
"""

import argparse
import json
import random
import time

import torch
from transformers import AutoModelForSequenceClassification, AutoTokenizer

from common import GLUE, MAX_LEN, OUT, bf16, cpu_name, read_tsv



def neighbours(model, tok, k=8):
    """For each whole-word alphabetic token of the teacher's vocabulary, its k nearest by input-embedding cosine."""
    vocab = tok.get_vocab()
    words = sorted((t for t in vocab if t.isalpha() and t.isascii() and len(t) > 1), key=vocab.get)
    emb = model.get_input_embeddings().weight.detach()[[vocab[w] for w in words]]
    emb = torch.nn.functional.normalize(emb, dim=-1)
    near = {}
    for i in range(0, len(words), 2048):
        sims = emb[i : i + 2048] @ emb.T
        sims[torch.arange(sims.shape[0]), torch.arange(i, i + sims.shape[0])] = -2
        top = sims.topk(k, dim=-1).indices
        for row, w in enumerate(words[i : i + 2048]):
            near[w] = [words[j] for j in top[row].tolist()]
    return near


def augment(words, near, rng, p_mask=0.1, p_swap=0.1, p_ngram=0.25):
    out = []
    for w in words:
        r = rng.random()
        if r < p_mask:
            out.append("[MASK]")
        elif r < p_mask + p_swap and w in near:
            out.append(rng.choice(near[w]))
        else:
            out.append(w)
    if len(out) > 1 and rng.random() < p_ngram:
        n = rng.randint(1, min(5, len(out)))
        start = rng.randint(0, len(out) - n)
        out = out[start : start + n]
    return " ".join(out)


def label(model, tok, texts, autocast, batch=256):
    """The teacher's logits, in the order of `texts`; batches of similar length to waste little on padding. Masked
    words are written `[MASK]` (BERT's token, which the student's vocabulary keeps): a teacher whose mask token is
    another (mpnet's `<mask>`) is shown its own."""
    if tok.mask_token != "[MASK]":
        texts = [t.replace("[MASK]", tok.mask_token) for t in texts]
    order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
    logits = [None] * len(texts)
    start = time.time()
    with torch.no_grad(), bf16(autocast):
        for b, i in enumerate(range(0, len(order), batch)):
            idx = order[i : i + batch]
            enc = tok([texts[j] for j in idx], truncation=True, max_length=MAX_LEN, padding=True, return_tensors="pt")
            for j, row in zip(idx, model(**enc).logits.tolist()):
                logits[j] = [round(v, 5) for v in row]
            if b % 100 == 0:
                print(f"labelled {i + len(idx)}/{len(texts)} in {(time.time() - start) / 60:.1f} min", flush=True)
    return logits


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--per-sentence", type=int, default=3)
    parser.add_argument("--per-long-sentence", type=int, default=3)
    parser.add_argument("--long-words", type=int, default=10)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--labeller", default="teacher-mpnet",
                        help="the folder under target/distill whose logits label the set (teacher.py --base mpnet "
                             "writes teacher-mpnet); the swaps' neighbours always come from `teacher`")
    parser.add_argument("--out", default="transfer.jsonl",
                        help="file name under target/distill; the report goes beside it, as .json")
    args = parser.parse_args()
    rng = random.Random(args.seed)
    torch.manual_seed(args.seed)

    teacher = OUT / "teacher"
    tok = AutoTokenizer.from_pretrained(teacher)
    model = AutoModelForSequenceClassification.from_pretrained(teacher).eval()
    train_x, train_y = read_tsv(GLUE / "train.tsv")
    near = neighbours(model, tok)

    seen = set(train_x)
    augmented = []
    for text in train_x:
        words = text.split()
        for _ in range(args.per_long_sentence if len(words) >= args.long_words else args.per_sentence):
            new = augment(words, near, rng)
            if new and new not in seen:
                seen.add(new)
                augmented.append(new)
    print(f"{len(train_x)} training sentences, {len(augmented)} augmented", flush=True)

    start = time.time()
    texts = train_x + augmented
    if args.labeller != "teacher":
        labeller = OUT / args.labeller
        tok = AutoTokenizer.from_pretrained(labeller)
        model = AutoModelForSequenceClassification.from_pretrained(labeller).eval()
    # A teacher trained under bf16 autocast labels under it too, as its dev accuracy was measured.
    autocast = json.loads((OUT / args.labeller / "report.json").read_text()).get("bf16_autocast", False)
    logits = label(model, tok, texts, autocast)
    minutes = (time.time() - start) / 60
    with open(OUT / args.out, "w", encoding="utf-8") as f:
        for i, (text, row) in enumerate(zip(texts, logits)):
            item = {"text": text, "logits": row}
            if i < len(train_x):
                item["label"] = train_y[i]
            f.write(json.dumps(item) + "\n")
    agree = sum((row[1] > row[0]) == bool(y) for row, y in zip(logits, train_y)) / len(train_y)
    report = {
        "training_sentences": len(train_x), "augmented": len(augmented), "per_sentence": args.per_sentence,
        "per_long_sentence": args.per_long_sentence, "long_words": args.long_words,
        "seed": args.seed, "labeller": args.labeller, "bf16_autocast": autocast, "teacher_train_accuracy": agree,
        "labelling_minutes": round(minutes, 1), "cpu": cpu_name(),
        "threads": torch.get_num_threads(), "torch": torch.__version__,
    }
    (OUT / args.out).with_suffix(".json").write_text(json.dumps(report, indent=1))
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
