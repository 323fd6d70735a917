"""What the distillation steps (teacher.py, augment.py, student.py, export.py) share: where things are, SST-2's
TSV, the dev accuracy of a classifier, and the CPU's name for their reports. Not run on its own."""

import contextlib
import platform
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[2]
OUT = ROOT / "target" / "distill"
GLUE = ROOT.parent / "shared" / "data" / "glue" / "SST-2"
MAX_LEN = 64


def read_tsv(path):
    """A GLUE SST-2 file's sentences (stripped) and labels."""
    lines = path.read_text(encoding="utf-8").split("\n")
    header = lines[0].split("\t")
    rows = [dict(zip(header, line.split("\t"))) for line in lines[1:] if line.strip()]
    return [r["sentence"].strip() for r in rows], [int(r["label"]) for r in rows]


def bf16(enabled):
    """Autocast to bf16 on the CPU where `enabled` (the mpnet teacher's training and labelling), a no-op otherwise."""
    return torch.autocast("cpu", dtype=torch.bfloat16) if enabled else contextlib.nullcontext()


def length_batches(n_items, lengths, batch, rng):
    """Seeded order; batches of similar length (sorted within windows of 50 batches) to waste little on padding."""
    order = list(range(n_items))
    rng.shuffle(order)
    out = []
    window = 50 * batch
    for w in range(0, len(order), window):
        chunk = sorted(order[w : w + window], key=lengths.__getitem__)
        out += [chunk[i : i + batch] for i in range(0, len(chunk), batch)]
    rng.shuffle(out)
    return out


def warmup_then_decay(optimizer, steps):
    """The learning rate of both training scripts: linear warm-up over 6% of `steps`, then linear decay to 0."""
    warmup = int(0.06 * steps)
    return torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda s: min((s + 1) / max(1, warmup), max(0.0, (steps - s) / max(1, steps - warmup))))


def update(loss, model, optimizer, schedule):
    """One training step of both scripts: backward, gradients clipped to norm 1, the optimizer and schedule stepped."""
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    optimizer.step(), schedule.step(), optimizer.zero_grad()


def accuracy(model, tok, texts, labels, batch=128, autocast=False):
    """The share of `labels` the classifier's argmax gives, inputs cut at MAX_LEN tokens (under bf16 autocast where
    `autocast`); leaves it in training mode."""
    model.eval()
    correct = 0
    with torch.no_grad(), bf16(autocast):
        for i in range(0, len(texts), batch):
            enc = tok(texts[i : i + batch], truncation=True, max_length=MAX_LEN, padding=True, return_tensors="pt")
            correct += (model(**enc).logits.argmax(-1) == torch.tensor(labels[i : i + batch])).sum().item()
    model.train()
    return correct / len(texts)


def cpu_name():
    return next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")),
                platform.processor())
