"""RoFormer in process: the roformer crate's pipelines (Rust, on Candle) with the interfaces of
sentence-transformers and transformers.

    from roformer_rs import SentenceEncoder
    model = SentenceEncoder("junnyu/roformer_chinese_sim_char_base")
    embeddings = model.encode(["今天天气不错", "今天天气很好"])

The GIL is released while a batch computes, so threads run in parallel with it and one model
serves several threads at once."""

from ._native import (
    RoformerError,
    RoformerOSError,
    RoformerTypeError,
    RoformerValueError,
    __version__,
)
from .paraphraser import Paraphraser
from .pipelines import Pipeline, pipeline
from .sentence_transformers import (
    CrossEncoder,
    SentenceEncoder,
    SentenceTransformer,
    SparseEncoder,
    quantize_embeddings,
    similarity,
)

__all__ = [
    "CrossEncoder",
    "Paraphraser",
    "Pipeline",
    "RoformerError",
    "RoformerOSError",
    "RoformerTypeError",
    "RoformerValueError",
    "SentenceEncoder",
    "SentenceTransformer",
    "SparseEncoder",
    "__version__",
    "pipeline",
    "quantize_embeddings",
    "similarity",
]
