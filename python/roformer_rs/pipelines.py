"""transformers' `pipeline(task, model=...)` for RoFormer checkpoints: the same tasks, call
arguments and return values (keys, nesting, one input or a list), computed by the Rust crate.
`"question-answering"` is transformers 4's pipeline, which transformers 5 removed."""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

import numpy as np

from . import _native
from ._common import PathLike, load_options, model_path

_ALIASES = {"sentiment-analysis": "text-classification", "ner": "token-classification"}
TASKS = ("text-classification", "token-classification", "question-answering", "fill-mask", "feature-extraction")


def _texts(inputs: Any, name: str = "inputs") -> Tuple[List[str], bool]:
    """The texts of one str or a list of them, and whether it was one."""
    if isinstance(inputs, str):
        return [inputs], True
    if isinstance(inputs, (list, tuple)):
        for i, t in enumerate(inputs):
            if not isinstance(t, str):
                raise _native.RoformerTypeError(f"{name}[{i}] is {type(t).__name__}, not str")
        return list(inputs), False
    raise _native.RoformerTypeError(f"{name} is {type(inputs).__name__}, not str or a list of str")


class Pipeline:
    """What every task shares: the task, the model's options and the default batch size."""

    task: str

    def __init__(self, batch_size: int = 32) -> None:
        self.batch_size = batch_size

    def _batch(self, batch_size: Optional[int]) -> int:
        return self.batch_size if batch_size is None else batch_size


class TextClassificationPipeline(Pipeline):
    """`pipeline("text-classification")`: a label and score per text or text pair."""

    task = "text-classification"

    def __init__(self, model: Optional[str], options: _native.Load, batch_size: int = 32, top_k: Any = "") -> None:
        super().__init__(batch_size)
        self.model = _native.TextClassifier(model, options)
        self.top_k = top_k

    def _function(self, name: Optional[str]) -> str:
        if name is not None:
            name = name.lower()
            if name not in ("softmax", "sigmoid", "none"):
                raise _native.RoformerValueError(f"unknown function_to_apply `{name}` (softmax, sigmoid or none)")
            return name
        # transformers decides from the config's problem_type as written, then from the labels.
        given = self.model.problem_type
        if given == "regression":
            return "none"
        if given == "multi_label_classification" or len(self.model.labels) == 1:
            return "sigmoid"
        return "softmax"

    def __call__(
        self,
        inputs: Any,
        top_k: Any = "",
        function_to_apply: Optional[str] = None,
        batch_size: Optional[int] = None,
    ) -> Any:
        """One {label, score} per input (a list of them for one str, as transformers returns);
        `top_k=None` gives every label, highest first. A dict {"text", "text_pair"} is a pair."""
        legacy = top_k == "" and self.top_k == ""
        k = self.top_k if top_k == "" else top_k
        k = 1 if k == "" else k
        single_dict = isinstance(inputs, dict)
        items = [inputs] if isinstance(inputs, (str, dict)) else inputs
        if not isinstance(items, (list, tuple)):
            raise _native.RoformerTypeError(f"inputs is {type(inputs).__name__}, not str, dict or a list of them")
        firsts: List[str] = []
        seconds: List[Optional[str]] = []
        for i, item in enumerate(items):
            if isinstance(item, str):
                firsts.append(item)
                seconds.append(None)
            elif isinstance(item, dict) and isinstance(item.get("text"), str):
                pair = item.get("text_pair")
                if pair is not None and not isinstance(pair, str):
                    raise _native.RoformerTypeError(f"inputs[{i}]['text_pair'] is {type(pair).__name__}, not str")
                firsts.append(item["text"])
                seconds.append(pair)
            elif isinstance(item, (list, tuple)) and len(item) == 2 and all(isinstance(t, str) for t in item):
                firsts.append(item[0])
                seconds.append(item[1])
            else:
                raise _native.RoformerTypeError(
                    f"inputs[{i}] is {type(item).__name__}: pass str, {{'text', 'text_pair'}} or a (text, pair) list"
                )
        has_pairs = any(s is not None for s in seconds)
        logits = self.model.logits(firsts, seconds if has_pairs else None, self._batch(batch_size))
        function = self._function(function_to_apply)
        if function == "softmax":
            shifted = np.exp(logits - logits.max(axis=1, keepdims=True))
            scores = shifted / shifted.sum(axis=1, keepdims=True)
        elif function == "sigmoid":
            scores = 1.0 / (1.0 + np.exp(-logits))
        else:
            scores = logits
        labels = self.model.labels
        results: List[Any] = []
        for row in scores:
            if k == 1 and legacy:
                best = int(np.argmax(row))
                results.append({"label": labels[best], "score": float(row[best])})
                continue
            order = np.argsort(-row, kind="stable")
            ranked = [{"label": labels[i], "score": float(row[i])} for i in order]
            results.append(ranked[:k] if k is not None else ranked)
        if single_dict:
            return results[0]
        if isinstance(inputs, str) and legacy:
            return results
        return results[0] if isinstance(inputs, str) else results


class TokenClassificationPipeline(Pipeline):
    """`pipeline("token-classification")` (`"ner"`): entities with their spans."""

    task = "token-classification"

    def __init__(
        self,
        model: str,
        options: _native.Load,
        batch_size: int = 32,
        aggregation_strategy: str = "none",
        ignore_labels: Optional[Sequence[str]] = None,
    ) -> None:
        super().__init__(batch_size)
        self.model = _native.TokenClassifier(model, options)
        self.aggregation_strategy = aggregation_strategy
        self.ignore_labels = list(ignore_labels) if ignore_labels is not None else None

    def __call__(
        self,
        inputs: Union[str, Sequence[str]],
        aggregation_strategy: Optional[str] = None,
        ignore_labels: Optional[Sequence[str]] = None,
        batch_size: Optional[int] = None,
    ) -> Any:
        """The entities of each text (a list for one str, a list of lists for a list)."""
        texts, single = _texts(inputs)
        chosen = aggregation_strategy or self.aggregation_strategy
        strategy = str(getattr(chosen, "value", chosen)).lower()  # transformers' enum, or its name
        labels = list(ignore_labels) if ignore_labels is not None else self.ignore_labels
        rows = self.model.classify(texts, strategy, labels, self._batch(batch_size))
        key = "entity" if strategy == "none" else "entity_group"
        out = []
        for entities in rows:
            found = []
            for entity, score, word, start, end, index in entities:
                if strategy == "none":
                    found.append({key: entity, "score": score, "index": index, "word": word, "start": start, "end": end})
                else:
                    found.append({key: entity, "score": score, "word": word, "start": start, "end": end})
            out.append(found)
        return out[0] if single else out


class QuestionAnsweringPipeline(Pipeline):
    """`pipeline("question-answering")`, as transformers 4 has it: answer spans in a context."""

    task = "question-answering"

    def __init__(self, model: str, options: _native.Load, batch_size: int = 32) -> None:
        super().__init__(batch_size)
        self.model = _native.QuestionAnswerer(model, options)

    def __call__(
        self,
        *args: Any,
        question: Union[str, Sequence[str], None] = None,
        context: Union[str, Sequence[str], None] = None,
        top_k: int = 1,
        max_answer_len: int = 15,
        max_seq_len: Optional[int] = None,
        doc_stride: Optional[int] = None,
        handle_impossible_answer: bool = False,
        align_to_words: bool = True,
        batch_size: Optional[int] = None,
    ) -> Any:
        """{score, start, end, answer} per (question, context): one dict (a list with top_k > 1),
        or a list of them for several. Takes question=, context=, a dict or a list of dicts."""
        single = True
        if args:
            if len(args) != 1:
                raise _native.RoformerValueError("pass one dict, a list of dicts, or question= and context=")
            items = args[0]
            single = isinstance(items, dict)
            items = [items] if single else items
            questions, contexts = [], []
            for i, item in enumerate(items):
                if not isinstance(item, dict) or "question" not in item or "context" not in item:
                    raise _native.RoformerTypeError(f"inputs[{i}] is not a dict with question and context")
                questions.append(item["question"])
                contexts.append(item["context"])
        else:
            if question is None or context is None:
                raise _native.RoformerValueError("question-answering needs question= and context=")
            questions, q_single = _texts(question, "question")
            contexts, c_single = _texts(context, "context")
            single = q_single and c_single
            if q_single and not c_single:
                questions = questions * len(contexts)
            elif c_single and not q_single:
                contexts = contexts * len(questions)
        rows = self.model.answer(
            questions, contexts, top_k, max_answer_len, max_seq_len, doc_stride,
            handle_impossible_answer, align_to_words, self._batch(batch_size),
        )
        out = []
        for answers in rows:
            dicts = [{"score": score, "start": start, "end": end, "answer": answer} for answer, score, start, end in answers]
            out.append(dicts[0] if top_k == 1 and dicts else dicts)
        return out[0] if single else out


class FillMaskPipeline(Pipeline):
    """`pipeline("fill-mask")`: the likeliest tokens for each mask."""

    task = "fill-mask"

    def __init__(self, model: str, options: _native.Load, batch_size: int = 32, top_k: int = 5) -> None:
        super().__init__(batch_size)
        self.model = _native.FillMask(model, options)
        self.top_k = top_k

    def __call__(
        self, inputs: Union[str, Sequence[str]], top_k: Optional[int] = None, batch_size: Optional[int] = None
    ) -> Any:
        """{score, token, token_str, sequence} per candidate: a list for a text with one mask, a
        list of lists for more masks, and one of those per text for a list of texts."""
        texts, single = _texts(inputs)
        for i, t in enumerate(texts):
            if self.model.mask_token not in t:
                raise _native.RoformerValueError(f"inputs[{i}] has no mask token ({self.model.mask_token})")
        rows = self.model.fill(texts, self.top_k if top_k is None else top_k, self._batch(batch_size))
        out: List[Any] = []
        for masks in rows:
            per_mask = [
                [{"score": s, "token": tid, "token_str": tok, "sequence": seq} for tid, tok, s, seq in candidates]
                for candidates in masks
            ]
            out.append(per_mask[0] if len(per_mask) == 1 else per_mask)
        return out[0] if single else out


class FeatureExtractionPipeline(Pipeline):
    """`pipeline("feature-extraction")`: the last hidden state of every token, [1, tokens, hidden]."""

    task = "feature-extraction"

    def __init__(self, model: str, options: _native.Load, batch_size: int = 32) -> None:
        super().__init__(batch_size)
        self.model = _native.SentenceEncoder(model, options)

    def __call__(
        self, inputs: Union[str, Sequence[str]], return_tensors: bool = False, batch_size: Optional[int] = None
    ) -> Any:
        """Nested lists [1][tokens][hidden] per text, as transformers returns them; numpy arrays of
        that shape with `return_tensors=True`."""
        texts, single = _texts(inputs)
        rows = self.model.token_embeddings(texts, self._batch(batch_size), None)
        out = [r[None, :, :] if return_tensors else r[None, :, :].tolist() for r in rows]
        return out[0] if single else out


def pipeline(
    task: str,
    model: Optional[PathLike] = None,
    *,
    revision: Optional[str] = None,
    token: Optional[Union[str, bool]] = None,
    cache_folder: Optional[PathLike] = None,
    local_files_only: bool = False,
    precision: str = "float32",
    threads: Optional[int] = None,
    device: Optional[str] = None,
    max_seq_length: Optional[int] = None,
    batch_size: int = 32,
    **task_options: Any,
) -> Pipeline:
    """A pipeline for `task` on `model` (a folder or a Hub id), as transformers' `pipeline`:
    text-classification (sentiment-analysis; with no model, the SST-2 model built into the wheel),
    token-classification (ner; `aggregation_strategy`, `ignore_labels`), question-answering,
    fill-mask (`top_k`) and feature-extraction."""
    name = _ALIASES.get(task, task)
    if name not in TASKS:
        raise _native.RoformerValueError(f"unknown task `{task}` ({', '.join(TASKS)}, sentiment-analysis, ner)")
    options = load_options(revision, token, cache_folder, local_files_only, precision, threads, device, max_seq_length)
    path = model_path(model) if model is not None else None
    if path is None and name != "text-classification":
        raise _native.RoformerValueError(f"{name} needs a model: a folder or a Hub id")
    allowed: Dict[str, Tuple[str, ...]] = {
        "text-classification": ("top_k",),
        "token-classification": ("aggregation_strategy", "ignore_labels"),
        "fill-mask": ("top_k",),
    }
    unknown = sorted(set(task_options) - set(allowed.get(name, ())))
    if unknown:
        raise _native.RoformerValueError(f"{name} takes no option {', '.join(unknown)}")
    if name == "text-classification":
        return TextClassificationPipeline(path, options, batch_size, **task_options)
    assert path is not None
    if name == "token-classification":
        return TokenClassificationPipeline(path, options, batch_size, **task_options)
    if name == "question-answering":
        return QuestionAnsweringPipeline(path, options, batch_size)
    if name == "fill-mask":
        return FillMaskPipeline(path, options, batch_size, **task_options)
    return FeatureExtractionPipeline(path, options, batch_size)
