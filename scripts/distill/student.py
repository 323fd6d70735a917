# Step 3 of the built-in model's distillation (issue 39): the RoFormer student. Run after augment.py:
#   .venv/bin/python scripts/distill/student.py
"""Distils the teacher into a small RoFormerForSequenceClassification, trained on the transfer set
(target/distill/transfer.jsonl: SST-2 train plus augmented sentences, with the logits of the teacher augment.py
labelled them with: the mpnet one by default).

The student starts from the fine-tuned MiniLM's weights (target/distill/teacher; "the teacher" below, as the code
names it), cut down to fit the crate:
- a vocabulary of `--vocab` WordPiece tokens: the five specials, every ASCII character (alone and as `##` piece, so
  that any English word still splits into known pieces), then the teacher's tokens by their count in SST-2 train;
- word embeddings `--embedding-size` wide, from a truncated SVD of the kept rows of the teacher's 384-wide table: the
  left factor becomes the table, the right factor RoFormer's `embeddings_project` (a linear map back to 384);
- `--layers` of the teacher's 6 layers (`--pick`, default every other one from the first). RoFormer has no absolute
  positions: the rotary embedding takes the place of BERT's position table, and training adapts the layers to it;
- each feed-forward cut from 1536 to `--intermediate` neurons, keeping those with the largest mean |activation| on
  2,048 training sentences times the norm of their output weights;
- the classification head from the teacher's pooler and classifier.

Loss: mean squared error to the teacher's logits on every sentence (Tang et al. 2019), plus cross-entropy to the gold
label on the original training sentences (weight 0.5). AdamW (lr 1e-4, weight decay 0.01, none on biases and norms),
linear warm-up over 6% of the steps then linear decay, batch 64, inputs cut at 64 tokens, seeded. After each epoch
SST-2 dev is scored (never trained on); the best epoch is kept. Writes target/distill/student/ (a transformers folder
in f32, with vocab.txt) and its report.json.

Usage: .venv/bin/python scripts/distill/student.py [--epochs 3] [--vocab 9000] [--embedding-size 128] [--layers 3]
       [--pick 0,2,5] [--intermediate 512] [--lr 1e-4] [--hidden-weight 0] [--init FOLDER] [--max-minutes 0 (no limit)]
       [--transfer transfer.jsonl] [--ema 0] [--out target/distill/student]
`--init` continues training a student folder this script wrote (same loss) instead of cutting the teacher again.
`--transfer FILE[,FILE]` reads other transfer sets under target/distill (augment.py `--out`), each sentence once.
`--ema 0.999` also keeps an exponential moving average of the weights and scores it after each epoch beside them;
the better of the two is kept.
"""

import argparse
import collections
import json
import math
import random
import time
from pathlib import Path

import torch
import transformers
from transformers import AutoModelForSequenceClassification, AutoTokenizer, BertTokenizerFast, RoFormerConfig
from transformers import RoFormerForSequenceClassification

from common import GLUE, MAX_LEN, OUT, accuracy, cpu_name, length_batches, read_tsv, update, warmup_then_decay

SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]


def cut_vocabulary(teacher_tok, train_x, size):
    counts = collections.Counter(t for s in train_x for t in teacher_tok.tokenize(s))
    full = teacher_tok.get_vocab()
    chars = sorted((t for t in full if len(t.removeprefix("##")) == 1 and t.removeprefix("##").isascii()), key=full.get)
    vocab = list(SPECIALS) + chars
    have = set(vocab)
    for token, _ in counts.most_common():
        if len(vocab) >= size:
            break
        if token not in have:
            vocab.append(token)
            have.add(token)
    return vocab


def student_tokenizer(vocab):
    return BertTokenizerFast(vocab={t: i for i, t in enumerate(vocab)}, do_lower_case=True, model_max_length=512)


def ffn_importance(teacher, tok, texts):
    """Per layer, mean |GELU output| of each feed-forward neuron on `texts`, times the norm of its output weights."""
    sums, hooks = {}, []
    for i, layer in enumerate(teacher.bert.encoder.layer):
        def hook(_m, _inp, out, i=i):
            sums[i] = sums.get(i, 0) + out.abs().sum(dim=(0, 1))
        hooks.append(layer.intermediate.register_forward_hook(hook))
    with torch.no_grad():
        for b in range(0, len(texts), 256):
            teacher(**tok(texts[b : b + 256], truncation=True, max_length=MAX_LEN, padding=True, return_tensors="pt"))
    for h in hooks:
        h.remove()
    return {i: s * layer.output.dense.weight.norm(dim=0) for i, (s, layer) in
            enumerate(zip(sums.values(), teacher.bert.encoder.layer))}


def build_student(teacher, teacher_tok, vocab, args, train_x):
    picks = [int(p) for p in args.pick.split(",")] if args.pick else list(range(0, 2 * args.layers, 2))[: args.layers]
    config = RoFormerConfig(
        vocab_size=len(vocab), embedding_size=args.embedding_size, hidden_size=384, num_hidden_layers=len(picks),
        num_attention_heads=12, intermediate_size=args.intermediate, hidden_act="gelu", hidden_dropout_prob=0.1,
        attention_probs_dropout_prob=0.1, max_position_embeddings=512, type_vocab_size=2, initializer_range=0.02,
        layer_norm_eps=1e-12, pad_token_id=0, rotary_value=False, num_labels=2,
        id2label={0: "negative", 1: "positive"}, label2id={"negative": 0, "positive": 1},
    )
    student = RoFormerForSequenceClassification(config)
    t = teacher.bert
    full = teacher_tok.get_vocab()
    with torch.no_grad():
        rows = t.embeddings.word_embeddings.weight[[full[w] for w in vocab]]
        u, s, vt = torch.linalg.svd(rows, full_matrices=False)
        e = args.embedding_size
        emb = student.roformer.embeddings
        emb.word_embeddings.weight.copy_(u[:, :e] * s[:e])
        emb.token_type_embeddings.weight.copy_(t.embeddings.token_type_embeddings.weight @ vt[:e].T)
        project = student.roformer.embeddings_project
        project.weight.copy_(vt[:e].T)
        project.bias.zero_()
        importance = ffn_importance(teacher, teacher_tok, train_x[:2048])
        for j, i in enumerate(picks):
            src, dst = t.encoder.layer[i], student.roformer.encoder.layer[j]
            for name in ("query", "key", "value"):
                getattr(dst.attention.self, name).load_state_dict(getattr(src.attention.self, name).state_dict())
            dst.attention.output.load_state_dict(src.attention.output.state_dict())
            keep = importance[i].topk(args.intermediate).indices.sort().values
            dst.intermediate.dense.weight.copy_(src.intermediate.dense.weight[keep])
            dst.intermediate.dense.bias.copy_(src.intermediate.dense.bias[keep])
            dst.output.dense.weight.copy_(src.output.dense.weight[:, keep])
            dst.output.dense.bias.copy_(src.output.dense.bias)
            dst.output.LayerNorm.load_state_dict(src.output.LayerNorm.state_dict())
        student.classifier.dense.load_state_dict(t.pooler.dense.state_dict())
        student.classifier.out_proj.load_state_dict(teacher.classifier.state_dict())
    return student, picks


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--vocab", type=int, default=9000)
    parser.add_argument("--embedding-size", type=int, default=128)
    parser.add_argument("--layers", type=int, default=3)
    parser.add_argument("--pick", default="", help="teacher layers to keep, e.g. 0,2,4 (default: every other one)")
    parser.add_argument("--intermediate", type=int, default=512)
    parser.add_argument("--lr", type=float, default=1e-4)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--max-minutes", type=float, default=0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--hidden-weight", type=float, default=0.0,
                        help="weight of matching each student layer's [CLS] and mean states to its teacher layer's")
    parser.add_argument("--init", default="", help="continue from this student folder instead of cutting the teacher")
    parser.add_argument("--transfer", default="transfer.jsonl",
                        help="the transfer set, a file under target/distill, or several joined by commas")
    parser.add_argument("--ema", type=float, default=0.0,
                        help="also score an exponential moving average of the weights (decay, e.g. 0.999) after "
                             "each epoch, and keep it where it scores higher")
    parser.add_argument("--out", default=str(OUT / "student"))
    args = parser.parse_args()
    rng = random.Random(args.seed)
    torch.manual_seed(args.seed)

    teacher_tok = AutoTokenizer.from_pretrained(OUT / "teacher")
    teacher = AutoModelForSequenceClassification.from_pretrained(OUT / "teacher").eval()
    train_x, _ = read_tsv(GLUE / "train.tsv")
    dev_x, dev_y = read_tsv(GLUE / "dev.tsv")
    if args.init:
        tok = AutoTokenizer.from_pretrained(args.init)
        vocab = sorted(tok.get_vocab(), key=tok.get_vocab().get)
        student = RoFormerForSequenceClassification.from_pretrained(args.init, dtype=torch.float32)
        picks = json.loads((Path(args.init) / "report.json").read_text())["teacher_layers"]
    else:
        vocab = cut_vocabulary(teacher_tok, train_x, args.vocab)
        tok = student_tokenizer(vocab)
        student, picks = build_student(teacher, teacher_tok, vocab, args, train_x)
    # The sinusoid table is RoFormer's fixed positions, not a weight: from_pretrained (`--init`) leaves it trainable,
    # and weight decay then moved it (by 0.013 in three epochs), away from what the crate computes.
    student.roformer.encoder.embed_positions.weight.requires_grad_(False)
    if not args.hidden_weight:
        del teacher
    params = sum(p.numel() for n, p in student.named_parameters() if "embed_positions" not in n)
    initial = accuracy(student, tok, dev_x, dev_y)
    print(f"student: {params / 1e6:.2f} M parameters, layers {picks}; dev accuracy before training {initial:.4f}",
          flush=True)

    items, seen = [], set()
    for name in args.transfer.split(","):
        for line in open(OUT / name, encoding="utf-8"):
            item = json.loads(line)
            # Sets drawn from the same training sentences share them (and some augmented ones): once each.
            if item["text"] not in seen:
                seen.add(item["text"])
                items.append(item)
    texts = [it["text"] for it in items]
    ids = tok(texts, truncation=True, max_length=MAX_LEN)["input_ids"]
    target = torch.tensor([it["logits"] for it in items])
    gold = torch.tensor([it.get("label", -100) for it in items])
    lengths = [len(x) for x in ids]

    steps_per_epoch = math.ceil(len(items) / args.batch)
    steps = args.epochs * steps_per_epoch
    decay = [p for n, p in student.named_parameters() if p.requires_grad and p.ndim > 1]
    no_decay = [p for n, p in student.named_parameters() if p.requires_grad and p.ndim <= 1]
    optimizer = torch.optim.AdamW([{"params": decay, "weight_decay": 0.01}, {"params": no_decay, "weight_decay": 0.0}],
                                  lr=args.lr)
    schedule = warmup_then_decay(optimizer, steps)
    ce = torch.nn.CrossEntropyLoss(ignore_index=-100)
    ema = None
    if args.ema:
        ema = torch.optim.swa_utils.AveragedModel(
            student, multi_avg_fn=torch.optim.swa_utils.get_ema_multi_avg_fn(args.ema))
    start, step, history, best, stop = time.time(), 0, [], (-1.0, None), False
    student.train()
    for epoch in range(args.epochs):
        for idx in length_batches(len(items), lengths, args.batch, rng):
            width = max(lengths[j] for j in idx)
            input_ids = torch.zeros(len(idx), width, dtype=torch.long)
            mask = torch.zeros(len(idx), width, dtype=torch.long)
            for r, j in enumerate(idx):
                input_ids[r, : lengths[j]] = torch.tensor(ids[j])
                mask[r, : lengths[j]] = 1
            out = student(input_ids=input_ids, attention_mask=mask, output_hidden_states=bool(args.hidden_weight))
            logits = out.logits
            loss = torch.nn.functional.mse_loss(logits, target[idx])
            if args.hidden_weight:
                # The two vocabularies split some words differently, so tokens do not line up: each layer's
                # [CLS] state and its mean over the tokens are matched instead.
                with torch.no_grad():
                    enc = teacher_tok([texts[j] for j in idx], truncation=True, max_length=MAX_LEN, padding=True,
                                      return_tensors="pt")
                    states = teacher.bert(**enc, output_hidden_states=True).hidden_states
                    t_mask = enc["attention_mask"].unsqueeze(-1).float()
                s_mask = mask.unsqueeze(-1).float()
                for j in range(len(picks)):
                    # Uniformly, as TinyBERT maps: student layer j + 1 of L does teacher layers up to (j + 1)·6/L.
                    s, t = out.hidden_states[j + 1], states[(j + 1) * 6 // len(picks)]
                    loss = loss + args.hidden_weight * (
                        torch.nn.functional.mse_loss(s[:, 0], t[:, 0])
                        + torch.nn.functional.mse_loss((s * s_mask).sum(1) / s_mask.sum(1), (t * t_mask).sum(1) / t_mask.sum(1)))
            if (gold[idx] >= 0).any():
                loss = loss + 0.5 * ce(logits, gold[idx])
            update(loss, student, optimizer, schedule)
            if ema is not None:
                ema.update_parameters(student)
            step += 1
            minutes = (time.time() - start) / 60
            if step % 200 == 0:
                print(f"epoch {epoch + 1} step {step}/{steps} loss {loss.item():.4f} {minutes:.1f} min", flush=True)
            if args.max_minutes and minutes >= args.max_minutes:
                stop = True
                break
        acc = accuracy(student, tok, dev_x, dev_y)
        entry = {"epoch": epoch + 1, "step": step, "minutes": round((time.time() - start) / 60, 1),
                 "dev_accuracy": acc}
        candidates = [(acc, student, "")]
        if ema is not None:
            entry["dev_accuracy_ema"] = accuracy(ema.module, tok, dev_x, dev_y)
            candidates.append((entry["dev_accuracy_ema"], ema.module, " ema"))
        history.append(entry)
        print(f"epoch {epoch + 1}: SST-2 dev accuracy {acc:.4f}"
              + (f", the weights' moving average {entry['dev_accuracy_ema']:.4f}" if ema is not None else ""),
              flush=True)
        for score, model, which in candidates:
            if score > best[0]:
                best = (score, f"{epoch + 1}{which}")
                out = Path(args.out)
                model.save_pretrained(out)
                tok.save_pretrained(out)
        if stop:
            break
    report = {
        "parameters": params, "teacher_layers": picks, "vocab": len(vocab), "embedding_size": args.embedding_size,
        "intermediate": args.intermediate, "transfer_set": len(items), "batch": args.batch, "lr": args.lr,
        "epochs": args.epochs, "transfer": args.transfer, "ema": args.ema, "steps": step, "stopped_by_time": stop,
        "seed": args.seed,
        "dev_accuracy_before_training": initial, "history": history, "best_epoch": best[1],
        "dev_accuracy": best[0], "minutes": round((time.time() - start) / 60, 1), "cpu": cpu_name(),
        "threads": torch.get_num_threads(), "torch": torch.__version__, "transformers": transformers.__version__,
    }
    (Path(args.out) / "report.json").write_text(json.dumps(report, indent=1))
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
