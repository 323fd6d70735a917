"""LlamaIndex's embeddings: `RoformerEmbedding`, a `BaseEmbedding` with the keywords of
llama-index-embeddings-huggingface's `HuggingFaceEmbedding`, so that code written for it changes by its
import line and class name:

    from roformer_rs.llama_index import RoformerEmbedding   # was: from llama_index.embeddings.huggingface import HuggingFaceEmbedding
    from llama_index.core import Settings
    Settings.embed_model = RoformerEmbedding(model_name="junnyu/roformer_chinese_sim_char_base")

Needs llama-index-core (`pip install llama-index-core`), imported when this module is."""

from __future__ import annotations

import asyncio
from typing import Any, Dict, List, Optional, cast

from ._adapters import require

require("llama_index.core", "llama-index-core", "roformer_rs.llama_index")

from llama_index.core.base.embeddings.base import BaseEmbedding, Embedding  # type: ignore[import-not-found, unused-ignore]  # noqa: E402
from llama_index.core.bridge.pydantic import Field, PrivateAttr  # type: ignore[import-not-found, unused-ignore]  # noqa: E402
from llama_index.core.callbacks import CallbackManager  # type: ignore[import-not-found, unused-ignore]  # noqa: E402
from llama_index.core.constants import DEFAULT_EMBED_BATCH_SIZE  # type: ignore[import-not-found, unused-ignore]  # noqa: E402

from . import _native  # noqa: E402
from ._adapters import DEFAULT_MODEL, build_encoder, text_str, texts_list  # noqa: E402
from .sentence_transformers import SentenceEncoder  # noqa: E402

__all__ = ["RoformerEmbedding"]

DEFAULT_MAX_LENGTH = 512
_DEPRECATED = "deprecated"


class RoformerEmbedding(BaseEmbedding):  # type: ignore[misc, unused-ignore]
    """Sentence embeddings of a RoFormer checkpoint or sentence-transformers folder, for LlamaIndex: the
    keywords of `HuggingFaceEmbedding` and the same vectors as `SentenceEncoder.encode` with the same
    options.

    - As HuggingFaceEmbedding does, the query is encoded with the prompt `query_instruction` and the
      texts with `text_instruction` (none where they are None, in place of the folder's own prompts),
      in batches of `embed_batch_size`, scaled to unit length when `normalize` (the default).
    - `max_length` cuts the inputs (the model's limit by default); `device` is "cpu" by default.
    - `pooling` is SentenceEncoder's (cls, mean or pooler; the folder's by default): HuggingFaceEmbedding
      refuses the keyword, so no code written for it passes one. Other keywords go to `SentenceEncoder(...)`
      (precision, threads, revision, token, local_files_only, truncate_dim, ...); `trust_remote_code`,
      `parallel_process` and `target_devices` are accepted and change nothing (one call runs on every core).
    - `num_workers` and `embeddings_cache` are BaseEmbedding's; `to_dict()` and `from_dict()` round-trip.
    - The async methods run the sync ones in a thread; the GIL is released while a batch computes.
    - A text that is not a str raises `RoformerTypeError` naming its index."""

    max_length: int = Field(default=DEFAULT_MAX_LENGTH, description="Maximum length of input.", gt=0)
    normalize: bool = Field(default=True, description="Normalize embeddings or not.")
    query_instruction: Optional[str] = Field(description="Instruction to prepend to query text.", default=None)
    text_instruction: Optional[str] = Field(description="Instruction to prepend to text.", default=None)
    cache_folder: Optional[str] = Field(description="Cache folder for Hugging Face files.", default=None)
    show_progress_bar: bool = Field(description="Whether to show a progress bar.", default=False)

    # Any for stubtest, which finds pydantic's ModelPrivateAttr on the class; `encoder` is typed.
    _model: Any = PrivateAttr()
    _device: Any = PrivateAttr()
    _parallel_process: Any = PrivateAttr()
    _target_devices: Any = PrivateAttr()

    def __init__(
        self,
        model_name: str = DEFAULT_MODEL,
        tokenizer_name: Optional[str] = _DEPRECATED,
        pooling: Optional[str] = None,
        max_length: Optional[int] = None,
        query_instruction: Optional[str] = None,
        text_instruction: Optional[str] = None,
        normalize: bool = True,
        model: Optional[Any] = _DEPRECATED,
        tokenizer: Optional[Any] = _DEPRECATED,
        embed_batch_size: int = DEFAULT_EMBED_BATCH_SIZE,
        cache_folder: Optional[str] = None,
        trust_remote_code: bool = False,
        device: Optional[str] = None,
        callback_manager: Optional[CallbackManager] = None,
        parallel_process: bool = False,
        target_devices: Optional[List[str]] = None,
        show_progress_bar: bool = False,
        num_workers: Optional[int] = None,
        embeddings_cache: Optional[Any] = None,
        **model_kwargs: Any,
    ) -> None:
        for variable, value in (("model", model), ("tokenizer", tokenizer), ("tokenizer_name", tokenizer_name)):
            if value != _DEPRECATED:
                raise _native.RoformerValueError(f"{variable} is deprecated. Please remove it from the arguments.")
        if model_name is None:
            raise _native.RoformerValueError("The `model_name` argument must be provided.")
        if max_length is not None and (
            not isinstance(max_length, int) or isinstance(max_length, bool) or max_length < 1
        ):
            raise _native.RoformerValueError(f"max_length must be an int of at least 1, not {max_length!r}")
        if (
            not isinstance(embed_batch_size, int)
            or isinstance(embed_batch_size, bool)
            or not 1 <= embed_batch_size <= 2048
        ):
            raise _native.RoformerValueError(f"embed_batch_size must be an int from 1 to 2048, not {embed_batch_size!r}")
        for key in ("prompts", "max_seq_length"):
            if key in model_kwargs:
                given = "query_instruction and text_instruction" if key == "prompts" else "max_length"
                raise _native.RoformerTypeError(f"`{key}` is set by {given}")
        device = device or "cpu"
        prompts = {"query": query_instruction or "", "text": text_instruction or ""}
        model_kwargs = {**model_kwargs, "prompts": prompts, "device": device, "cache_folder": cache_folder}
        if max_length:
            model_kwargs["max_seq_length"] = max_length
        if pooling is not None:
            model_kwargs["pooling"] = pooling
        encoded = build_encoder(model_name, model_kwargs, "RoformerEmbedding")
        fields: Dict[str, Any] = dict(
            embed_batch_size=embed_batch_size,
            callback_manager=callback_manager,
            model_name=str(model_name),
            max_length=max_length or encoded.max_seq_length,
            normalize=normalize,
            query_instruction=query_instruction,
            text_instruction=text_instruction,
            cache_folder=cache_folder,
            show_progress_bar=show_progress_bar,
            num_workers=num_workers,
            embeddings_cache=embeddings_cache,
        )
        super().__init__(**fields)
        self._model = encoded
        self._device = device
        self._parallel_process = parallel_process
        self._target_devices = target_devices

    @classmethod
    def class_name(cls) -> str:
        return "RoformerEmbedding"

    @property
    def encoder(self) -> SentenceEncoder:
        """The SentenceEncoder the embeddings come from."""
        return cast(SentenceEncoder, self._model)

    def _embed(self, inputs: List[str], prompt_name: Optional[str] = None) -> List[Embedding]:
        embeddings = self.encoder.encode(
            inputs,
            batch_size=self.embed_batch_size,
            prompt_name=prompt_name,
            normalize_embeddings=self.normalize,
            show_progress_bar=self.show_progress_bar,
        )
        rows: List[Embedding] = embeddings.tolist()
        return rows

    def _get_query_embedding(self, query: str) -> Embedding:
        return self._embed([text_str(query, "query")], prompt_name="query")[0]

    async def _aget_query_embedding(self, query: str) -> Embedding:
        return await asyncio.to_thread(self._get_query_embedding, query)

    def _get_text_embedding(self, text: str) -> Embedding:
        return self._embed([text_str(text, "text")], prompt_name="text")[0]

    async def _aget_text_embedding(self, text: str) -> Embedding:
        return await asyncio.to_thread(self._get_text_embedding, text)

    def _get_text_embeddings(self, texts: List[str]) -> List[Embedding]:
        return self._embed(texts_list(texts, "texts"), prompt_name="text")

    async def _aget_text_embeddings(self, texts: List[str]) -> List[Embedding]:
        return await asyncio.to_thread(self._get_text_embeddings, texts)

    def get_text_embedding_batch(self, texts: List[str], show_progress: bool = False, **kwargs: Any) -> List[Embedding]:
        """The texts' embeddings, `embed_batch_size` at a time; a text that is not a str raises
        RoformerTypeError naming its index in `texts`."""
        rows: List[Embedding] = super().get_text_embedding_batch(texts_list(texts, "texts"), show_progress, **kwargs)
        return rows

    async def aget_text_embedding_batch(
        self, texts: List[str], show_progress: bool = False, **kwargs: Any
    ) -> List[Embedding]:
        """`get_text_embedding_batch`, each batch in a thread."""
        rows: List[Embedding] = await super().aget_text_embedding_batch(
            texts_list(texts, "texts"), show_progress, **kwargs
        )
        return rows
