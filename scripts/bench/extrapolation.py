# Masked-token accuracy by input length, with and without RoPE scaling (docs/extrapolation.png). Run: .venv/bin/python scripts/bench/extrapolation.py [--steps 1000]
"""RoFormer's length extrapolation, measured: pre-train a small RoFormer with masked LM on windows of 128 tokens,
then measure masked-token accuracy at 128, 256, 512 and 1024 tokens with this crate (examples/mlm_accuracy.rs),
with no scaling, linear, dynamic NTK and YaRN.

Usage:
    .venv/bin/python scripts/bench/extrapolation.py [--steps 1000] [--train ../shared/data/glue/SST-2/train.tsv]
        [--eval ../shared/data/glue/SST-2/dev.tsv]

- Pre-training (transformers, PyTorch on 2 threads): SST-2 train sentences, tokenized with the bundled model's
  8k WordPiece vocabulary and concatenated, cut into windows of [CLS] + 126 tokens + [SEP]; 15% of tokens masked
  (80% [MASK], 10% random, 10% kept); hidden 128, 4 layers, 4 heads, FFN 512, max_position_embeddings 128; AdamW
  lr 5e-4 with 5% warmup and linear decay, batch 32. The model goes to target/extrapolation/mlm.
- Evaluation (this crate): SST-2 dev sentences (never trained on) concatenated, windows of each length, every 7th
  token masked. Linear and YaRN use factor = length / 128; dynamic NTK uses factor 2 (its base grows with the
  batch's length by itself).
- Output: target/extrapolation/results.json, a Markdown table on stdout, and docs/extrapolation.png.
"""

import argparse
import json
import math
import random
import subprocess
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[2]
OUT = ROOT / "target" / "extrapolation"
TRAINED = 128
LENGTHS = [128, 256, 512, 1024]


def sentences(path):
    lines = Path(path).read_text(encoding="utf-8").split("\n")
    col = lines[0].split("\t").index("sentence")
    return [l.split("\t")[col] for l in lines[1:] if l.strip()]


def tokenizer():
    from transformers import BertTokenizerFast

    tokens = (ROOT / "models/roformer-sst2/vocab.txt").read_text(encoding="utf-8").split("\n")
    vocab = {t: i for i, t in enumerate(tokens) if t}
    tok = BertTokenizerFast(vocab=vocab, do_lower_case=True)
    ids = tok("a gorgeous movie")["input_ids"]
    assert ids[0] == vocab["[CLS]"] and ids[-1] == vocab["[SEP]"] and len(set(ids)) == len(ids), ids
    return tok, vocab


def pretrain(train_path, steps, seed=0):
    from transformers import RoFormerConfig, RoFormerForMaskedLM

    folder = OUT / "mlm"
    if (folder / "model.safetensors").exists():
        print(f"using {folder}")
        return folder
    torch.manual_seed(seed)
    random.seed(seed)
    tok, vocab = tokenizer()
    stream = [t for s in sentences(train_path) for t in tok(s, add_special_tokens=False)["input_ids"]]
    body = TRAINED - 2
    windows = torch.tensor([[vocab["[CLS]"]] + stream[i:i + body] + [vocab["[SEP]"]]
                            for i in range(0, len(stream) - body, body)])
    print(f"{len(stream)} training tokens, {len(windows)} windows of {TRAINED}")
    config = RoFormerConfig(vocab_size=len(vocab), hidden_size=128, num_hidden_layers=4, num_attention_heads=4,
                            intermediate_size=512, max_position_embeddings=TRAINED, hidden_act="gelu")
    model = RoFormerForMaskedLM(config)
    optimizer = torch.optim.AdamW(model.parameters(), lr=5e-4, weight_decay=0.01)
    warmup = steps // 20
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda s: (s + 1) / warmup if s < warmup else max(0.0, (steps - s) / (steps - warmup)))
    special = torch.tensor([vocab[t] for t in ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]])
    start = time.time()
    model.train()
    for step in range(steps):
        ids = windows[torch.randint(len(windows), (32,))]
        labels = ids.clone()
        chosen = (torch.rand(ids.shape) < 0.15) & ~torch.isin(ids, special)
        labels[~chosen] = -100
        roll = torch.rand(ids.shape)
        ids = ids.clone()
        ids[chosen & (roll < 0.8)] = vocab["[MASK]"]
        swap = chosen & (roll >= 0.8) & (roll < 0.9)
        ids[swap] = torch.randint(len(special), len(vocab), (int(swap.sum()),))
        loss = model(input_ids=ids, labels=labels).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        schedule.step()
        optimizer.zero_grad()
        if step % 200 == 0 or step == steps - 1:
            print(f"step {step}: loss {loss.item():.3f} ({time.time() - start:.0f}s)", flush=True)
    model.eval().save_pretrained(folder)
    (folder / "vocab.txt").write_text((ROOT / "models/roformer-sst2/vocab.txt").read_text(encoding="utf-8"))
    (folder / "tokenizer_config.json").write_text(json.dumps({"tokenizer_class": "BertTokenizer", "do_lower_case": True}))
    return folder


def evaluate(model, eval_path):
    text = OUT / "eval.txt"
    text.write_text("\n".join(sentences(eval_path)) + "\n", encoding="utf-8")
    subprocess.run(["cargo", "build", "-q", "--release", "--example", "mlm_accuracy"], cwd=ROOT, check=True)
    exe = ROOT / "target/release/examples/mlm_accuracy"

    def run(lengths, scaling):
        args = [str(exe), "--model", str(model), "--input", str(text), "--lengths", ",".join(map(str, lengths))]
        if scaling:
            args += ["--rope-scaling", scaling]
        done = subprocess.run(args, capture_output=True, text=True, check=True)
        return [json.loads(l) for l in done.stdout.splitlines()]

    results = {"none": run(LENGTHS, None), "dynamic NTK (factor 2)": run(LENGTHS, "dynamic:2")}
    for name, kind in [("linear (factor L/128)", "linear"), ("YaRN (factor L/128)", "yarn")]:
        results[name] = run([TRAINED], None) + [r for n in LENGTHS[1:] for r in run([n], f"{kind}:{n // TRAINED}")]
    return results


def plot(results, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 4.0), dpi=120)
    for name, rows in results.items():
        ax.plot([r["length"] for r in rows], [100 * r["accuracy"] for r in rows], marker="o", label=name)
    ax.axvline(TRAINED, color="grey", linestyle=":", linewidth=1)
    ax.set_xscale("log", base=2)
    ax.set_xticks(LENGTHS, [str(n) for n in LENGTHS])
    ax.set_xlabel("input length (tokens); trained on 128")
    ax.set_ylabel("masked-token accuracy (%)")
    ax.set_title("Small RoFormer MLM, SST-2 dev text")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--train", default=str(ROOT.parent / "shared/data/glue/SST-2/train.tsv"))
    parser.add_argument("--eval", default=str(ROOT.parent / "shared/data/glue/SST-2/dev.tsv"))
    parser.add_argument("--steps", type=int, default=1000)
    args = parser.parse_args()
    torch.set_num_threads(2)
    OUT.mkdir(parents=True, exist_ok=True)
    model = pretrain(args.train, args.steps)
    results = evaluate(model, args.eval)
    (OUT / "results.json").write_text(json.dumps(results, indent=2))
    plot(results, ROOT / "docs" / "extrapolation.png")
    print("\n| scaling | " + " | ".join(str(n) for n in LENGTHS) + " |")
    print("| --- |" + " --- |" * len(LENGTHS))
    for name, rows in results.items():
        acc = {r["length"]: r["accuracy"] for r in rows}
        print(f"| {name} | " + " | ".join(f"{100 * acc[n]:.1f}%" for n in LENGTHS) + " |")
    masked = {r["length"]: r["masked"] for r in results["none"]}
    print("masked tokens per length: " + ", ".join(f"{n}: {masked[n]}" for n in LENGTHS))


if __name__ == "__main__":
    main()
