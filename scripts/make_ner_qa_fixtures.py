"""Writes token-classification and question-answering checkpoints into tests/fixtures/pipelines, with what
transformers' pipelines give for them.

Usage: .venv/bin/python scripts/make_ner_qa_fixtures.py   (after: pip install -r scripts/requirements.txt, and the
transformers 4.57.1 side folder of /work/shared/notes/reference-envs.md at $TF457, default /tmp/tf457)

- ner/: RoFormerForTokenClassification with B-/I- tags and O; expected.json holds transformers 5's
  `pipeline("token-classification")` output for each aggregation strategy on each text.
- ner_zh/: the same on Chinese texts, with RoFormerTokenizer (jieba) and the word-level vocab cut to their tokens.
- qa/: RoFormerForQuestionAnswering; expected.json holds transformers 4.57.1's `pipeline("question-answering")`
  output (transformers 5 has no such pipeline) for each case and its arguments, always as a list of answers.
  This part runs in a child process with the side folder on PYTHONPATH.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "tests" / "fixtures" / "pipelines"
STRATEGIES = ["none", "simple", "first", "average", "max"]
UNKNOWN = "quixotically"
LABELS = ["O", "B-PER", "I-PER", "B-LOC", "I-LOC", "B-ORG", "I-ORG"]

NER_TEXTS = [
    "John Smith lives in New York and works for Google.",
    "the movie was playing in paris",
    "Angela Merkel met Emmanuel Macron in Berlin yesterday.",
    "I can't believe it's not butter!",
    "",
    "xylophones zigzagged quixotically",
    "The United Nations held talks in Geneva , Switzerland .",
    "she said: \"hello, world\" and left.",
    "a b c d e f g",
    "Café owners in São Paulo complained about taxes",
    "the acting is good but the story is weak and the ending makes no sense at all " * 4,
    "Tokyo-based companies like Sony and Toyota reported earnings",
]

# Jieba words whole (苹果公司), characters, and WordPiece pieces of a Latin word.
NER_TEXTS_ZH = ["我爱北京天安门。", "苹果公司发布了新款手机，张三很高兴。", "李四用iphone拍照", "今天天气非常好"]

QA_CASES = [
    ("who lives in new york ?", "John Smith lives in New York and works for Google as an engineer.", {}),
    ("who lives in new york ?", "John Smith lives in New York and works for Google as an engineer.", {"top_k": 3}),
    ("what is the movie about ?", "the movie was about an old man and his dog, who walked across the country.",
     {"top_k": 3, "max_answer_len": 2}),
    ("where did they meet ?", "Angela Merkel met Emmanuel Macron in Berlin yesterday, and they talked for hours.",
     {"max_answer_len": 3}),
    ("what did she say ?", "she said: \"hello, world\" and left the building without another word.",
     {"handle_impossible_answer": True}),
    ("what happened ?",
     "the acting is good but the story is weak and the ending makes no sense at all . " * 3
     + "in the end the man went home to his family and the dog stayed in the city with a friend .",
     {"top_k": 3}),
    ("what happened ?",
     "the acting is good but the story is weak and the ending makes no sense at all . " * 3
     + "in the end the man went home to his family and the dog stayed in the city with a friend .",
     {"max_seq_len": 40, "doc_stride": 12, "top_k": 2}),
    ("who went home ?",
     "xylophones zigzagged quixotically while the playing children went home after the long day at school .",
     {"top_k": 3, "max_answer_len": 4}),
]


def tf457_env():
    """transformers 4.57.1 refuses, at import, the newer tokenizers of the main venv; its pipeline runs with it."""
    import types
    stub = types.ModuleType("transformers.dependency_versions_check")
    stub.dep_version_check = lambda *a, **k: None
    sys.modules["transformers.dependency_versions_check"] = stub


def qa_reference(folder):
    """Runs in the child process, under transformers 4.57.1."""
    tf457_env()
    import transformers
    from transformers import BertTokenizerFast, RoFormerForQuestionAnswering, pipeline
    assert transformers.__version__ == "4.57.1", transformers.__version__
    model = RoFormerForQuestionAnswering.from_pretrained(folder).eval()
    tok = BertTokenizerFast(vocab_file=str(Path(folder) / "vocab.txt"), do_lower_case=True, model_max_length=64)
    qa = pipeline("question-answering", model=model, tokenizer=tok, device="cpu")
    cases = []
    for question, context, kwargs in QA_CASES:
        answers = qa(question=question, context=context, **kwargs)
        answers = answers if isinstance(answers, list) else [answers]
        answers = [{"answer": a["answer"], "score": float(a["score"]), "start": int(a["start"]),
                    "end": int(a["end"])} for a in answers]
        # A zero score is a span the model cannot give (outside the context): transformers then lists it in an
        # order of ties that is numpy's, not ours. The cases here have enough real spans.
        assert all(a["score"] > 0 for a in answers), (question, answers)
        windows = len(tok(question, context, truncation="only_second", max_length=kwargs.get("max_seq_len", 64),
                          stride=kwargs.get("doc_stride", 32), return_overflowing_tokens=True)["input_ids"])
        cases.append({"question": question, "context": context, "options": kwargs, "windows": windows,
                      "answers": answers})
    (Path(folder) / "expected.json").write_text(json.dumps({"transformers": transformers.__version__,
                                                            "cases": cases}, indent=1, ensure_ascii=False))


def main():
    import torch
    import transformers
    from transformers import (BertTokenizer, RoFormerForQuestionAnswering, RoFormerForTokenClassification,
                              RoFormerTokenizer, pipeline)
    from make_model_fixtures import randomise
    from make_pipeline_fixtures import config, save, small_vocab

    torch.manual_seed(0)
    # bert-base-uncased's pieces of every text, so that words split into subwords as they would there; one word
    # keeps out, to be [UNK].
    full = (ROOT / "tests/fixtures/vocab/bert-base-uncased/vocab.txt").read_text(encoding="utf-8").split("\n")[:-1]
    bert = BertTokenizer(vocab={t: i for i, t in enumerate(full)}, do_lower_case=True)
    texts = NER_TEXTS + [x for q, c, _ in QA_CASES for x in (q, c)]
    pieces = {p for t in texts for p in bert.tokenize(t.replace(UNKNOWN, ""))}
    vocab = small_vocab(pieces - set(bert.tokenize(UNKNOWN)))
    tok = BertTokenizer(vocab={t: i for i, t in enumerate(vocab)}, do_lower_case=True, model_max_length=64)

    id2label = dict(enumerate(LABELS))
    model = randomise(RoFormerForTokenClassification(
        config(vocab, num_labels=len(LABELS), id2label=id2label, label2id={v: k for k, v in id2label.items()})), 11)
    expected = {"transformers": transformers.__version__, "texts": NER_TEXTS, "strategies": {}}
    for strategy in STRATEGIES:
        ner = pipeline("token-classification", model=model, tokenizer=tok, aggregation_strategy=strategy,
                       device="cpu")
        rows = []
        for text in NER_TEXTS:
            entities = []
            for e in ner(text):
                e = {k: (float(v) if k == "score" else int(v) if k in ("start", "end", "index") else v)
                     for k, v in e.items()}
                entities.append(e)
            rows.append(entities)
        expected["strategies"][strategy] = rows
    save("ner", model, vocab, expected)

    # The word-level Chinese vocab, cut to the tokens of the texts: jieba and WordPiece split them alike.
    full = (ROOT / "tests/fixtures/vocab/roformer_chinese_base/vocab.txt").read_text(encoding="utf-8").split("\n")[:-1]
    zh = RoFormerTokenizer(vocab={t: i for i, t in enumerate(full)})
    pieces = {p for t in NER_TEXTS_ZH for p in zh.tokenize(t)}
    vocab_zh = full[:1000] + sorted(pieces - set(full[:1000]))
    zh = RoFormerTokenizer(vocab={t: i for i, t in enumerate(vocab_zh)}, model_max_length=64)
    model = randomise(RoFormerForTokenClassification(
        config(vocab_zh, num_labels=len(LABELS), id2label=id2label, label2id={v: k for k, v in id2label.items()})), 13)
    expected = {"transformers": transformers.__version__, "texts": NER_TEXTS_ZH, "strategies": {}}
    for strategy in STRATEGIES:
        ner = pipeline("token-classification", model=model, tokenizer=zh, aggregation_strategy=strategy, device="cpu")
        expected["strategies"][strategy] = [
            [{k: (float(v) if k == "score" else int(v) if k in ("start", "end", "index") else v) for k, v in e.items()}
             for e in ner(text)] for text in NER_TEXTS_ZH]
    save("ner_zh", model, vocab_zh, expected)
    (OUT / "ner_zh" / "tokenizer_config.json").write_text(json.dumps(
        {"tokenizer_class": "RoFormerTokenizer", "do_lower_case": True, "model_max_length": 64}, indent=2))

    model = randomise(RoFormerForQuestionAnswering(config(vocab)), 12)
    save("qa", model, vocab, {})
    env = dict(os.environ, PYTHONPATH=os.environ.get("TF457", "/tmp/tf457"))
    subprocess.run([sys.executable, __file__, "--qa", str(OUT / "qa")], env=env, check=True)


if __name__ == "__main__":
    if sys.argv[1:2] == ["--qa"]:
        qa_reference(sys.argv[2])
    else:
        main()
