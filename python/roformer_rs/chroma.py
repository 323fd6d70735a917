"""Chroma's embedding function: `RoformerEmbeddingFunction`, an `EmbeddingFunction[Documents]` with the
constructor of chromadb's `SentenceTransformerEmbeddingFunction`, registered under the name
"roformer_rs" so that a collection persisted with it reopens with it:

    import chromadb
    from roformer_rs.chroma import RoformerEmbeddingFunction   # registers "roformer_rs" with Chroma
    client = chromadb.PersistentClient(path="index")
    docs = client.get_or_create_collection("docs", embedding_function=RoformerEmbeddingFunction(
        model_name="junnyu/roformer_chinese_sim_char_base"))
    docs.add(ids=["1", "2"], documents=["今天天气不错", "今天天气很好"])
    docs.query(query_texts=["天气"], n_results=1)

A later process imports roformer_rs.chroma and calls `client.get_collection("docs")`: Chroma rebuilds the
function from the collection's config. Needs chromadb (`pip install chromadb`), imported when this
module is."""

from __future__ import annotations

import json
from typing import Any, Dict, List, Tuple

import numpy as np

from ._adapters import require

require("chromadb", "chromadb", "roformer_rs.chroma")

from chromadb.api.types import Documents, EmbeddingFunction, Embeddings, Space  # type: ignore[import-not-found, unused-ignore]  # noqa: E402
from chromadb.utils.embedding_functions import register_embedding_function  # type: ignore[import-not-found, unused-ignore]  # noqa: E402

from . import _native  # noqa: E402
from ._adapters import DEFAULT_MODEL, build_encoder, texts_list  # noqa: E402
from .sentence_transformers import SentenceEncoder  # noqa: E402

__all__ = ["RoformerEmbeddingFunction"]

NAME = "roformer_rs"
"""The name Chroma keeps in a collection's config, and finds this class under."""

_PRIMITIVE = (str, int, float, bool, list, dict, tuple, type(None))


class RoformerEmbeddingFunction(EmbeddingFunction[Documents]):  # type: ignore[misc, unused-ignore]
    """Chroma's embedding function of a RoFormer checkpoint or sentence-transformers folder: the
    constructor of `SentenceTransformerEmbeddingFunction` (model_name, device, normalize_embeddings,
    **kwargs, the kwargs SentenceEncoder's: precision, threads, pooling, prompts, default_prompt_name,
    max_seq_length, truncate_dim, revision, cache_folder, local_files_only, ...) and its vectors,
    `SentenceEncoder.encode`'s with the same options (float32 arrays, one per document).

    Its config (`get_config()`) is the constructor's arguments, and `build_from_config` makes the
    function again from them; models are loaded once per process for each such config. The default
    space is cosine. A document that is not a str raises `RoformerTypeError` naming its index, a
    keyword Chroma cannot keep in a config (not str, int, float, bool, list, dict or tuple)
    `RoformerValueError`."""

    models: Dict[Tuple[str, str, str], SentenceEncoder] = {}
    """The models loaded, by (model_name, device, kwargs as JSON): Chroma builds a function from the
    config each time it opens a collection."""

    def __init__(
        self,
        model_name: str = DEFAULT_MODEL,
        device: str = "cpu",
        normalize_embeddings: bool = False,
        **kwargs: Any,
    ) -> None:
        if not isinstance(model_name, str):
            raise _native.RoformerTypeError(
                f"model_name is {type(model_name).__name__}, not str (Chroma keeps it in the collection's config)"
            )
        if not isinstance(device, str):
            raise _native.RoformerTypeError(f"device is {type(device).__name__}, not str")
        for key, value in kwargs.items():
            if not isinstance(value, _PRIMITIVE):
                raise _native.RoformerValueError(
                    f"Keyword argument {key} is not a primitive type ({type(value).__name__}): "
                    "Chroma keeps the keywords in the collection's config"
                )
        self.model_name = model_name
        self.device = device
        self.normalize_embeddings = bool(normalize_embeddings)
        self.kwargs = kwargs
        cache_key = (model_name, device, json.dumps(kwargs, sort_keys=True, default=repr))
        if cache_key not in self.models:
            self.models[cache_key] = build_encoder(model_name, {"device": device, **kwargs}, "kwargs")
        self._model = self.models[cache_key]

    def __call__(self, input: Documents) -> Embeddings:
        """One float32 array per document, in order."""
        embeddings = self._model.encode(
            texts_list(input, "input"), convert_to_numpy=True, normalize_embeddings=self.normalize_embeddings
        )
        return [np.array(embedding, dtype=np.float32) for embedding in embeddings]

    @staticmethod
    def name() -> str:
        return NAME

    def default_space(self) -> Space:
        return "cosine"

    def supported_spaces(self) -> List[Space]:
        return ["cosine", "l2", "ip"]

    @staticmethod
    def build_from_config(config: Dict[str, Any]) -> "EmbeddingFunction[Documents]":
        RoformerEmbeddingFunction.validate_config(config)
        return RoformerEmbeddingFunction(
            model_name=config["model_name"],
            device=config["device"],
            normalize_embeddings=config["normalize_embeddings"],
            **config.get("kwargs", {}),
        )

    def get_config(self) -> Dict[str, Any]:
        return {
            "model_name": self.model_name,
            "device": self.device,
            "normalize_embeddings": self.normalize_embeddings,
            "kwargs": self.kwargs,
        }

    def validate_config_update(self, old_config: Dict[str, Any], new_config: Dict[str, Any]) -> None:
        # As SentenceTransformerEmbeddingFunction: model_name may be a folder, which may move.
        return

    @staticmethod
    def validate_config(config: Dict[str, Any]) -> None:
        """A RoformerValueError unless `config` is what `get_config` returns."""
        if not isinstance(config, dict):
            raise _native.RoformerValueError(f"the config is {type(config).__name__}, not a dict")
        for key, kind in (("model_name", str), ("device", str), ("normalize_embeddings", bool)):
            if not isinstance(config.get(key), kind):
                raise _native.RoformerValueError(f"the config's `{key}` is {config.get(key)!r}, not a {kind.__name__}")
        if not isinstance(config.get("kwargs", {}), dict):
            raise _native.RoformerValueError(f"the config's `kwargs` is {config.get('kwargs')!r}, not a dict")
        unknown = sorted(set(config) - {"model_name", "device", "normalize_embeddings", "kwargs"})
        if unknown:
            raise _native.RoformerValueError(f"the config has unknown keys {unknown}")


register_embedding_function(RoformerEmbeddingFunction)  # type: ignore[no-untyped-call, unused-ignore]
