"""CrossEncoder against sentence-transformers 6.2's CrossEncoder on the cross_encoder fixture."""

import numpy as np
import pytest
from conftest import assert_close, fixture, reference, write_json
from roformer_rs import CrossEncoder


def test_predict_and_rank_as_sentence_transformers():
    want = reference("sentence_transformers", "cross_encoder", "expected.json")
    model = CrossEncoder(fixture("sentence_transformers", "cross_encoder"))
    pairs = [tuple(p) for p in want["pairs"]]
    scores = model.predict(pairs, batch_size=3)
    assert scores.dtype == np.float32 and scores.shape == (len(pairs),)
    assert_close("cross-encoder scores", scores, want["scores"])
    assert_close("cross-encoder logits", model.predict(pairs, activation_fn=lambda x: x), want["raw"])
    one = model.predict(pairs[0])
    assert np.isscalar(one) or np.ndim(one) == 0
    assert_close("one pair", one, want["scores"][0])
    ranked = model.rank(want["query"], want["documents"], return_documents=True)
    assert [r["corpus_id"] for r in ranked] == [r["index"] for r in want["rank"]]
    assert_close("rank scores", [r["score"] for r in ranked], [r["score"] for r in want["rank"]])
    assert [r["text"] for r in ranked] == [want["documents"][r["corpus_id"]] for r in ranked]
    assert len(model.rank(want["query"], want["documents"], top_k=2)) == 2
    assert model.rank("query", []) == []


def test_the_transformer_modules_settings_apply(fresh):
    want = reference("sentence_transformers", "cross_encoder", "expected.json")["transformer_config"]
    folder = fresh(fixture("sentence_transformers", "cross_encoder"))
    import json

    config = json.loads((folder / "sentence_bert_config.json").read_text())
    config.update(want["sentence_bert_config"])
    write_json(folder, "sentence_bert_config.json", config)
    tokenizer = json.loads((folder / "tokenizer.json").read_text())
    tokenizer["normalizer"]["lowercase"] = want["tokenizer_lowercase"]
    write_json(folder, "tokenizer.json", tokenizer)
    model = CrossEncoder(folder)
    assert model.max_length == 8
    assert_close("cross-encoder transformer config", model.predict([tuple(p) for p in want["pairs"]]), want["scores"])


def test_a_pair_of_the_wrong_shape_is_named():
    model = CrossEncoder(fixture("sentence_transformers", "cross_encoder"))
    with pytest.raises(TypeError, match=r"sentences\[1\]\[1\] is int"):
        model.predict([("a", "b"), ("c", 3)])
    with pytest.raises(ValueError, match=r"sentences\[0\] has 3 items"):
        model.predict([("a", "b", "c")])
