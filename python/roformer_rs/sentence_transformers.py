"""sentence-transformers' interfaces: `SentenceEncoder` (`SentenceTransformer`), `CrossEncoder` and
`SparseEncoder`, with the same methods, arguments and return values, computed by the Rust crate."""

from __future__ import annotations

import json
import os
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union, overload

import numpy as np
import numpy.typing as npt

from . import _native
from ._common import PathLike, batches, load_options, model_path, progress_bar, show_progress

Embeddings = npt.NDArray[Any]


def _similarity_fn_name(folder: str) -> str:
    """config_sentence_transformers.json's similarity_fn_name, else cosine."""
    path = os.path.join(folder, "config_sentence_transformers.json")
    try:
        with open(path, encoding="utf-8") as f:
            config = json.load(f)
    except FileNotFoundError:
        return "cosine"
    except (OSError, ValueError) as e:
        raise _native.RoformerOSError(f"{path}: {e}") from e
    name = config.get("similarity_fn_name") if isinstance(config, dict) else None
    if name is None:
        return "cosine"
    if name not in ("cosine", "dot", "euclidean", "manhattan"):
        raise _native.RoformerOSError(
            f"{path}: similarity_fn_name `{name}` is not one of cosine, dot, euclidean, manhattan"
        )
    return str(name)


def _as_matrix(x: Any, name: str) -> npt.NDArray[np.float32]:
    if hasattr(x, "toarray"):
        x = x.toarray()
    elif hasattr(x, "detach"):  # a torch tensor
        x = x.detach().cpu().numpy()
    a = np.asarray(x, dtype=np.float32)
    if a.ndim == 1:
        a = a[None, :]
    if a.ndim != 2:
        raise _native.RoformerValueError(f"{name} has {a.ndim} dimensions: pass one embedding or a matrix of them")
    return a


def similarity(a: Any, b: Any, similarity_fn_name: str = "cosine") -> npt.NDArray[np.float32]:
    """The [n, m] similarities of two sets of embeddings, as sentence-transformers' `similarity`:
    cosine, dot, or the negated euclidean or manhattan distance."""
    x, y = _as_matrix(a, "embeddings1"), _as_matrix(b, "embeddings2")
    if x.shape[1] != y.shape[1]:
        raise _native.RoformerValueError(f"embeddings of {x.shape[1]} and {y.shape[1]} values cannot be compared")
    if similarity_fn_name == "cosine":
        xn = x / np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-12)
        yn = y / np.maximum(np.linalg.norm(y, axis=1, keepdims=True), 1e-12)
        return np.asarray(xn @ yn.T, dtype=np.float32)
    if similarity_fn_name == "dot":
        return np.asarray(x @ y.T, dtype=np.float32)
    if similarity_fn_name == "euclidean":
        return np.asarray(-np.sqrt(np.maximum(((x[:, None, :] - y[None, :, :]) ** 2).sum(-1), 0)), dtype=np.float32)
    if similarity_fn_name == "manhattan":
        return np.asarray(-np.abs(x[:, None, :] - y[None, :, :]).sum(-1), dtype=np.float32)
    raise _native.RoformerValueError(
        f"unknown similarity_fn_name `{similarity_fn_name}` (cosine, dot, euclidean or manhattan)"
    )


def quantize_embeddings(
    embeddings: Any,
    precision: str,
    ranges: Optional[npt.NDArray[Any]] = None,
    calibration_embeddings: Optional[npt.NDArray[Any]] = None,
) -> npt.NDArray[Any]:
    """sentence-transformers' `quantize_embeddings`: float32, int8 and uint8 (scaled per dimension
    over `ranges`, else the calibration embeddings' or these embeddings' own range), binary and
    ubinary (the sign bits, packed)."""
    e = np.asarray(embeddings)
    if precision == "float32":
        return e.astype(np.float32)
    if precision in ("int8", "uint8"):
        if ranges is None:
            source = e if calibration_embeddings is None else np.asarray(calibration_embeddings)
            ranges = np.vstack((np.min(source, axis=0), np.max(source, axis=0)))
        starts = ranges[0, :]
        steps = (ranges[1, :] - ranges[0, :]) / 255
        if precision == "uint8":
            return np.asarray((e - starts) / steps).astype(np.uint8)
        return np.asarray((e - starts) / steps - 128).astype(np.int8)
    if precision == "binary":
        return (np.packbits(e > 0).reshape(e.shape[0], -1) - 128).astype(np.int8)
    if precision == "ubinary":
        return np.packbits(e > 0).reshape(e.shape[0], -1)
    raise _native.RoformerValueError(
        f"unknown precision `{precision}` (float32, int8, uint8, binary or ubinary)"
    )


def _to_tensor(array: Any) -> Any:
    try:
        import torch  # type: ignore[import-not-found, unused-ignore]
    except ImportError as e:
        raise ImportError("convert_to_tensor=True needs torch; roformer_rs returns numpy arrays without it") from e
    return torch.from_numpy(array)


class SentenceEncoder:
    """Sentence embeddings from a RoFormer checkpoint or a sentence-transformers folder, with
    `SentenceTransformer`'s methods:

        model = SentenceEncoder("junnyu/roformer_chinese_sim_char_base")
        embeddings = model.encode(["今天天气不错", "今天天气很好"])
        model.similarity(embeddings, embeddings)

    `precision` is the model's: float32, int8 or bfloat16 (the encoder's linear layers on the CPU);
    `threads` caps the model's own thread pool (one per core by default). A sentence-transformers
    folder is encoded as its modules say; another checkpoint with its pooler where it has one (the
    sim checkpoints), else mean pooling, scaled to unit length: `pooling` (cls, mean or pooler)
    and `normalize` replace either, as TEI's `--pooling` does."""

    def __init__(
        self,
        model_name_or_path: PathLike,
        *,
        device: Optional[str] = None,
        prompts: Optional[Dict[str, str]] = None,
        default_prompt_name: Optional[str] = None,
        truncate_dim: Optional[int] = None,
        revision: Optional[str] = None,
        token: Optional[Union[str, bool]] = None,
        cache_folder: Optional[PathLike] = None,
        local_files_only: bool = False,
        precision: str = "float32",
        threads: Optional[int] = None,
        max_seq_length: Optional[int] = None,
        pooling: Optional[str] = None,
        normalize: Optional[bool] = None,
    ) -> None:
        options = load_options(
            revision, token, cache_folder, local_files_only, precision, threads, device, max_seq_length
        )
        self._model = _native.SentenceEncoder(model_path(model_name_or_path), options, pooling, normalize)
        self._options = options
        self.prompts: Dict[str, str] = dict(self._model.prompts)
        if prompts:
            self.prompts.update(prompts)
        if default_prompt_name is not None and default_prompt_name not in self.prompts:
            raise _native.RoformerValueError(
                f"default_prompt_name `{default_prompt_name}` is not among the prompts {sorted(self.prompts)}"
            )
        self.default_prompt_name = default_prompt_name
        self.truncate_dim = truncate_dim
        self.similarity_fn_name: str = _similarity_fn_name(str(self._model.path))

    @property
    def max_seq_length(self) -> int:
        """Inputs are cut to this many tokens, special tokens included."""
        return int(self._model.max_seq_length)

    @max_seq_length.setter
    def max_seq_length(self, value: int) -> None:
        # sentence-transformers lets it be set after loading; here the tokenizer is built with it.
        raise AttributeError(
            f"max_seq_length is set when the model loads: SentenceEncoder(..., max_seq_length={value})"
        )

    @property
    def precision(self) -> str:
        """The model's precision: float32, int8 or bfloat16."""
        return str(self._options.precision)

    def get_embedding_dimension(self) -> int:
        """The length of each embedding (after `truncate_dim`)."""
        dim = int(self._model.dim)
        return min(dim, self.truncate_dim) if self.truncate_dim else dim

    def get_sentence_embedding_dimension(self) -> int:
        """sentence-transformers 5's name of `get_embedding_dimension`."""
        return self.get_embedding_dimension()

    def _prompt(self, prompt_name: Optional[str], prompt: Optional[str]) -> Optional[str]:
        """The text put before each sentence: `prompt`, else the prompt named (the folder's and the
        constructor's), else None for the folder's default prompt."""
        if prompt is not None:
            return prompt
        name = prompt_name if prompt_name is not None else self.default_prompt_name
        if name is None:
            return None
        if name in self.prompts:
            return self.prompts[name]
        raise _native.RoformerValueError(
            f"prompt name `{name}` is not among the prompts {sorted(self.prompts)}"
        )

    @overload
    def encode(self, sentences: str, prompt_name: Optional[str] = ..., prompt: Optional[str] = ..., batch_size: int = ..., show_progress_bar: Optional[bool] = ..., output_value: Optional[str] = ..., precision: str = ..., convert_to_numpy: bool = ..., convert_to_tensor: bool = ..., device: Optional[str] = ..., normalize_embeddings: bool = ..., truncate_dim: Optional[int] = ...) -> Any: ...  # noqa: E501
    @overload
    def encode(self, sentences: Sequence[str], prompt_name: Optional[str] = ..., prompt: Optional[str] = ..., batch_size: int = ..., show_progress_bar: Optional[bool] = ..., output_value: Optional[str] = ..., precision: str = ..., convert_to_numpy: bool = ..., convert_to_tensor: bool = ..., device: Optional[str] = ..., normalize_embeddings: bool = ..., truncate_dim: Optional[int] = ...) -> Any: ...  # noqa: E501

    def encode(
        self,
        sentences: Union[str, Sequence[str]],
        prompt_name: Optional[str] = None,
        prompt: Optional[str] = None,
        batch_size: int = 32,
        show_progress_bar: Optional[bool] = None,
        output_value: Optional[str] = "sentence_embedding",
        precision: str = "float32",
        convert_to_numpy: bool = True,
        convert_to_tensor: bool = False,
        device: Optional[str] = None,
        normalize_embeddings: bool = False,
        truncate_dim: Optional[int] = None,
    ) -> Any:
        """Embeddings of `sentences`: a float32 array [n, dim] (or [dim] for one string), in input
        order; `output_value="token_embeddings"` gives one [tokens, hidden] array per sentence.
        The GIL is released while batches compute; Ctrl-C stops at the next batch."""
        single = isinstance(sentences, str)
        texts = [sentences] if isinstance(sentences, str) else list(sentences)
        text = self._prompt(prompt_name, prompt)
        with progress_bar(show_progress(show_progress_bar), batches(len(texts), batch_size)) as update:
            if output_value == "token_embeddings":
                before = text if text is not None else self._model.default_prompt
                prompted = [before + t if isinstance(t, str) else t for t in texts] if before else texts
                tokens = self._model.token_embeddings(prompted, batch_size, update)
                if convert_to_tensor:
                    return [_to_tensor(t) for t in tokens]
                return tokens[0] if single else tokens
            if output_value != "sentence_embedding":
                raise _native.RoformerValueError(
                    f"output_value `{output_value}` is not one of sentence_embedding, token_embeddings"
                )
            embeddings = self._model.encode(texts, text, batch_size, update)
        dim = truncate_dim or self.truncate_dim
        if dim is not None and dim < embeddings.shape[1]:
            embeddings = embeddings[:, :dim]
        if normalize_embeddings:
            norms = np.linalg.norm(embeddings, axis=1, keepdims=True)
            embeddings = embeddings / np.maximum(norms, 1e-12)
        if precision != "float32":
            embeddings = quantize_embeddings(embeddings, precision)
        if convert_to_tensor:
            out = _to_tensor(np.ascontiguousarray(embeddings))
            return out[0] if single else out
        if not convert_to_numpy:
            rows = list(embeddings)
            return rows[0] if single else rows
        return embeddings[0] if single else embeddings

    def encode_query(self, sentences: Union[str, Sequence[str]], prompt_name: Optional[str] = None, prompt: Optional[str] = None, **kwargs: Any) -> Any:  # noqa: E501
        """`encode` with the folder's `query` prompt, where it has one and no other is given."""
        if prompt_name is None and prompt is None and "query" in self.prompts:
            prompt_name = "query"
        return self.encode(sentences, prompt_name=prompt_name, prompt=prompt, **kwargs)

    def encode_document(self, sentences: Union[str, Sequence[str]], prompt_name: Optional[str] = None, prompt: Optional[str] = None, **kwargs: Any) -> Any:  # noqa: E501
        """`encode` with the folder's `document` (else `passage`, else `corpus`) prompt, where it has
        one and no other is given."""
        if prompt_name is None and prompt is None:
            prompt_name = next((n for n in ("document", "passage", "corpus") if n in self.prompts), None)
        return self.encode(sentences, prompt_name=prompt_name, prompt=prompt, **kwargs)

    def similarity(self, embeddings1: Any, embeddings2: Any) -> npt.NDArray[np.float32]:
        """[n, m] similarities, by the folder's `similarity_fn_name` (cosine by default)."""
        return similarity(embeddings1, embeddings2, self.similarity_fn_name)

    def similarity_pairwise(self, embeddings1: Any, embeddings2: Any) -> npt.NDArray[np.float32]:
        """The similarity of each row with the same row of the other set: [n]."""
        x, y = _as_matrix(embeddings1, "embeddings1"), _as_matrix(embeddings2, "embeddings2")
        if x.shape != y.shape:
            raise _native.RoformerValueError(f"pairwise similarity of {x.shape} and {y.shape} embeddings")
        return np.array([similarity(a, b, self.similarity_fn_name)[0, 0] for a, b in zip(x, y)], dtype=np.float32)

    def __repr__(self) -> str:
        return (
            f"SentenceEncoder({str(self._model.path)!r}, dim={self.get_embedding_dimension()}, "
            f"pooling={self._model.pooling!r}, precision={self.precision!r})"
        )


SentenceTransformer = SentenceEncoder
"""The name code written for sentence-transformers imports."""


class CrossEncoder:
    """A cross-encoder (a RoFormer sequence classifier with one label, or a sentence-transformers
    CrossEncoder folder), with `CrossEncoder`'s `predict` and `rank`."""

    def __init__(
        self,
        model_name_or_path: PathLike,
        *,
        max_length: Optional[int] = None,
        device: Optional[str] = None,
        revision: Optional[str] = None,
        token: Optional[Union[str, bool]] = None,
        cache_folder: Optional[PathLike] = None,
        local_files_only: bool = False,
        precision: str = "float32",
        threads: Optional[int] = None,
    ) -> None:
        options = load_options(revision, token, cache_folder, local_files_only, precision, threads, device, max_length)
        self._model = _native.CrossEncoder(model_path(model_name_or_path), options)
        self._options = options

    @property
    def max_length(self) -> int:
        """Pairs are cut to this many tokens, special tokens included."""
        return int(self._model.max_length)

    def predict(
        self,
        sentences: Union[Tuple[str, str], List[str], Sequence[Union[Tuple[str, str], List[str]]]],
        batch_size: int = 32,
        show_progress_bar: Optional[bool] = None,
        activation_fn: Optional[Any] = None,
        apply_softmax: bool = False,
        convert_to_numpy: bool = True,
        convert_to_tensor: bool = False,
    ) -> Any:
        """One score per (query, text) pair, in input order: float32 [n] (a scalar for one pair).
        The folder's activation applies (config_sentence_transformers.json; the sigmoid by default),
        or `activation_fn`, any callable on the array of logits (`lambda x: x` for the logits).
        With one label, `apply_softmax` changes nothing, as in sentence-transformers."""
        if activation_fn is not None and not callable(activation_fn):
            raise _native.RoformerTypeError(f"activation_fn is {type(activation_fn).__name__}, not callable")
        single = len(sentences) == 2 and all(isinstance(s, str) for s in sentences)
        pairs: Sequence[Any] = [sentences] if single else sentences
        with progress_bar(show_progress(show_progress_bar), batches(len(pairs), batch_size)) as update:
            scores = self._model.predict(pairs, batch_size, update, activation_fn is not None)
        if activation_fn is not None:
            scores = np.asarray(activation_fn(scores), dtype=np.float32)
        if convert_to_tensor:
            return _to_tensor(scores)
        if single:
            return scores[0]
        return scores if convert_to_numpy else list(scores)

    def rank(
        self,
        query: str,
        documents: Sequence[str],
        top_k: Optional[int] = None,
        return_documents: bool = False,
        batch_size: int = 32,
        show_progress_bar: Optional[bool] = None,
        activation_fn: Optional[Any] = None,
        apply_softmax: bool = False,
        convert_to_numpy: bool = True,
        convert_to_tensor: bool = False,
    ) -> List[Dict[str, Any]]:
        """Each document's `corpus_id` and `score` (and `text`), highest score first, as
        sentence-transformers 6 returns them; equal scores keep the input order."""
        if not isinstance(query, str):
            raise _native.RoformerTypeError(f"query is {type(query).__name__}, not str")
        if isinstance(documents, str):
            raise _native.RoformerTypeError("documents is one str: pass a list of str")
        for i, d in enumerate(documents):
            if not isinstance(d, str):
                raise _native.RoformerTypeError(f"documents[{i}] is {type(d).__name__}, not str")
        scores = self.predict(
            [(query, d) for d in documents], batch_size, show_progress_bar, activation_fn, apply_softmax
        )
        results: List[Dict[str, Any]] = []
        for i, score in enumerate(scores):
            row: Dict[str, Any] = {"corpus_id": i, "score": score}
            if return_documents:
                row["text"] = documents[i]
            results.append(row)
        results.sort(key=lambda r: r["score"], reverse=True)
        return results[:top_k] if top_k is not None else results

    def __repr__(self) -> str:
        return f"CrossEncoder({str(self._model.path)!r}, precision={self._options.precision!r})"


class SparseEncoder:
    """SPLADE embeddings from a masked-LM checkpoint or a sentence-transformers SparseEncoder
    folder, with `SparseEncoder`'s `encode`, `decode` and `similarity`; embeddings are
    `scipy.sparse.csr_array` [n, vocabulary]."""

    def __init__(
        self,
        model_name_or_path: PathLike,
        *,
        device: Optional[str] = None,
        revision: Optional[str] = None,
        token: Optional[Union[str, bool]] = None,
        cache_folder: Optional[PathLike] = None,
        local_files_only: bool = False,
        precision: str = "float32",
        threads: Optional[int] = None,
        max_seq_length: Optional[int] = None,
    ) -> None:
        options = load_options(
            revision, token, cache_folder, local_files_only, precision, threads, device, max_seq_length
        )
        self._model = _native.SparseEncoder(model_path(model_name_or_path), options)
        self._options = options

    @property
    def max_seq_length(self) -> int:
        """Inputs are cut to this many tokens, special tokens included."""
        return int(self._model.max_seq_length)

    def get_embedding_dimension(self) -> int:
        """The vocabulary size."""
        return int(self._model.dim)

    def encode(
        self,
        sentences: Union[str, Sequence[str]],
        batch_size: int = 32,
        show_progress_bar: Optional[bool] = None,
        max_active_dims: Optional[int] = None,
    ) -> Any:
        """A `scipy.sparse.csr_array` [n, vocabulary] (one row for one string), in input order;
        `max_active_dims` keeps each row's largest values."""
        try:
            from scipy.sparse import csr_array  # type: ignore[import-untyped, unused-ignore]
        except ImportError as e:
            raise ImportError("SparseEncoder.encode returns scipy.sparse.csr_array: pip install scipy") from e
        texts = [sentences] if isinstance(sentences, str) else sentences
        with progress_bar(show_progress(show_progress_bar), batches(len(texts), batch_size)) as update:
            data, indices, indptr = self._model.encode(texts, batch_size, update)
        if max_active_dims is not None:
            if max_active_dims < 1:
                raise _native.RoformerValueError("max_active_dims must be at least 1")
            data, indices, indptr = _keep_largest(data, indices, indptr, max_active_dims)
        return csr_array((data, indices, indptr), shape=(len(indptr) - 1, self.get_embedding_dimension()))

    def decode(self, embeddings: Any, top_k: Optional[int] = None) -> Any:
        """(token, weight) pairs, largest weight first: a list for one embedding, a list of lists
        for a matrix of them."""
        rows = embeddings.toarray() if hasattr(embeddings, "toarray") else np.asarray(embeddings)
        single = rows.ndim == 1
        decoded = []
        for row in np.atleast_2d(rows):
            ids = np.nonzero(row)[0]
            ids = ids[np.argsort(-row[ids], kind="stable")]
            if top_k is not None:
                ids = ids[:top_k]
            tokens = self._model.tokens([int(i) for i in ids])
            decoded.append([(t, float(row[i])) for t, i in zip(tokens, ids)])
        return decoded[0] if single else decoded

    def similarity(self, embeddings1: Any, embeddings2: Any) -> npt.NDArray[np.float32]:
        """[n, m] dot products, SparseEncoder's default similarity."""
        return similarity(embeddings1, embeddings2, "dot")

    def __repr__(self) -> str:
        return f"SparseEncoder(dim={self.get_embedding_dimension()}, precision={self._options.precision!r})"


def _keep_largest(
    data: npt.NDArray[np.float32], indices: npt.NDArray[np.int32], indptr: npt.NDArray[np.int64], k: int
) -> Tuple[npt.NDArray[np.float32], npt.NDArray[np.int32], npt.NDArray[np.int64]]:
    out_data, out_indices, out_indptr = [], [], [0]
    for start, end in zip(indptr[:-1], indptr[1:]):
        values, ids = data[start:end], indices[start:end]
        keep = np.sort(np.argsort(-values, kind="stable")[:k])
        out_data.append(values[keep])
        out_indices.append(ids[keep])
        out_indptr.append(out_indptr[-1] + len(keep))
    return (
        np.concatenate(out_data).astype(np.float32) if out_data else data[:0],
        np.concatenate(out_indices).astype(np.int32) if out_indices else indices[:0],
        np.asarray(out_indptr, dtype=np.int64),
    )
