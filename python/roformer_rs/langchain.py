"""LangChain's embeddings: `RoformerEmbeddings`, a `langchain_core.embeddings.Embeddings` with the fields
of langchain_huggingface's `HuggingFaceEmbeddings`, so that code written for it changes by its import
line and class name:

    from roformer_rs.langchain import RoformerEmbeddings   # was: from langchain_huggingface import HuggingFaceEmbeddings
    embeddings = RoformerEmbeddings(model_name="junnyu/roformer_chinese_sim_char_base",
                                    encode_kwargs={"normalize_embeddings": True})
    embeddings.embed_documents(["今天天气不错", "今天天气很好"])      # [[float, ...], [float, ...]]

Needs langchain-core (`pip install langchain-core`), imported when this module is."""

from __future__ import annotations

from typing import Any, Dict, List, Optional, cast

from ._adapters import require

require("langchain_core", "langchain-core", "roformer_rs.langchain")

from langchain_core.embeddings import Embeddings  # type: ignore[import-not-found, unused-ignore]  # noqa: E402
from langchain_core.runnables.config import run_in_executor  # type: ignore[import-not-found, unused-ignore]  # noqa: E402
from pydantic import BaseModel, ConfigDict, Field, PrivateAttr  # type: ignore[import-not-found, unused-ignore]  # noqa: E402

from . import _native  # noqa: E402
from ._adapters import DEFAULT_MODEL, ENCODE_KEYWORDS, build_encoder, check_keywords, text_str, texts_list  # noqa: E402
from .sentence_transformers import SentenceEncoder  # noqa: E402

__all__ = ["RoformerEmbeddings"]


class RoformerEmbeddings(BaseModel, Embeddings):  # type: ignore[misc, unused-ignore]
    """Sentence embeddings of a RoFormer checkpoint or sentence-transformers folder, for LangChain: the
    fields of `HuggingFaceEmbeddings` and the same vectors as `SentenceEncoder.encode` with the same
    options.

    - `model_kwargs` go to `SentenceEncoder(...)`: device, prompts, default_prompt_name, truncate_dim,
      revision, token, local_files_only, precision, threads, max_seq_length, pooling, normalize
      (`trust_remote_code` and `backend` are accepted and mean nothing here).
    - `encode_kwargs` go to `SentenceEncoder.encode` for the documents, `query_encode_kwargs` for the
      query (the documents' when empty): prompt_name, prompt, batch_size, normalize_embeddings,
      precision, truncate_dim. Prompts are given there, as with HuggingFaceEmbeddings:
      `query_encode_kwargs={"prompt_name": "query"}`.
    - Newlines in the texts become spaces, as HuggingFaceEmbeddings does.
    - `multi_process` is accepted and changes nothing: one call already runs on every core.
    - The async methods run the sync ones in a thread; the GIL is released while a batch computes.
    - A text that is not a str raises `RoformerTypeError` naming its index."""

    model_name: str = Field(default=DEFAULT_MODEL, alias="model")
    """A folder or a Hub id."""
    cache_folder: Optional[str] = None
    """The Hub cache (HF_HOME's by default)."""
    model_kwargs: Dict[str, Any] = Field(default_factory=dict)
    """SentenceEncoder's constructor keywords."""
    encode_kwargs: Dict[str, Any] = Field(default_factory=dict)
    """SentenceEncoder.encode's keywords for the documents."""
    query_encode_kwargs: Dict[str, Any] = Field(default_factory=dict)
    """SentenceEncoder.encode's keywords for the query; the documents' when empty."""
    multi_process: bool = False
    """Accepted for HuggingFaceEmbeddings' sake: the native encode runs on every core already."""
    show_progress: bool = False
    """tqdm's bar over the batches."""

    model_config = ConfigDict(extra="forbid", protected_namespaces=(), populate_by_name=True)

    # Any for stubtest, which finds pydantic's ModelPrivateAttr on the class; `client` is typed.
    _client: Any = PrivateAttr()

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        for name in ("encode_kwargs", "query_encode_kwargs"):
            given = check_keywords(getattr(self, name), ENCODE_KEYWORDS, name)
            if "show_progress_bar" in given:
                raise _native.RoformerTypeError(f"{name}: give show_progress, not show_progress_bar")
        if "cache_folder" in self.model_kwargs:
            raise _native.RoformerTypeError("model_kwargs: give cache_folder as the field, not in model_kwargs")
        self._client = build_encoder(
            self.model_name, {"cache_folder": self.cache_folder, **self.model_kwargs}, "model_kwargs"
        )

    @property
    def client(self) -> SentenceEncoder:
        """The SentenceEncoder the embeddings come from."""
        return cast(SentenceEncoder, self._client)

    def _embed(self, texts: List[str], encode_kwargs: Dict[str, Any]) -> List[List[float]]:
        texts = [x.replace("\n", " ") for x in texts]
        embeddings = self.client.encode(texts, show_progress_bar=self.show_progress, **encode_kwargs)
        if isinstance(embeddings, list):
            raise _native.RoformerTypeError(
                "encode_kwargs made a list of embeddings: leave convert_to_numpy and output_value as they are"
            )
        rows: List[List[float]] = embeddings.tolist()
        return rows

    def embed_documents(self, texts: List[str]) -> List[List[float]]:
        """One embedding per text, in order, with `encode_kwargs`."""
        return self._embed(texts_list(texts, "texts"), self.encode_kwargs)

    def embed_query(self, text: str) -> List[float]:
        """The query's embedding, with `query_encode_kwargs` (the documents' when empty)."""
        kwargs = self.query_encode_kwargs if len(self.query_encode_kwargs) > 0 else self.encode_kwargs
        return self._embed([text_str(text, "text")], kwargs)[0]

    async def aembed_documents(self, texts: List[str]) -> List[List[float]]:
        """`embed_documents` in a thread of the event loop's executor."""
        result: List[List[float]] = await run_in_executor(None, self.embed_documents, texts)
        return result

    async def aembed_query(self, text: str) -> List[float]:
        """`embed_query` in a thread of the event loop's executor."""
        result: List[float] = await run_in_executor(None, self.embed_query, text)
        return result
