"""SentenceEncoder against sentence-transformers 6.2's and transformers' outputs on the fixtures."""

import numpy as np
import pytest
import roformer_rs
from conftest import assert_close, fixture, reference, write_json
from roformer_rs import SentenceEncoder


def test_a_plain_checkpoint_pools_as_transformers_computes_it():
    want = reference("pipelines", "sim", "expected.json")
    for pooling in ("cls", "mean", "pooler"):
        model = SentenceEncoder(fixture("pipelines", "sim"), pooling=pooling, normalize=False)
        ours = model.encode(want["texts"], batch_size=4)
        assert ours.dtype == np.float32 and ours.shape == (10, 32)
        assert_close(f"sim {pooling}", ours, want[pooling])
        unit = SentenceEncoder(fixture("pipelines", "sim"), pooling=pooling).encode(want["texts"])
        assert_close(f"sim {pooling} normalized", np.linalg.norm(unit, axis=1), np.ones(10))
        assert_close(f"sim {pooling} direction", unit, ours / np.linalg.norm(ours, axis=1, keepdims=True))


def test_a_sentence_transformers_6_folder_with_its_prompts():
    want = reference("sentence_transformers", "st6_cls_dense", "expected.json")
    model = SentenceEncoder(fixture("sentence_transformers", "st6_cls_dense"))
    assert model.get_embedding_dimension() == 24 == model.get_sentence_embedding_dimension()
    assert model.max_seq_length == want["max_seq_length"]
    assert sorted(model.prompts) == ["document", "empty", "passage", "query"]
    texts = want["texts"]
    assert_close("st6 default prompt", model.encode(texts, batch_size=3), want["default"])
    for name, rows in want["prompt_name"].items():
        assert_close(f"st6 prompt_name {name}", model.encode(texts, prompt_name=name, batch_size=3), rows)
    for text, rows in want["prompt"].items():
        assert_close(f"st6 prompt {text!r}", model.encode(texts, prompt=text), rows)
    assert_close("st6 encode_query", model.encode_query(texts), want["prompt_name"]["query"])
    # The folder's document prompt is empty: the reference of its `empty` prompt.
    assert model.prompts["document"] == ""
    assert_close("st6 encode_document", model.encode_document(texts), want["prompt_name"]["empty"])
    cut = SentenceEncoder(fixture("sentence_transformers", "st6_cls_dense"), truncate_dim=16)
    assert cut.get_embedding_dimension() == 16
    assert_close("st6 truncate_dim 16", cut.encode(texts), want["truncate_dim"]["16"])
    assert_close("st6 truncate_dim per call", model.encode(texts, truncate_dim=16), want["truncate_dim"]["16"])
    with pytest.raises(ValueError, match="search"):
        model.encode(texts, prompt_name="search")


def test_an_older_folder_and_every_pooling_mode(fresh):
    want = reference("sentence_transformers", "old_mean", "expected.json")
    texts = want["texts"]
    model = SentenceEncoder(fixture("sentence_transformers", "old_mean"))
    assert model.max_seq_length == 24
    assert_close("old_mean default", model.encode(texts, batch_size=3), want["default"])
    assert_close("old_mean passage", model.encode(texts, prompt_name="passage"), want["prompt_name"]["passage"])
    for i, variant in enumerate(want["variants"]):
        folder = fresh(fixture("sentence_transformers", "old_mean"), f"variant{i}")
        write_json(folder, "1_Pooling/config.json", variant["pooling_config"])
        ours = SentenceEncoder(folder).encode(texts, prompt_name=variant.get("prompt_name"))
        assert_close(f"old_mean pooling {variant['pooling_config']}", ours, variant["embeddings"])


def test_shapes_and_outputs_as_sentence_transformers_returns_them():
    model = SentenceEncoder(fixture("sentence_transformers", "old_mean"))
    one = model.encode("a great film")
    assert one.shape == (32,) and one.dtype == np.float32
    empty = model.encode([])
    assert empty.shape == (0, 32) and empty.dtype == np.float32
    rows = model.encode(["a", "b c"], convert_to_numpy=False)
    assert isinstance(rows, list) and [r.shape for r in rows] == [(32,), (32,)]
    unit = model.encode(["a", "b c"], normalize_embeddings=True)
    assert_close("normalize_embeddings", np.linalg.norm(unit, axis=1), [1.0, 1.0])
    # One call with a generator and the same texts as a list agree.
    assert np.array_equal(model.encode(t for t in ["a", "b c"]), model.encode(["a", "b c"]))
    binary = model.encode(["a", "b c", "d"], precision="ubinary")
    assert binary.dtype == np.uint8 and binary.shape == (3, 4)
    floats = model.encode(["a", "b c", "d"])
    assert np.array_equal(np.unpackbits(binary, axis=1).astype(bool), floats > 0)
    int8 = model.encode(["a", "b c", "d"], precision="int8")
    assert int8.dtype == np.int8 and int8.min() == -128 and int8.max() == 127


def test_token_embeddings_are_the_last_hidden_states():
    want = reference("pipelines", "sim", "expected.json")
    model = SentenceEncoder(fixture("pipelines", "sim"), pooling="cls", normalize=False)
    tokens = model.encode(want["texts"], output_value="token_embeddings")
    assert len(tokens) == 10 and all(t.ndim == 2 and t.shape[1] == 32 for t in tokens)
    # The [CLS] row is the cls pooling's embedding, and the mean of all rows the mean pooling's.
    assert_close("token embeddings [CLS]", np.stack([t[0] for t in tokens]), want["cls"])
    assert_close("token embeddings mean", np.stack([t.mean(axis=0) for t in tokens]), want["mean"])


def test_similarity_is_sentence_transformers_cosine():
    want = reference("sentence_transformers", "st6_cls_dense", "expected.json")
    model = SentenceEncoder(fixture("sentence_transformers", "st6_cls_dense"))
    e = model.encode(want["texts"])
    ref = np.asarray(want["default"], dtype=np.float64)
    ref = ref / np.linalg.norm(ref, axis=1, keepdims=True)
    assert model.similarity_fn_name == "cosine"
    assert_close("similarity", model.similarity(e, e), ref @ ref.T)
    assert_close("similarity_pairwise", model.similarity_pairwise(e, e), np.ones(len(e)))
    assert roformer_rs.similarity(e[:2], e, "dot").shape == (2, len(e))


def test_the_alias_code_written_for_sentence_transformers_imports():
    assert roformer_rs.SentenceTransformer is SentenceEncoder
