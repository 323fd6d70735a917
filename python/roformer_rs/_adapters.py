"""What the framework adapters (langchain, llama_index, chroma) share: their default model, the checks of
their inputs, and the SentenceEncoder they build from a framework's keywords."""

from __future__ import annotations

import importlib
import inspect
from typing import Any, Dict, FrozenSet, List, Mapping

from . import _native
from .sentence_transformers import SentenceEncoder

DEFAULT_MODEL = "junnyu/roformer_chinese_sim_char_base"
"""The checkpoint an adapter loads when no model_name is given (the sim model the package's examples use)."""

ENCODER_KEYWORDS: FrozenSet[str] = frozenset(
    name
    for name, p in inspect.signature(SentenceEncoder.__init__).parameters.items()
    if p.kind is inspect.Parameter.KEYWORD_ONLY
)
"""SentenceEncoder's own constructor keywords (device, prompts, precision, threads, pooling, ...)."""

ENCODE_KEYWORDS: FrozenSet[str] = frozenset(
    name for name in inspect.signature(SentenceEncoder.encode).parameters if name not in ("self", "sentences")
)
"""SentenceEncoder.encode's keywords (prompt_name, prompt, batch_size, normalize_embeddings, ...)."""

IGNORED_KEYWORDS: FrozenSet[str] = frozenset({"trust_remote_code", "backend"})
"""sentence-transformers' constructor keywords that mean nothing here: no remote code runs, and the
backend is the Rust one. Accepted, so that the frameworks' configurations load, and left unused."""


def require(module: str, package: str, adapter: str) -> None:
    """An ImportError that names the package to install where `module` does not import."""
    try:
        importlib.import_module(module)
    except ImportError as e:
        raise ImportError(f"{adapter} needs {package}: pip install {package} ({e})") from e


def texts_list(texts: Any, name: str) -> List[str]:
    """`texts` as a list of str, else a RoformerTypeError naming the item at fault."""
    if isinstance(texts, str):
        raise _native.RoformerTypeError(f"{name} is one str: pass a list of str")
    try:
        items = list(texts)
    except TypeError:
        raise _native.RoformerTypeError(f"{name} is {type(texts).__name__}, not a list of str") from None
    for i, text in enumerate(items):
        if not isinstance(text, str):
            raise _native.RoformerTypeError(f"{name}[{i}] is {type(text).__name__}, not str")
    return items


def text_str(text: Any, name: str) -> str:
    """`text` itself, else a RoformerTypeError."""
    if not isinstance(text, str):
        raise _native.RoformerTypeError(f"{name} is {type(text).__name__}, not str")
    return text


def check_keywords(given: Mapping[str, Any], allowed: FrozenSet[str], what: str) -> Dict[str, Any]:
    """`given` without the ignored keywords; a RoformerTypeError for a keyword not in `allowed`, as Python
    raises for an unexpected keyword argument."""
    if not isinstance(given, Mapping):
        raise _native.RoformerTypeError(f"{what} is {type(given).__name__}, not a dict")
    for key in given:
        if key not in allowed and key not in IGNORED_KEYWORDS:
            raise _native.RoformerTypeError(
                f"{what}: `{key}` is not one of SentenceEncoder's keywords ({', '.join(sorted(allowed))})"
            )
    return {k: v for k, v in given.items() if k not in IGNORED_KEYWORDS}


def build_encoder(model_name: Any, keywords: Mapping[str, Any], what: str) -> SentenceEncoder:
    """A SentenceEncoder of `model_name` with the constructor `keywords` a framework's adapter gathered."""
    return SentenceEncoder(model_name, **check_keywords(keywords, ENCODER_KEYWORDS, what))
