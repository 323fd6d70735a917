"""What every class shares: the loading options, the progress bar, and the model argument."""

from __future__ import annotations

import logging
import os
from contextlib import contextmanager
from typing import Any, Callable, Iterator, Optional, Union

from . import _native

logger = logging.getLogger("roformer_rs")

PathLike = Union[str, "os.PathLike[str]"]


def model_path(model: PathLike) -> str:
    """A folder or a Hub id, as the native loaders take it."""
    if isinstance(model, os.PathLike):
        return os.fspath(model)
    if not isinstance(model, str):
        raise _native.RoformerTypeError(
            f"model is {type(model).__name__}, not a folder or Hub id (str or os.PathLike)"
        )
    return model


def load_options(
    revision: Optional[str] = None,
    token: Optional[Union[str, bool]] = None,
    cache_folder: Optional[PathLike] = None,
    local_files_only: bool = False,
    precision: str = "float32",
    threads: Optional[int] = None,
    device: Optional[str] = None,
    max_seq_length: Optional[int] = None,
) -> _native.Load:
    """The native loading options; `token=True` reads the saved token, as huggingface_hub does."""
    if token is True or token is False:
        token = None  # the native client reads HF_TOKEN and the saved token itself
    return _native.Load(
        revision=revision,
        token=token,
        cache_folder=os.fspath(cache_folder) if cache_folder is not None else None,
        local_files_only=local_files_only,
        precision=precision,
        threads=threads,
        device=device or "cpu",
        max_seq_length=max_seq_length,
    )


def show_progress(show_progress_bar: Optional[bool]) -> bool:
    """sentence-transformers' default: a bar when this package logs at INFO or DEBUG."""
    if show_progress_bar is None:
        return logger.getEffectiveLevel() in (logging.INFO, logging.DEBUG)
    return bool(show_progress_bar)


@contextmanager
def progress_bar(show: bool, batches: int, desc: str = "Batches") -> Iterator[Optional[Callable[[int], Any]]]:
    """tqdm's bar over `batches` batches, as sentence-transformers shows it; its `update`, or None."""
    if not show:
        yield None
        return
    try:
        from tqdm.auto import tqdm  # type: ignore[import-untyped, unused-ignore]
    except ImportError:
        logger.warning("show_progress_bar=True needs tqdm (pip install tqdm): running without a bar")
        yield None
        return
    with tqdm(total=batches, desc=desc) as bar:
        yield bar.update


def batches(count: int, batch_size: int) -> int:
    """How many batches `count` inputs make."""
    if not isinstance(batch_size, int) or isinstance(batch_size, bool) or batch_size < 1:
        raise _native.RoformerValueError(f"batch_size must be an int of at least 1, not {batch_size!r}")
    return -(-count // batch_size)
