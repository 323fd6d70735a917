"""The call arguments of pipeline(task) against transformers' own outputs with them (5.25; 4.57.1 for question
answering) on the pipeline fixtures: truncation, max_length, padding, stride, batch_size, tokenizer_kwargs,
tokenize_kwargs and device, at the call and as pipeline() defaults; and the arguments refused, each by name.
References: tests/fixtures/pipelines/call_arguments.json (scripts/fixtures/make_call_argument_fixtures.py)."""

import numpy as np
import pytest
from conftest import assert_close, fixture, reference
from roformer_rs import RoformerValueError, pipeline

WANT = reference("pipelines", "call_arguments.json")


def by_label(rows):
    """Each ranked list of {label, score} as {label: score}; every label is there with top_k=None."""
    return [{d["label"]: d["score"] for d in row} for row in rows]


def assert_ranked(what, ours, want):
    assert [[d["label"] for d in row] for row in ours] == [[d["label"] for d in row] for row in want], what
    labels = sorted(want[0], key=lambda d: d["label"])
    ours_scores = [[row[d["label"]] for d in labels] for row in by_label(ours)]
    want_scores = [[row[d["label"]] for d in labels] for row in by_label(want)]
    assert_close(what, ours_scores, want_scores)


@pytest.fixture(scope="module")
def classifier():
    return pipeline("text-classification", model=fixture("pipelines", "cls"))


def test_the_references_are_cut_where_the_arguments_say():
    """Each reference case would fail against an uncut model: truncation bites on these texts."""
    cases = WANT["text-classification"]["cases"]
    whole = by_label(cases[4]["texts"])
    assert cases[4]["kwargs"]["truncation"] is False
    for case in cases[:4]:
        cut = by_label(case["texts"])
        longer = [i for i, n in enumerate(cases[4]["lengths"]) if n > case["kwargs"]["max_length"]]
        assert longer and all(n <= case["kwargs"]["max_length"] for n in case["lengths"]), case["kwargs"]
        assert max(abs(cut[i][k] - whole[i][k]) for i in longer for k in whole[i]) > 1e-3, case["kwargs"]
    strides = [c for c in WANT["token-classification"]["cases"] if "stride" in c["ours"]]
    assert strides and all(max(c["windows"]) > 1 for c in strides)


@pytest.mark.parametrize("case", range(len(WANT["text-classification"]["cases"])))
def test_text_classification_arguments_as_transformers(classifier, case):
    want = WANT["text-classification"]
    kwargs = want["cases"][case]["kwargs"]
    ours = classifier(want["texts"], top_k=None, **kwargs)
    assert_ranked(f"text-classification {kwargs}", ours, want["cases"][case]["texts"])
    pairs = classifier([{"text": a, "text_pair": b} for a, b in want["pairs"]], top_k=None, **kwargs)
    assert_ranked(f"text-classification pairs {kwargs}", pairs, want["cases"][case]["pairs"])


def test_call_arguments_given_to_pipeline_are_each_calls_defaults(classifier):
    want = WANT["text-classification"]["cases"][0]
    cut = pipeline("text-classification", model=fixture("pipelines", "cls"), top_k=None, **want["kwargs"])
    texts = WANT["text-classification"]["texts"]
    assert_ranked("text-classification defaults", cut(texts), want["texts"])
    # A call's own arguments win over the defaults.
    whole = WANT["text-classification"]["cases"][4]
    assert_ranked("text-classification over defaults", cut(texts, **whole["kwargs"]), whole["texts"])
    assert_ranked("text-classification no defaults", classifier(texts, top_k=None, **whole["kwargs"]), whole["texts"])


@pytest.mark.parametrize("case", range(len(WANT["token-classification"]["cases"])))
def test_token_classification_arguments_as_transformers(case):
    want = WANT["token-classification"]
    ner = pipeline("ner", model=fixture("pipelines", "ner"))
    ours_args = want["cases"][case]["ours"]
    ours = ner(want["texts"], **ours_args)
    assert len(ours) == len(want["texts"])
    for text, got, expected in zip(want["texts"], ours, want["cases"][case]["entities"]):
        what = f"token-classification {ours_args} {text[:30]!r}"
        assert [{k: v for k, v in e.items() if k != "score"} for e in got] == [
            {k: v for k, v in e.items() if k != "score"} for e in expected
        ], what
        assert_close(what, [e["score"] for e in got], [e["score"] for e in expected])


@pytest.mark.parametrize("case", range(len(WANT["fill-mask"]["cases"])))
def test_fill_mask_arguments_as_transformers(case):
    want = WANT["fill-mask"]
    fill = pipeline("fill-mask", model=fixture("pipelines", "mlm"))
    ours_args = want["cases"][case]["ours"]
    ours = fill(want["texts"], **ours_args)
    expected = want["cases"][case]["output"]
    assert len(ours) == len(expected)
    for text, got, exp in zip(want["texts"], ours, expected):
        what = f"fill-mask {ours_args} {text!r}"
        masks, exp_masks = (got, exp) if got and isinstance(got[0], list) else ([got], [exp])
        assert len(masks) == len(exp_masks) and isinstance(got[0], list) == isinstance(exp[0], list), what
        for mask, want_mask in zip(masks, exp_masks):
            assert [(c["token"], c["token_str"], c["sequence"]) for c in mask] == [
                (c["token"], c["token_str"], c["sequence"]) for c in want_mask
            ], what
            assert_close(what, [c["score"] for c in mask], [c["score"] for c in want_mask])


@pytest.mark.parametrize("case", range(len(WANT["feature-extraction"]["cases"])))
def test_feature_extraction_arguments_as_transformers(case):
    want = WANT["feature-extraction"]
    features = pipeline("feature-extraction", model=fixture("pipelines", "sim"))
    ours_args = want["cases"][case]["ours"]
    ours = features(want["texts"], **ours_args)
    for text, got, exp in zip(want["texts"], ours, want["cases"][case]["features"]):
        assert_close(f"feature-extraction {ours_args} {text[:30]!r}", got, exp)


def test_feature_extraction_without_truncation_as_transformers():
    want = WANT["feature-extraction"]["untruncated"]
    features = pipeline("feature-extraction", model=fixture("pipelines", "sim"))
    ours = features(want["texts"], return_tensors=True, **want["ours"])
    assert [a.shape[1] for a in ours] == want["lengths"]
    assert_close("feature-extraction whole, first token", np.stack([a[0, 0] for a in ours]), want["first"])
    assert_close("feature-extraction whole, mean", np.stack([a[0].mean(axis=0) for a in ours]), want["mean"])


@pytest.mark.parametrize("case", range(len(WANT["question-answering"]["cases"])))
def test_question_answering_arguments_as_transformers_4(case):
    want = WANT["question-answering"]
    qa = pipeline("question-answering", model=fixture("pipelines", "qa"))
    kwargs = want["cases"][case]["kwargs"]
    ours = qa(question=want["questions"], context=want["contexts"], **kwargs)
    for got, exp in zip(ours, want["cases"][case]["answers"]):
        got, exp = (got, exp) if isinstance(exp, list) else ([got], [exp])
        what = f"question-answering {kwargs}"
        assert [(a["answer"], a["start"], a["end"]) for a in got] == [(a["answer"], a["start"], a["end"]) for a in exp], what
        assert_close(what, [a["score"] for a in got], [a["score"] for a in exp])


LONG = "the acting is good but the story is weak and the ending makes no sense at all " * 6  # > 64 tokens


@pytest.mark.parametrize(
    "task, folder, text",
    [
        ("text-classification", "cls", LONG),
        ("token-classification", "ner", LONG),
        ("fill-mask", "mlm", "the [MASK] " + LONG),
        ("feature-extraction", "sim", LONG),
    ],
)
def test_an_input_too_long_without_truncation_is_named(task, folder, text):
    run = pipeline(task, model=fixture("pipelines", folder))
    with pytest.raises(RoformerValueError, match=r"inputs\[1\] has 1\d\d tokens, more than the 64 positions"):
        run(["a short one [MASK]", text], truncation=False)
    # Cut, the same input runs.
    assert len(run(["a short one [MASK]", text], truncation=True, max_length=16)) == 2


@pytest.mark.parametrize(
    "task, folder, name, message",
    [
        ("text-classification", "cls", "return_all_scores", "`return_all_scores` is not supported"),
        ("text-classification", "cls", "stride", "`stride` is not supported"),
        ("text-classification", "cls", "add_special_tokens", "`add_special_tokens` is not supported"),
        ("text-classification", "cls", "foo", "unknown argument `foo`"),
        ("token-classification", "ner", "is_split_into_words", "`is_split_into_words` is not supported"),
        ("token-classification", "ner", "offset_mapping", "`offset_mapping` is not supported"),
        ("token-classification", "ner", "top_k", "unknown argument `top_k`"),
        ("question-answering", "qa", "max_question_len", "`max_question_len` is not supported"),
        ("question-answering", "qa", "max_length", "`max_length` is not supported"),
        ("fill-mask", "mlm", "targets", "`targets` is not supported"),
        ("fill-mask", "mlm", "function_to_apply", "unknown argument `function_to_apply`"),
        ("feature-extraction", "sim", "bar", "unknown argument `bar`"),
    ],
)
def test_arguments_we_do_not_take_are_named(task, folder, name, message):
    run = pipeline(task, model=fixture("pipelines", folder))
    inputs = {"question": "who ?", "context": "john smith"} if task == "question-answering" else {}
    with pytest.raises(RoformerValueError, match=f"^{task}: {message}"):
        if inputs:
            run(**inputs, **{name: 1})
        else:
            run("a [MASK] text", **{name: 1})
    with pytest.raises(RoformerValueError, match=f"^{task}: {message}"):
        pipeline(task, model=fixture("pipelines", folder), **{name: 1})


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"truncation": "only_first"}, "truncation='only_first' is not supported"),
        ({"truncation": "sometimes"}, "unknown truncation 'sometimes'"),
        ({"padding": "sideways"}, "unknown padding 'sideways'"),
        ({"max_length": 0}, "max_length must be an int of at least 1, not 0"),
        ({"max_length": True}, "max_length must be an int of at least 1, not True"),
        ({"batch_size": 0}, "batch_size must be an int of at least 1, not 0"),
        ({"num_workers": -1}, "num_workers must be an int of at least 0"),
        ({"device": 0}, "device `cuda:0` .* is not the `cpu` the model is loaded on"),
        ({"device": "cuda:1"}, "device `cuda:1` .* is not the `cpu`"),
        ({"device": "tpu"}, "unknown device 'tpu'"),
    ],
)
def test_bad_values_are_named(classifier, kwargs, message):
    with pytest.raises(RoformerValueError, match=message):
        classifier("a great film", **kwargs)


def test_padding_num_workers_and_the_loaded_device_change_nothing(classifier):
    plain = classifier(WANT["text-classification"]["texts"], top_k=None)
    for kwargs in ({"padding": "max_length"}, {"padding": False}, {"num_workers": 4}, {"device": "cpu"},
                   {"device": -1}, {"device": "CPU"}):
        assert classifier(WANT["text-classification"]["texts"], top_k=None, **kwargs) == plain, kwargs
    at_cpu = pipeline("text-classification", model=fixture("pipelines", "cls"), device=-1, batch_size=2)
    assert at_cpu.device == "cpu"
    assert at_cpu(WANT["text-classification"]["texts"], top_k=None, device="cpu", batch_size=5) == plain


def test_devices_map_as_transformers_and_unavailable_ones_are_named():
    from roformer_rs.pipelines import device_name

    class TorchDevice:  # what torch.device offers, without torch
        def __init__(self, type, index=None):
            self.type, self.index = type, index

    assert [device_name(d) for d in (None, -1, "cpu", 0, 2, "cuda", "cuda:1", "mps", TorchDevice("cuda", 3))] == [
        "cpu", "cpu", "cpu", "cuda:0", "cuda:2", "cuda:0", "cuda:1", "metal", "cuda:3"]
    with pytest.raises(RoformerValueError, match="unknown device"):
        pipeline("text-classification", model=fixture("pipelines", "cls"), device="npu:0")
    with pytest.raises(RoformerValueError, match="`tokenizer` is not supported"):
        pipeline("text-classification", model=fixture("pipelines", "cls"), tokenizer="bert-base-uncased")


def test_stride_needs_an_aggregation_strategy_and_room():
    ner = pipeline("ner", model=fixture("pipelines", "ner"))
    with pytest.raises(RoformerValueError, match="aggregation strategy other than none"):
        ner(LONG, stride=4)
    with pytest.raises(RoformerValueError, match=r"the stride \(14\) must be smaller"):
        ner(LONG, stride=14, max_length=16, aggregation_strategy="simple")
    with pytest.raises(RoformerValueError, match="stride must be an int of at least 0"):
        ner(LONG, stride=-1, aggregation_strategy="simple")


def test_fill_mask_cut_past_every_mask_is_named():
    fill = pipeline("fill-mask", model=fixture("pipelines", "mlm"))
    with pytest.raises(RoformerValueError, match=r"inputs\[1\] has no mask token \(\[MASK\]\) in its 4 tokens"):
        fill(["the [MASK] was good", "the movie was terrible and boring [MASK]"], max_length=4)
    with pytest.raises(RoformerValueError, match="`tokenizer_kwargs\\['stride'\\]` is not supported"):
        fill("the [MASK] was good", tokenizer_kwargs={"stride": 2})
    with pytest.raises(RoformerValueError, match="`max_length` is given twice"):
        fill("the [MASK] was good", max_length=4, tokenizer_kwargs={"max_length": 5})


def test_defaults_of_the_other_tasks_and_none_leaves_them():
    want = WANT["token-classification"]
    case = want["cases"][1]  # max_length 12, simple, padding
    ner = pipeline("ner", model=fixture("pipelines", "ner"), **case["ours"])
    for got in (ner(want["texts"]), ner(want["texts"], aggregation_strategy=None, max_length=None)):
        assert [[{k: v for k, v in e.items() if k != "score"} for e in row] for row in got] == [
            [{k: v for k, v in e.items() if k != "score"} for e in row] for row in case["entities"]
        ]
        assert_close("token-classification defaults", [e["score"] for row in got for e in row],
                     [e["score"] for row in case["entities"] for e in row])
    qa_want = WANT["question-answering"]
    qa = pipeline("question-answering", model=fixture("pipelines", "qa"), **qa_want["cases"][0]["kwargs"])
    ours = qa(question=qa_want["questions"], context=qa_want["contexts"])
    assert [[a["answer"] for a in row] for row in ours] == [[a["answer"] for a in row] for row in qa_want["cases"][0]["answers"]]
