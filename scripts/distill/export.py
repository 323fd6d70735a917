# Step 4 of the built-in model's distillation (issue 39): the shipped folder. Run after student.py:
#   .venv/bin/python scripts/distill/export.py
"""Writes the student (target/distill/student, or `--student FOLDER`) as the crate's built-in model,
models/roformer-sst2/, and the reference outputs that pin it, tests/fixtures/bundled/reference.json.

`--student A,B,C` writes the mean of several students' weights instead (a uniform "model soup", Wortsman et al.
2022): students of one shape trained from the same starting point, whose average often generalises better than
each. The config and tokenizer are the first folder's.

- model.safetensors holds every weight in f16 (half the bytes of f32, which the crate's 10 MiB leaves no room for),
  except `roformer.encoder.embed_positions.weight`: that is the sinusoid table, kept in f32 as transformers makes it
  (the crate computes its own and ignores this tensor).
- config.json says `"dtype": "float32"`, so that transformers runs the f16 bytes in f32, as the crate does, rather
  than in the file's dtype.
- vocab.txt and tokenizer_config.json (a lowercasing BertTokenizer) as the student was trained with.

Then transformers loads the written folder as a user would (AutoModelForSequenceClassification, AutoTokenizer) and
- scores SST-2 dev (the figure models/roformer-sst2/README.md quotes), written to target/distill/export.json;
- writes the logits of the sentences in tests/fixtures/bundled/sentences.txt to reference.json, which
  tests/integration/bundled_model.rs holds the crate to.
"""

import argparse
import json
from pathlib import Path

import torch
import transformers
from safetensors.torch import load_file, save_file
from transformers import AutoModelForSequenceClassification, AutoTokenizer, RoFormerConfig
from transformers import RoFormerForSequenceClassification

from common import GLUE, OUT, ROOT, read_tsv

POSITIONS = "roformer.encoder.embed_positions.weight"
SHIPPED = ROOT / "models" / "roformer-sst2"
FIXTURE = ROOT / "tests" / "fixtures" / "bundled"
# The config keys the crate and transformers read; the rest of what save_pretrained writes is defaults.
KEEP = ["vocab_size", "embedding_size", "hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size",
        "hidden_act", "hidden_dropout_prob", "attention_probs_dropout_prob", "max_position_embeddings",
        "type_vocab_size", "initializer_range", "layer_norm_eps", "pad_token_id", "rotary_value", "is_decoder",
        "id2label", "label2id", "architectures", "model_type"]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--student", default=str(OUT / "student"),
                        help="the folder student.py wrote, or several, comma-separated, to average")
    folders = [Path(f) for f in parser.parse_args().student.split(",")]
    student = folders[0]
    states = [load_file(f / "model.safetensors") for f in folders]
    shapes = [{name: tuple(t.shape) for name, t in state.items()} for state in states]
    for f, other in zip(folders[1:], shapes[1:]):
        assert other == shapes[0], f"{f} does not have {student}'s tensors"
    state = {name: (sum(s[name].double() for s in states) / len(states)).to(t.dtype) for name, t in states[0].items()}
    # RoFormer's sinusoid table is fixed, and the crate computes its own. A student continued with `--init` before
    # student.py froze it had it drift (by 0.013, the shipped one among them): write the table transformers makes.
    fresh = RoFormerForSequenceClassification(RoFormerConfig.from_pretrained(student))
    state[POSITIONS] = fresh.state_dict()[POSITIONS].clone()
    shipped = {name: (t if name == POSITIONS else t.to(torch.float16)).contiguous()
               for name, t in state.items()}
    SHIPPED.mkdir(parents=True, exist_ok=True)
    save_file(shipped, SHIPPED / "model.safetensors", metadata={"format": "pt"})
    (SHIPPED / "model.safetensors").chmod(0o644)
    full = json.loads((student / "config.json").read_text())
    config = {key: full[key] for key in KEEP if key in full}
    config["dtype"] = "float32"
    (SHIPPED / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    vocab = json.loads((student / "tokenizer.json").read_text())["model"]["vocab"]
    tokens = sorted(vocab, key=vocab.get)
    assert [vocab[t] for t in tokens] == list(range(len(tokens))), "the student's vocabulary has gaps"
    (SHIPPED / "vocab.txt").write_text("\n".join(tokens) + "\n", encoding="utf-8")
    (SHIPPED / "tokenizer_config.json").write_text(json.dumps({
        "cls_token": "[CLS]", "do_lower_case": True, "mask_token": "[MASK]", "pad_token": "[PAD]",
        "sep_token": "[SEP]", "strip_accents": None, "tokenize_chinese_chars": True, "tokenizer_class": "BertTokenizer",
        "unk_token": "[UNK]"}, indent=2) + "\n")

    # What a user of transformers gets from the shipped folder.
    model = AutoModelForSequenceClassification.from_pretrained(SHIPPED).eval()
    tok = AutoTokenizer.from_pretrained(SHIPPED)
    assert next(model.parameters()).dtype == torch.float32

    def logits(texts):
        out = []
        with torch.no_grad():
            for i in range(0, len(texts), 64):
                enc = tok(texts[i : i + 64], truncation=True, max_length=512, padding=True, return_tensors="pt")
                out += model(**enc).logits.tolist()
        return out

    dev_x, dev_y = read_tsv(GLUE / "dev.tsv")
    correct = sum((l[1] > l[0]) == (y == 1) for l, y in zip(logits(dev_x), dev_y))
    report = {"dev_correct": correct, "dev_total": len(dev_x), "dev_accuracy": correct / len(dev_x),
              "parameters": sum(p.numel() for n, p in model.named_parameters() if "embed_positions" not in n),
              "bytes": (SHIPPED / "model.safetensors").stat().st_size, "torch": torch.__version__,
              "transformers": transformers.__version__}
    (OUT / "export.json").write_text(json.dumps(report, indent=1))
    print(json.dumps(report, indent=1))

    sentences = [s for s in (FIXTURE / "sentences.txt").read_text(encoding="utf-8").split("\n") if s]
    reference = {"source": "transformers " + transformers.__version__ + " on models/roformer-sst2 (scripts/distill/export.py)",
                 "sentences": sentences, "logits": logits(sentences)}
    (FIXTURE / "reference.json").write_text(json.dumps(reference, indent=1) + "\n")


if __name__ == "__main__":
    main()
