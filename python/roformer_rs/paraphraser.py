"""RoFormer-Sim's similar sentences, with the options of the crate's `paraphrase` example."""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Union

from . import _native
from ._common import PathLike, load_options, model_path


class Paraphraser:
    """Generates sentences similar to a source with a sim checkpoint (junnyu's
    roformer_chinese_sim_char_base, _small and their _ft_ variants) and ranks them by similarity."""

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
    ) -> None:
        options = load_options(revision, token, cache_folder, local_files_only, precision, threads, device)
        self._model = _native.Paraphraser(model_path(model_name_or_path), options)

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
    ) -> List[Dict[str, Any]]:
        """The `num_return` (8 by default; 1 with `greedy`) most similar of `num_samples` sampled
        sentences, best first, each {"text", "similarity"}."""
        if not isinstance(text, str):
            raise _native.RoformerTypeError(f"text is {type(text).__name__}, not str")
        found = self._model.paraphrase(
            text, num_samples, num_return, top_p, top_k, temperature, seed, max_new_tokens, greedy
        )
        return [{"text": t, "similarity": s} for t, s in found]
