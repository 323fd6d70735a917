"""Writes small random-init RoFormer sentence-transformers folders and a cross-encoder into
tests/fixtures/sentence_transformers, with what sentence-transformers gives for them (expected.json in each).

Usage: .venv/bin/python scripts/make_st_fixtures.py   (after: pip install -r scripts/requirements.txt)

- st6_cls_dense: saved by sentence-transformers 6 as it saves (tokenizer.json, no vocab.txt; its module type names):
  CLS pooling, Dense(32 -> 24, tanh), Normalize; prompts with a default_prompt_name.
- old_mean: the layout of older releases (sentence_bert_config.json with max_seq_length, `sentence_transformers.models.*`
  type names, pooling_mode_* flags, vocab.txt): mean pooling, no Dense, no Normalize. expected.json also holds, over the
  same transformer, every other pooling mode (the v6 1_Pooling/config.json to write, and the embeddings), prompts
  excluded from pooling (include_prompt false), and a Dense read from pytorch_model.bin.
- cross_encoder: a RoFormerForSequenceClassification with one label, saved by CrossEncoder; CrossEncoder.predict (sigmoid
  and raw) and rank.
"""

import json
import shutil
import tempfile
from pathlib import Path

import torch
from make_model_fixtures import randomise
from make_pipeline_fixtures import config
from sentence_transformers import CrossEncoder, SentenceTransformer
from sentence_transformers.base.modules import Dense, Normalize, Transformer
from sentence_transformers.sentence_transformer.modules import Pooling
from transformers import BertTokenizerFast, RoFormerForSequenceClassification, RoFormerModel

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "tests" / "fixtures" / "sentence_transformers"

TEXTS = [
    "the cat sat on the mat",
    "a great film",
    "",
    "what a time to be alive",
    "the acting is good but the story is weak and the ending makes no sense at all " * 3,
    "I loved it!",
]
QUERY = "a good movie"
DOCS = ["the movie was terrible", "a great film", "the cat sat on the mat", "a great film", "what a good movie"]
PROMPTS = {"query": "query: ", "passage": "passage: ", "empty": ""}


def small_vocab():
    full = (ROOT / "tests/fixtures/vocab/bert-base-uncased/vocab.txt").read_text(encoding="utf-8").split("\n")[:-1]
    words = {w for t in TEXTS + DOCS + [QUERY] + list(PROMPTS.values())
             for w in t.lower().replace("!", " ! ").replace(":", " : ").split()}
    keep = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + full[1996:2100] + sorted(w for w in words if w in full)
    seen, vocab = set(), []
    for t in keep:
        if t not in seen:
            seen.add(t)
            vocab.append(t)
    return vocab


def hf_folder(model, tokenizer):
    """A transformers folder for sentence-transformers' Transformer module to load."""
    folder = Path(tempfile.mkdtemp())
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def encodings(model, **kw):
    return model.encode(TEXTS, convert_to_numpy=True, batch_size=4, **kw).tolist()


def dump(folder, expected):
    (folder / "expected.json").write_text(json.dumps(expected, indent=1))
    files = sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file())
    print(folder.name, files)


def st6_cls_dense(vocab, tokenizer):
    torch.manual_seed(0)
    model = randomise(RoFormerModel(config(vocab)), 11)
    dense = Dense(32, 24, activation_function=torch.nn.Tanh())
    with torch.no_grad():
        dense.linear.weight.copy_(0.3 * torch.randn(24, 32))
        dense.linear.bias.copy_(0.3 * torch.randn(24))
    st = SentenceTransformer(modules=[Transformer(str(hf_folder(model, tokenizer))), Pooling(32, "cls"), dense,
                                      Normalize()], prompts=PROMPTS, default_prompt_name="query")
    folder = OUT / "st6_cls_dense"
    shutil.rmtree(folder, ignore_errors=True)
    st.save(str(folder), create_model_card=False)
    for extra in ("vocab.txt", "README.md"):
        (folder / extra).unlink(missing_ok=True)
    st = SentenceTransformer(str(folder), device="cpu")
    assert st.default_prompt_name == "query"
    dump(folder, {
        "texts": TEXTS,
        "default": encodings(st),
        "prompt_name": {name: encodings(st, prompt_name=name) for name in PROMPTS},
        "prompt": {"literal: ": encodings(st, prompt="literal: ")},
        "truncate_dim": {"16": encodings(st, truncate_dim=16)},
        "max_seq_length": st.max_seq_length,
    })


def old_mean(vocab, tokenizer):
    torch.manual_seed(1)
    model = randomise(RoFormerModel(config(vocab)), 12)
    folder = OUT / "old_mean"
    shutil.rmtree(folder, ignore_errors=True)
    st = SentenceTransformer(modules=[Transformer(str(hf_folder(model, tokenizer)), max_seq_length=24),
                                      Pooling(32, "mean")], prompts=PROMPTS)
    st.save(str(folder), create_model_card=False)
    # Rewrite what sentence-transformers 6 saved into the layout of older releases.
    (folder / "modules.json").write_text(json.dumps([
        {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
        {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
    ], indent=2))
    (folder / "sentence_bert_config.json").write_text(json.dumps({"max_seq_length": 24, "do_lower_case": False}))
    (folder / "1_Pooling" / "config.json").write_text(json.dumps({
        "word_embedding_dimension": 32, "pooling_mode_cls_token": False, "pooling_mode_mean_tokens": True,
        "pooling_mode_max_tokens": False, "pooling_mode_mean_sqrt_len_tokens": False,
        "pooling_mode_weightedmean_tokens": False, "pooling_mode_lasttoken": False, "include_prompt": True}, indent=2))
    cst = json.loads((folder / "config_sentence_transformers.json").read_text())
    (folder / "config_sentence_transformers.json").write_text(json.dumps({
        "__version__": {"sentence_transformers": "2.2.2", "transformers": "4.30.2", "pytorch": "2.0.1"},
        "prompts": cst["prompts"], "default_prompt_name": None}, indent=2))
    for extra in ("tokenizer.json", "README.md"):
        (folder / extra).unlink(missing_ok=True)
    (folder / "vocab.txt").write_text("\n".join(vocab) + "\n", encoding="utf-8")
    st = SentenceTransformer(str(folder), device="cpu")
    assert st.max_seq_length == 24 and st.default_prompt_name is None
    expected = {"texts": TEXTS, "default": encodings(st), "max_seq_length": st.max_seq_length,
                "prompt_name": {"passage": encodings(st, prompt_name="passage")}, "variants": []}
    # Every other pooling, over the same transformer: the v6 1_Pooling/config.json a test writes, and what
    # sentence-transformers gives for that folder.
    transformer = st[0]
    for mode, include_prompt, prompt_name in (
        ("cls", True, None), ("max", True, None), ("mean_sqrt_len_tokens", True, None),
        ("weightedmean", True, None), ("lasttoken", True, None), (["cls", "mean", "max"], True, None),
        ("mean", False, "passage"), ("cls", False, "passage"), ("weightedmean", False, "passage"),
        ("lasttoken", False, "passage"),
    ):
        pooling = Pooling(32, mode, include_prompt=include_prompt)
        variant = SentenceTransformer(modules=[transformer, pooling], prompts=PROMPTS)
        kw = {"prompt_name": prompt_name} if prompt_name else {}
        expected["variants"].append({
            "pooling_config": {"embedding_dimension": 32, "pooling_mode": mode, "include_prompt": include_prompt},
            "prompt_name": prompt_name, "embeddings": encodings(variant, **kw)})
    # A Dense whose weights are in pytorch_model.bin, with no Normalize after it.
    dense = Dense(32, 8, bias=False, activation_function=torch.nn.Identity())
    with torch.no_grad():
        dense.linear.weight.copy_(0.3 * torch.randn(8, 32))
    variant = SentenceTransformer(modules=[transformer, Pooling(32, "mean"), dense], prompts=PROMPTS)
    dense_dir = folder / "dense_bin"
    dense_dir.mkdir()
    dense.save(str(dense_dir), safe_serialization=False)
    expected["dense_bin"] = {"config": json.loads((dense_dir / "config.json").read_text()),
                             "embeddings": encodings(variant)}
    dump(folder, expected)


def cross_encoder(vocab, tokenizer):
    torch.manual_seed(2)
    model = randomise(RoFormerForSequenceClassification(config(vocab, num_labels=1)), 13)
    ce = CrossEncoder(str(hf_folder(model, tokenizer)), device="cpu")
    assert ce.num_labels == 1
    folder = OUT / "cross_encoder"
    shutil.rmtree(folder, ignore_errors=True)
    ce.save(str(folder))
    (folder / "README.md").unlink(missing_ok=True)
    ce = CrossEncoder(str(folder), device="cpu")
    pairs = [(QUERY, d) for d in DOCS] + [("", "an empty query"), (TEXTS[4], "a long query")]
    ranked = ce.rank(QUERY, DOCS)
    dump(folder, {
        "pairs": pairs,
        "scores": ce.predict(pairs, batch_size=3).tolist(),
        "raw": ce.predict(pairs, batch_size=3, activation_fn=torch.nn.Identity()).tolist(),
        "query": QUERY, "documents": DOCS,
        "rank": [{"index": int(r["corpus_id"]), "score": float(r["score"])} for r in ranked],
    })


def main():
    vocab = small_vocab()
    tokenizer = BertTokenizerFast(vocab={t: i for i, t in enumerate(vocab)}, do_lower_case=True, model_max_length=64)
    OUT.mkdir(parents=True, exist_ok=True)
    st6_cls_dense(vocab, tokenizer)
    old_mean(vocab, tokenizer)
    cross_encoder(vocab, tokenizer)


if __name__ == "__main__":
    main()
