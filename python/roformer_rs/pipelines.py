"""transformers' `pipeline(task, model=...)` for RoFormer checkpoints: the same tasks, call
arguments and return values (keys, nesting, one input or a list), computed by the Rust crate.
`"question-answering"` is transformers 4's pipeline, which transformers 5 removed."""

from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple, Union

import numpy as np

from . import _native
from ._common import PathLike, load_options, model_path

_ALIASES = {"sentiment-analysis": "text-classification", "ner": "token-classification"}
TASKS = ("text-classification", "token-classification", "question-answering", "fill-mask", "feature-extraction")

# The call arguments each task takes, as transformers' pipelines name them (every one may also be
# given to pipeline() as the default of each call), beside batch_size, device and num_workers,
# which every task takes. The tokenizer's own are truncation, max_length and padding.
_SUPPORTED: Dict[str, Tuple[str, ...]] = {
    "text-classification": ("top_k", "function_to_apply", "truncation", "max_length", "padding"),
    "token-classification": ("aggregation_strategy", "ignore_labels", "stride", "truncation", "max_length", "padding"),
    "question-answering": (
        "top_k", "topk", "max_answer_len", "max_seq_len", "doc_stride", "handle_impossible_answer",
        "align_to_words", "padding", "truncation",
    ),
    "fill-mask": ("top_k", "tokenizer_kwargs", "truncation", "max_length", "padding"),
    "feature-extraction": ("return_tensors", "tokenize_kwargs", "truncation", "max_length", "padding"),
}
_COMMON = ("batch_size", "device", "num_workers")
# The tokenizer's other call arguments, which text-classification passes to it and the dicts
# tokenizer_kwargs (fill-mask) and tokenize_kwargs (feature-extraction) may hold.
_TOKENIZER_OTHERS = (
    "stride", "add_special_tokens", "is_split_into_words", "pad_to_multiple_of", "padding_side", "return_tensors",
    "return_token_type_ids", "return_attention_mask", "return_overflowing_tokens", "return_special_tokens_mask",
    "return_offsets_mapping", "return_length", "verbose", "split_special_tokens", "text_pair", "text_target",
    "text_pair_target",
)
# What transformers' pipelines take that these do not, each with what to do instead.
_UNSUPPORTED: Dict[str, Dict[str, str]] = {
    "text-classification": {
        **{name: "" for name in _TOKENIZER_OTHERS},
        "return_all_scores": "top_k=None gives every label",
    },
    "token-classification": {
        "offset_mapping": "",
        "is_split_into_words": "pass the words joined by spaces",
        "delimiter": "",
        "grouped_entities": "use aggregation_strategy",
        "ignore_subwords": "use aggregation_strategy",
    },
    "question-answering": {
        "max_question_len": "",
        "max_length": "windows are max_seq_len tokens long, doc_stride apart",
        "X": "pass question= and context=, or dicts",
        "data": "pass question= and context=, or dicts",
    },
    "fill-mask": {"targets": ""},
    "feature-extraction": {},
}
# What transformers' pipeline() takes beside the task's arguments, which this one does not.
_FACTORY_UNSUPPORTED = (
    "config", "tokenizer", "feature_extractor", "image_processor", "processor", "framework", "use_fast",
    "device_map", "dtype", "torch_dtype", "trust_remote_code", "model_kwargs", "pipeline_class", "binary_output",
    "use_auth_token",
)


def _value(x: Any) -> Any:
    """transformers' enums (TruncationStrategy, PaddingStrategy, AggregationStrategy) by value."""
    value = getattr(x, "value", x)
    return value if isinstance(value, (str, bool)) or value is None else x


def _count(task: str, name: str, value: Any, least: int = 1) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < least:
        raise _native.RoformerValueError(f"{task}: {name} must be an int of at least {least}, not {value!r}")
    return value


def device_name(device: Any) -> str:
    """The native device of transformers' `device=`: -1 (or any negative int) and "cpu" are the CPU,
    an int N or "cuda:N" the N-th CUDA device ("cuda" the first), "mps" Metal; a torch.device
    counts by its type and index."""
    if device is None:
        return "cpu"
    if isinstance(device, bool):
        raise _native.RoformerValueError(f"device {device!r}: pass 'cpu', -1, a CUDA ordinal or 'cuda:N'")
    if isinstance(device, int):
        return "cpu" if device < 0 else f"cuda:{device}"
    spec = device
    if not isinstance(spec, str):
        kind, index = getattr(device, "type", None), getattr(device, "index", None)
        if not isinstance(kind, str):
            raise _native.RoformerValueError(f"device {device!r}: pass 'cpu', -1, a CUDA ordinal or 'cuda:N'")
        spec = kind if index is None else f"{kind}:{index}"
    spec = spec.strip().lower()
    if spec == "cpu":
        return "cpu"
    if spec in ("cuda", "gpu"):
        return "cuda:0"
    if spec in ("mps", "metal"):
        return "metal"
    if spec.startswith("cuda:") and spec[5:].isdigit():
        return f"cuda:{int(spec[5:])}"
    raise _native.RoformerValueError(f"unknown device {device!r} (cpu, -1, an ordinal N, cuda, cuda:N or mps)")


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
    """What every task shares: the arguments it takes, its defaults (given to pipeline()), the
    batch size and the device the model is loaded on."""

    task: str

    def __init__(
        self, batch_size: Optional[int] = 32, device: str = "cpu", defaults: Optional[Dict[str, Any]] = None
    ) -> None:
        self.batch_size = 32 if batch_size is None else _count(self.task, "batch_size", batch_size)
        self.device = device
        self._defaults = self._checked(defaults or {})

    def _checked(self, arguments: Mapping[str, Any]) -> Dict[str, Any]:
        """The arguments, each name known and each value of its kind, or a RoformerValueError that
        names the first that is not."""
        task = self.task
        supported = _SUPPORTED[task] + _COMMON
        unsupported = _UNSUPPORTED[task]
        for name in arguments:
            if name in supported:
                continue
            if name in unsupported:
                hint = unsupported[name]
                raise _native.RoformerValueError(f"{task}: `{name}` is not supported" + (f" ({hint})" if hint else ""))
            raise _native.RoformerValueError(
                f"{task}: unknown argument `{name}` (it takes {', '.join(_SUPPORTED[task] + _COMMON)})"
            )
        out = dict(arguments)
        for key in ("tokenizer_kwargs", "tokenize_kwargs"):
            if out.get(key) is not None:
                out.update(self._tokenizer_dict(key, out.pop(key), out))
            else:
                out.pop(key, None)
        if out.get("batch_size") is not None:
            _count(task, "batch_size", out["batch_size"])
        if out.get("num_workers") is not None:
            _count(task, "num_workers", out["num_workers"], least=0)
        if out.get("max_length") is not None:
            _count(task, "max_length", out["max_length"])
        if out.get("stride") is not None:
            _count(task, "stride", out["stride"], least=0)
        if "truncation" in out:
            out["truncation"] = self._truncation(out["truncation"])
        if "padding" in out:
            padding = _value(out["padding"])
            if not (padding is True or padding is False or padding in ("longest", "max_length", "do_not_pad")):
                raise _native.RoformerValueError(
                    f"{task}: unknown padding {out['padding']!r} (True, 'longest', 'max_length', False or 'do_not_pad')"
                )
        if "device" in out:
            device = device_name(out["device"])
            if device != self.device:
                raise _native.RoformerValueError(
                    f"{task}: device `{device}` (from {out['device']!r}) is not the `{self.device}` the model is "
                    f"loaded on: pass device= to pipeline() to load it there"
                )
        return out

    def _tokenizer_dict(self, key: str, given: Any, top: Mapping[str, Any]) -> Dict[str, Any]:
        """fill-mask's tokenizer_kwargs or feature-extraction's tokenize_kwargs: truncation,
        max_length and padding, each given once."""
        if not isinstance(given, dict):
            raise _native.RoformerTypeError(f"{self.task}: {key} is {type(given).__name__}, not a dict")
        for name in given:
            if name in top:
                raise _native.RoformerValueError(f"{self.task}: `{name}` is given twice, as an argument and in {key}")
            if name not in ("truncation", "max_length", "padding"):
                what = "is not supported" if name in _TOKENIZER_OTHERS else "is not a tokenizer argument"
                raise _native.RoformerValueError(f"{self.task}: `{key}['{name}']` {what}")
        return dict(given)

    def _truncation(self, given: Any) -> Any:
        value = _value(given)
        if value is None or value is True or value is False or value in ("longest_first", "do_not_truncate"):
            return value
        if value in ("only_first", "only_second"):
            raise _native.RoformerValueError(
                f"{self.task}: truncation={given!r} is not supported (True or 'longest_first', False or 'do_not_truncate')"
            )
        raise _native.RoformerValueError(
            f"{self.task}: unknown truncation {given!r} (True or 'longest_first', False or 'do_not_truncate')"
        )

    def _arguments(self, given: Mapping[str, Any]) -> Dict[str, Any]:
        """A call's arguments over the pipeline's defaults. As in transformers, an argument given as
        None leaves the default, except top_k, where None asks for every label."""
        checked = self._checked(given)
        return {**self._defaults, **{k: v for k, v in checked.items() if v is not None or k == "top_k"}}

    def _batch(self, arguments: Mapping[str, Any]) -> int:
        batch_size = arguments.get("batch_size")
        return self.batch_size if batch_size is None else int(batch_size)

    @staticmethod
    def _cut(arguments: Mapping[str, Any]) -> Tuple[bool, Optional[int]]:
        """(truncation, max_length) for the native call. transformers' tokenizer cuts at max_length
        when given even without truncation=True, and cuts nothing with truncation=False; with
        neither, inputs are cut at the length the model loaded with (max_seq_length, else the
        tokenizer's model_max_length)."""
        truncation = _value(arguments.get("truncation"))
        if truncation is False or truncation == "do_not_truncate":
            return False, None
        return True, arguments.get("max_length")


class TextClassificationPipeline(Pipeline):
    """`pipeline("text-classification")`: a label and score per text or text pair."""

    task = "text-classification"

    def __init__(
        self, model: Optional[str], options: _native.Load, batch_size: Optional[int] = 32, device: str = "cpu", **defaults: Any
    ) -> None:
        super().__init__(batch_size, device, defaults)
        self.model = _native.TextClassifier(model, options)
        self.top_k = self._defaults.get("top_k", "")

    def _function(self, name: Optional[str]) -> str:
        if name is not None:
            name = str(_value(name)).lower()
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

    def __call__(self, inputs: Any, **kwargs: Any) -> Any:
        """One {label, score} per input (a list of them for one str, as transformers returns);
        `top_k=None` gives every label, highest first. A dict {"text", "text_pair"} is a pair.
        Takes transformers' arguments: top_k, function_to_apply, truncation, max_length, padding,
        batch_size, device, num_workers."""
        arguments = self._arguments(kwargs)
        top_k = kwargs.get("top_k", "")
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
        truncation, max_length = self._cut(arguments)
        logits = self.model.logits(
            firsts, seconds if has_pairs else None, self._batch(arguments), max_length, truncation
        )
        function = self._function(arguments.get("function_to_apply"))
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
        self, model: str, options: _native.Load, batch_size: Optional[int] = 32, device: str = "cpu", **defaults: Any
    ) -> None:
        super().__init__(batch_size, device, defaults)
        self.model = _native.TokenClassifier(model, options)

    def __call__(self, inputs: Union[str, Sequence[str]], **kwargs: Any) -> Any:
        """The entities of each text (a list for one str, a list of lists for a list). Takes
        transformers' arguments: aggregation_strategy, ignore_labels, stride (long texts in windows
        of max_length tokens sharing `stride`, their entities merged), truncation, max_length,
        padding, batch_size, device, num_workers."""
        arguments = self._arguments(kwargs)
        texts, single = _texts(inputs)
        chosen = arguments.get("aggregation_strategy") or "none"
        strategy = str(_value(chosen)).lower()  # transformers' enum, or its name
        ignore = arguments.get("ignore_labels")
        labels = list(ignore) if ignore is not None else None
        truncation, max_length = self._cut(arguments)
        rows = self.model.classify(
            texts, strategy, labels, self._batch(arguments), max_length, truncation, arguments.get("stride")
        )
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

    def __init__(
        self, model: str, options: _native.Load, batch_size: Optional[int] = 32, device: str = "cpu", **defaults: Any
    ) -> None:
        super().__init__(batch_size, device, defaults)
        self.model = _native.QuestionAnswerer(model, options)

    def _truncation(self, given: Any) -> Any:
        value = _value(given)
        if value is None or value is True or value == "only_second":
            return value
        raise _native.RoformerValueError(
            f"{self.task}: truncation={given!r} is not supported: every context is cut into windows of max_seq_len "
            "tokens, doc_stride apart (True or 'only_second')"
        )

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """{score, start, end, answer} per (question, context): one dict (a list with top_k > 1),
        or a list of them for several. Takes question=, context=, a dict or a list of dicts, and
        transformers 4's arguments: top_k, max_answer_len, max_seq_len, doc_stride,
        handle_impossible_answer, align_to_words, padding, batch_size, device, num_workers."""
        question = kwargs.pop("question", None)
        context = kwargs.pop("context", None)
        arguments = self._arguments(kwargs)
        top_k = arguments.get("top_k", arguments.get("topk"))
        top_k = 1 if top_k is None else _count(self.task, "top_k", top_k)
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
        max_answer_len = arguments.get("max_answer_len")
        handle_impossible = arguments.get("handle_impossible_answer")
        align = arguments.get("align_to_words")
        rows = self.model.answer(
            questions,
            contexts,
            top_k,
            15 if max_answer_len is None else max_answer_len,
            arguments.get("max_seq_len"),
            arguments.get("doc_stride"),
            bool(handle_impossible),
            True if align is None else bool(align),
            self._batch(arguments),
        )
        out = []
        for answers in rows:
            dicts = [{"score": score, "start": start, "end": end, "answer": answer} for answer, score, start, end in answers]
            out.append(dicts[0] if top_k == 1 and dicts else dicts)
        return out[0] if single else out


class FillMaskPipeline(Pipeline):
    """`pipeline("fill-mask")`: the likeliest tokens for each mask."""

    task = "fill-mask"

    def __init__(
        self, model: str, options: _native.Load, batch_size: Optional[int] = 32, device: str = "cpu", **defaults: Any
    ) -> None:
        super().__init__(batch_size, device, defaults)
        self.model = _native.FillMask(model, options)

    def __call__(self, inputs: Union[str, Sequence[str]], **kwargs: Any) -> Any:
        """{score, token, token_str, sequence} per candidate: a list for a text with one mask, a
        list of lists for more masks, and one of those per text for a list of texts. Takes
        transformers' arguments: top_k, tokenizer_kwargs (truncation, max_length, padding, also
        taken on their own), batch_size, device, num_workers."""
        arguments = self._arguments(kwargs)
        texts, single = _texts(inputs)
        for i, t in enumerate(texts):
            if self.model.mask_token not in t:
                raise _native.RoformerValueError(f"inputs[{i}] has no mask token ({self.model.mask_token})")
        top_k = arguments.get("top_k")
        truncation, max_length = self._cut(arguments)
        rows = self.model.fill(texts, 5 if top_k is None else top_k, self._batch(arguments), max_length, truncation)
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

    def __init__(
        self, model: str, options: _native.Load, batch_size: Optional[int] = 32, device: str = "cpu", **defaults: Any
    ) -> None:
        super().__init__(batch_size, device, defaults)
        self.model = _native.SentenceEncoder(model, options)

    def __call__(self, inputs: Union[str, Sequence[str]], **kwargs: Any) -> Any:
        """Nested lists [1][tokens][hidden] per text, as transformers returns them; numpy arrays of
        that shape with `return_tensors=True`. Takes transformers' arguments: return_tensors,
        truncation, tokenize_kwargs (truncation, max_length, padding, also taken on their own),
        batch_size, device, num_workers."""
        arguments = self._arguments(kwargs)
        texts, single = _texts(inputs)
        truncation, max_length = self._cut(arguments)
        rows = self.model.token_embeddings(texts, self._batch(arguments), None, max_length, truncation)
        tensors = bool(arguments.get("return_tensors"))
        out = [r[None, :, :] if tensors else r[None, :, :].tolist() for r in rows]
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
    device: Any = None,
    max_seq_length: Optional[int] = None,
    batch_size: Optional[int] = 32,
    **task_options: Any,
) -> Pipeline:
    """A pipeline for `task` on `model` (a folder or a Hub id), as transformers' `pipeline`:
    text-classification (sentiment-analysis; with no model, the SST-2 model built into the wheel),
    token-classification (ner), question-answering, fill-mask and feature-extraction. `device` is
    transformers' (-1 or "cpu", an ordinal N or "cuda:N", "mps"); any call argument of the task
    (top_k, aggregation_strategy, truncation, max_length, ...) given here is each call's default."""
    name = _ALIASES.get(task, task)
    if name not in TASKS:
        raise _native.RoformerValueError(f"unknown task `{task}` ({', '.join(TASKS)}, sentiment-analysis, ner)")
    for option in task_options:
        if option in _FACTORY_UNSUPPORTED:
            raise _native.RoformerValueError(f"{name}: `{option}` is not supported")
    where = device_name(device)
    options = load_options(revision, token, cache_folder, local_files_only, precision, threads, where, max_seq_length)
    path = model_path(model) if model is not None else None
    if path is None and name != "text-classification":
        raise _native.RoformerValueError(f"{name} needs a model: a folder or a Hub id")
    if name == "text-classification":
        return TextClassificationPipeline(path, options, batch_size, where, **task_options)
    assert path is not None
    if name == "token-classification":
        return TokenClassificationPipeline(path, options, batch_size, where, **task_options)
    if name == "question-answering":
        return QuestionAnsweringPipeline(path, options, batch_size, where, **task_options)
    if name == "fill-mask":
        return FillMaskPipeline(path, options, batch_size, where, **task_options)
    return FeatureExtractionPipeline(path, options, batch_size, where, **task_options)
