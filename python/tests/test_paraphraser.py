"""Paraphraser against junnyu's gen_synonyms references (generation.json: greedy continuations of the sim
fixture, ranked by the pooler's similarity)."""

import pytest
from conftest import assert_close, fixture, reference
from roformer_rs import Paraphraser


def test_greedy_paraphrases_as_gen_synonyms():
    want = reference("models", "sim_generation", "generation.json")
    paraphraser = Paraphraser(fixture("models", "sim_generation"))
    for case in want["cases"]:
        got = paraphraser.paraphrase(case["text"], greedy=True, max_new_tokens=want["max_new_tokens"])
        if not case["decoded"]:
            assert got == [], f"{case['text']}: an empty generation was kept"
            continue
        assert [g["text"] for g in got] == [case["decoded"]]
        assert_close(f"paraphrase {case['text']}", got[0]["similarity"], case["similar"][0]["similarity"])


def test_sampled_candidates_are_distinct_and_ranked():
    paraphraser = Paraphraser(fixture("models", "sim_generation"))
    got = paraphraser.paraphrase("我们一起去公园散步吧", num_samples=16, num_return=4, top_p=0.9, seed=5,
                                 max_new_tokens=12)
    assert 0 < len(got) <= 4
    assert all(a["similarity"] >= b["similarity"] for a, b in zip(got, got[1:]))
    assert len({g["text"] for g in got}) == len(got)
    with pytest.raises(ValueError, match="num_return 3 is larger than num_samples 2"):
        paraphraser.paraphrase("你好", num_samples=2, num_return=3)
    with pytest.raises(TypeError, match="text is list"):
        paraphraser.paraphrase(["你好"])
