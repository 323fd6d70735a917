"""pipeline(task) against transformers' pipelines (5.23; 4.57.1 for question answering) and models
on the fixtures: the same keys, nesting and values."""

import numpy as np
import pytest
from conftest import assert_close, fixture, reference
from roformer_rs import pipeline


def sigmoid(x):
    return 1 / (1 + np.exp(-np.asarray(x, dtype=np.float64)))


@pytest.mark.parametrize("name", ["cls", "multilabel", "regression"])
def test_text_classification_for_every_problem_type(name):
    want = reference("pipelines", name, "expected.json")
    classifier = pipeline("text-classification", model=fixture("pipelines", name), batch_size=3)
    texts = [c["input"][0] for c in want["texts"]]
    # transformers' rule: the sigmoid for one label when the config names no problem type.
    scores = [sigmoid(c["logits"]) if name == "regression" else c["scores"] for c in want["texts"]]
    every = classifier(texts, top_k=None)
    for case, ours, score in zip(want["texts"], every, scores):
        assert_close(f"{name} {case['input'][0]!r}", [d["score"] for d in sorted(ours, key=lambda d: d["label"])],
                     [score[i] for i in np.argsort(classifier.model.labels, kind="stable")])
    best = classifier(texts)
    assert all(set(d) == {"label", "score"} for d in best)
    for case, ours, score in zip(want["texts"], best, scores):
        i = int(np.argmax(score))
        assert ours["label"] == classifier.model.labels[i]
        assert_close(f"{name} best", ours["score"], score[i])
    raw = classifier(texts, top_k=None, function_to_apply="none")
    for case, ours in zip(want["texts"], raw):
        by_label = {d["label"]: d["score"] for d in ours}
        assert_close(f"{name} logits", [by_label[label] for label in classifier.model.labels], case["logits"])
    for case in want["pairs"]:
        a, b = case["input"]
        ours = classifier({"text": a, "text_pair": b}, top_k=None)
        by_label = {d["label"]: d["score"] for d in ours}
        want_scores = sigmoid(case["logits"]) if name == "regression" else case["scores"]
        assert_close(f"{name} pair {case['input']!r}", [by_label[label] for label in classifier.model.labels], want_scores)


def test_text_classification_returns_what_transformers_returns():
    classifier = pipeline("sentiment-analysis", model=fixture("pipelines", "cls"))
    one = classifier("a great film")
    assert isinstance(one, list) and len(one) == 1 and set(one[0]) == {"label", "score"}
    assert isinstance(classifier(["a", "b"])[1], dict)
    assert len(classifier("a great film", top_k=2)) == 2
    assert isinstance(classifier({"text": "a", "text_pair": "b"}), dict)
    assert classifier([]) == []
    bundled = pipeline("text-classification")
    assert bundled("a gorgeous , witty movie .")[0]["label"] == "positive"


@pytest.mark.parametrize("checkpoint", ["ner", "ner_zh"])
def test_token_classification_for_every_aggregation_strategy(checkpoint):
    want = reference("pipelines", checkpoint, "expected.json")
    ner = pipeline("ner", model=fixture("pipelines", checkpoint), batch_size=3)
    for strategy, rows in want["strategies"].items():
        ours = ner(want["texts"], aggregation_strategy=strategy)
        assert len(ours) == len(rows)
        for text, got, expected in zip(want["texts"], ours, rows):
            what = f"{checkpoint} {strategy} {text!r}"
            assert [{k: v for k, v in e.items() if k != "score"} for e in got] == [
                {k: v for k, v in e.items() if k != "score"} for e in expected
            ], what
            assert_close(what, [e["score"] for e in got], [e["score"] for e in expected])
    one = ner(want["texts"][0])
    assert isinstance(one, list) and all(isinstance(e, dict) for e in one)


def test_question_answering_as_transformers_4():
    want = reference("pipelines", "qa", "expected.json")
    qa = pipeline("question-answering", model=fixture("pipelines", "qa"))
    for case in want["cases"]:
        options = dict(case["options"])
        ours = qa(question=case["question"], context=case["context"], **options)
        answers = ours if isinstance(ours, list) else [ours]
        assert isinstance(ours, list) == (options.get("top_k", 1) > 1 or len(answers) != 1)
        what = f"qa {case['question']!r} {options}"
        assert [(a["answer"], a["start"], a["end"]) for a in answers] == [
            (a["answer"], a["start"], a["end"]) for a in case["answers"]
        ], what
        assert_close(what, [a["score"] for a in answers], [a["score"] for a in case["answers"]])
    first = want["cases"][0]
    as_dict = qa({"question": first["question"], "context": first["context"]})
    assert as_dict == qa(question=first["question"], context=first["context"])
    both = qa([{"question": c["question"], "context": c["context"]} for c in want["cases"][:2]])
    assert isinstance(both, list) and len(both) == 2


def test_fill_mask_as_transformers():
    want = reference("pipelines", "mlm", "expected.json")
    fill = pipeline("fill-mask", model=fixture("pipelines", "mlm"), batch_size=2)
    ours = fill(want["texts"])
    for text, got, expected in zip(want["texts"], ours, want["top5"]):
        masks = [got] if len(expected) == 1 else got
        assert len(masks) == len(expected), text
        for mask, want_mask in zip(masks, expected):
            assert [c["token"] for c in mask] == [w[1] for w in want_mask], text
            assert [c["token_str"] for c in mask] == [w[0] for w in want_mask], text
            assert_close(f"fill-mask {text!r}", [c["score"] for c in mask], [w[2] for w in want_mask])
    single = fill("the [MASK] was good")
    assert single[0]["sequence"] == f"the {single[0]['token_str']} was good"
    with pytest.raises(ValueError, match="no mask token"):
        fill("no mask here")


def test_feature_extraction_gives_every_tokens_hidden_state():
    want = reference("pipelines", "sim", "expected.json")
    features = pipeline("feature-extraction", model=fixture("pipelines", "sim"))
    one = features(want["texts"][0])
    assert isinstance(one, list) and len(one) == 1 and len(one[0][0]) == 32
    arrays = features(want["texts"], return_tensors=True)
    assert_close("feature-extraction [CLS]", np.stack([a[0, 0] for a in arrays]), want["cls"])
    assert_close("feature-extraction mean", np.stack([a[0].mean(axis=0) for a in arrays]), want["mean"])


def test_unknown_tasks_and_options_are_named():
    with pytest.raises(ValueError, match="unknown task `summarization`"):
        pipeline("summarization", model=fixture("pipelines", "cls"))
    with pytest.raises(ValueError, match="question-answering: unknown argument `aggregation_strategy`"):
        pipeline("question-answering", model=fixture("pipelines", "qa"), aggregation_strategy="simple")
