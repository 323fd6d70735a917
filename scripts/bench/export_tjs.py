# Exports the browser benchmark's models (ONNX for transformers.js, safetensors for ours). Run: .venv/bin/python scripts/bench/export_tjs.py
"""Model folders for the browser benchmark (scripts/bench/bench_wasm.mjs): one folder per model under
target/bench-wasm/models/{base,small}/ that both transformers.js and roformer-wasm load.

Usage:
    python3 -m venv .venv && .venv/bin/pip install -r scripts/requirements.txt
    .venv/bin/python scripts/bench/export_tjs.py [--vocab ../shared/data/vocab/bert-base-uncased] [--data .../dev.tsv]

- base: bench_e2e.py's base-size random-init classifier (12 layers, hidden 768, BERT uncased vocab);
- small: the bundled SST-2 model, models/roformer-sst2 (2 layers, hidden 128).
Each folder gets the safetensors files (config.json, model.safetensors, vocab.txt, tokenizer_config.json) and the
transformers.js layout: tokenizer.json (the fast BERT tokenizer's own save), onnx/model.onnx (f32) and
onnx/model_quantized.onnx (onnxruntime's dynamic int8, loaded with dtype 'q8'). Also writes
target/bench-wasm/reference.json: PyTorch's logits on the first dev sentences, for `bench_wasm.mjs --check`.
Skips whatever is already there.
"""

import argparse
import json
import shutil
import sys
import tempfile
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_e2e  # noqa: E402
from bench_e2e import ROOT, build_base, export_onnx, read_sentences, tokenizer_for  # noqa: E402

OUT = ROOT / "target" / "bench-wasm"
FILES = ["config.json", "model.safetensors", "vocab.txt", "tokenizer_config.json"]
CHECK_SENTENCES = 8
SPECIAL = {f"{t}_token": f"[{t.upper()}]" for t in ("cls", "sep", "pad", "unk", "mask")}


def prepare(source, folder):
    """Copy the safetensors folder's files into `folder` and add the transformers.js files."""
    folder.mkdir(parents=True, exist_ok=True)
    for name in FILES:
        if source != folder and not (folder / name).exists():
            shutil.copy(source / name, folder / name)
    tok_config = json.loads((folder / "tokenizer_config.json").read_text())
    # tokenizer_for() builds an uncased tokenizer: both vocabularies here are uncased.
    assert tok_config.get("do_lower_case", True) is True, tok_config
    # transformers.js picks its tokenizer class by this name; BertTokenizer is one it knows.
    assert tok_config["tokenizer_class"] in ("BertTokenizer", "BertTokenizerFast"), tok_config
    # transformers.js takes the special tokens (the pad id above all) from tokenizer_config.json, not tokenizer.json
    config = json.loads((folder / "config.json").read_text())
    wanted = {"model_max_length": config["max_position_embeddings"], **SPECIAL}
    if any(k not in tok_config for k in wanted):
        tok_config = {**wanted, **tok_config}
        (folder / "tokenizer_config.json").write_text(json.dumps(tok_config, indent=2))
    tok = tokenizer_for(folder)
    if not (folder / "tokenizer.json").exists():
        with tempfile.TemporaryDirectory() as tmp:
            tok.save_pretrained(tmp)
            shutil.copy(Path(tmp) / "tokenizer.json", folder / "tokenizer.json")
    onnx = folder / "onnx"
    if not (onnx / "model_quantized.onnx").exists():
        onnx.mkdir(exist_ok=True)
        bench_e2e.OUT = onnx  # export_onnx writes OUT/{name}.onnx and OUT/{name}-int8.onnx
        _, int8 = export_onnx(folder, "model")
        int8.rename(onnx / "model_quantized.onnx")
    return tok


def reference(folder, tok, sentences):
    """PyTorch's logits on `sentences`, padded as one batch like transformers.js does."""
    from transformers import RoFormerForSequenceClassification

    model = RoFormerForSequenceClassification.from_pretrained(folder).eval()
    enc = tok(sentences, padding=True, truncation=True, max_length=128, return_tensors="pt")
    with torch.no_grad():
        logits = model(**enc).logits
    return {"input_ids": enc["input_ids"].tolist(), "logits": logits.tolist()}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", default=str(ROOT.parent / "shared/data/glue/SST-2/dev.tsv"))
    parser.add_argument("--vocab", default=str(ROOT.parent / "shared/data/vocab/bert-base-uncased"))
    args = parser.parse_args()
    models = OUT / "models"
    models.mkdir(parents=True, exist_ok=True)
    sources = {"base": build_base(args.vocab, models), "small": ROOT / "models" / "roformer-sst2"}
    sentences = read_sentences(args.data)[:CHECK_SENTENCES]
    ref = {"sentences": sentences, "models": {}}
    for name, source in sources.items():
        folder = models / name
        tok = prepare(source, folder)
        ref["models"][name] = reference(folder, tok, sentences)
        print(f"{name}: {folder}", flush=True)
    (OUT / "reference.json").write_text(json.dumps(ref))


if __name__ == "__main__":
    main()
