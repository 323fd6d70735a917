"""The Rust extension module; the package's classes wrap these."""

from os import PathLike
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np
import numpy.typing as npt
from typing_extensions import final

__version__: str
__all__ = [
    "CrossEncoder",
    "FillMask",
    "Load",
    "Paraphraser",
    "QuestionAnswerer",
    "RoformerError",
    "RoformerOSError",
    "RoformerTypeError",
    "RoformerValueError",
    "SentenceEncoder",
    "SparseEncoder",
    "TextClassifier",
    "TokenClassifier",
    "__version__",
]

class RoformerError(Exception): ...
class RoformerOSError(RoformerError, OSError): ...
class RoformerValueError(RoformerError, ValueError): ...
class RoformerTypeError(RoformerError, TypeError): ...

_Progress = Optional[Callable[[int], Any]]

@final
class Load:
    def __new__(
        cls,
        *,
        revision: Optional[str] = None,
        token: Optional[str] = None,
        cache_folder: Optional[str | PathLike[str]] = None,
        local_files_only: bool = False,
        precision: str = "float32",
        threads: Optional[int] = None,
        device: str = "cpu",
        max_seq_length: Optional[int] = None,
    ) -> Load: ...
    @property
    def precision(self) -> str: ...
    @property
    def threads(self) -> Optional[int]: ...

@final
class SentenceEncoder:
    def __new__(
        cls, model: str, load: Load, pooling: Optional[str] = None, normalize: Optional[bool] = None
    ) -> SentenceEncoder: ...
    def encode(
        self,
        texts: Sequence[str],
        prompt: Optional[str] = None,
        batch_size: int = 32,
        progress: _Progress = None,
    ) -> npt.NDArray[np.float32]: ...
    def token_embeddings(
        self,
        texts: Sequence[str],
        batch_size: int = 32,
        progress: _Progress = None,
        max_length: Optional[int] = None,
        truncation: bool = True,
    ) -> List[npt.NDArray[np.float32]]: ...
    @property
    def dim(self) -> int: ...
    @property
    def max_seq_length(self) -> int: ...
    @property
    def prompts(self) -> Dict[str, str]: ...
    @property
    def default_prompt(self) -> str: ...
    @property
    def normalize(self) -> bool: ...
    @property
    def pooling(self) -> str: ...
    @property
    def path(self) -> str: ...

@final
class CrossEncoder:
    def __new__(cls, model: str, load: Load) -> CrossEncoder: ...
    def predict(
        self, pairs: Sequence[Sequence[str]], batch_size: int = 32, progress: _Progress = None, raw: bool = False
    ) -> npt.NDArray[np.float32]: ...
    @property
    def max_length(self) -> int: ...
    @property
    def path(self) -> str: ...

@final
class SparseEncoder:
    def __new__(cls, model: str, load: Load) -> SparseEncoder: ...
    def encode(
        self, texts: Sequence[str], batch_size: int = 32, progress: _Progress = None
    ) -> Tuple[npt.NDArray[np.float32], npt.NDArray[np.int32], npt.NDArray[np.int64]]: ...
    @property
    def dim(self) -> int: ...
    @property
    def max_seq_length(self) -> int: ...
    def tokens(self, ids: Sequence[int]) -> List[Optional[str]]: ...

@final
class TextClassifier:
    def __new__(cls, model: Optional[str], load: Load) -> TextClassifier: ...
    def logits(
        self,
        firsts: Sequence[str],
        seconds: Optional[Sequence[Optional[str]]] = None,
        batch_size: int = 32,
        max_length: Optional[int] = None,
        truncation: bool = True,
    ) -> npt.NDArray[np.float32]: ...
    @property
    def labels(self) -> List[str]: ...
    @property
    def problem_type(self) -> Optional[str]: ...

@final
class TokenClassifier:
    def __new__(cls, model: str, load: Load) -> TokenClassifier: ...
    def classify(
        self,
        texts: Sequence[str],
        aggregation_strategy: str = "none",
        ignore_labels: Optional[Sequence[str]] = None,
        batch_size: int = 32,
        max_length: Optional[int] = None,
        truncation: bool = True,
        stride: Optional[int] = None,
    ) -> List[List[Tuple[str, float, str, int, int, Optional[int]]]]: ...

@final
class QuestionAnswerer:
    def __new__(cls, model: str, load: Load) -> QuestionAnswerer: ...
    def answer(
        self,
        questions: Sequence[str],
        contexts: Sequence[str],
        top_k: int = 1,
        max_answer_len: int = 15,
        max_seq_len: Optional[int] = None,
        doc_stride: Optional[int] = None,
        handle_impossible_answer: bool = False,
        align_to_words: bool = True,
        batch_size: int = 32,
    ) -> List[List[Tuple[str, float, int, int]]]: ...

@final
class FillMask:
    def __new__(cls, model: str, load: Load) -> FillMask: ...
    def fill(
        self,
        texts: Sequence[str],
        top_k: int = 5,
        batch_size: int = 32,
        max_length: Optional[int] = None,
        truncation: bool = True,
    ) -> List[List[List[Tuple[int, str, float, str]]]]: ...
    @property
    def mask_token(self) -> str: ...

@final
class Paraphraser:
    def __new__(cls, model: str, load: Load) -> Paraphraser: ...
    def paraphrase(
        self,
        text: str,
        num_samples: int = 32,
        num_return: Optional[int] = None,
        top_p: float = 0.95,
        top_k: Optional[int] = None,
        temperature: float = 1.0,
        seed: int = 0,
        max_new_tokens: int = 32,
        greedy: bool = False,
    ) -> List[Tuple[str, float]]: ...
