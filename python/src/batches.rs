//! A call's inputs, run batch by batch. The GIL is released while a batch tokenizes and computes,
//! so other Python threads run meanwhile; it is taken back between batches, where Ctrl-C raises
//! `KeyboardInterrupt` and the progress bar moves.
//!
//! Encoded inputs go shortest first, `batch_size` at a time: the order the library's own batching
//! takes, so that each batch here is one of the batches a single library call would have made, and
//! the answers are the library's, bit for bit.

use std::borrow::Cow;

use pyo3::prelude::*;
use roformer::Encoded;

use crate::errors::OrRaise;
use crate::inputs::at_least_one;

/// Moves `progress` (a callable, tqdm's `update`) by `n`.
fn advance(progress: Option<&Bound<'_, PyAny>>, n: usize) -> PyResult<()> {
    if let Some(progress) = progress {
        progress.call1((n,))?;
    }
    Ok(())
}

/// One output per encoding, in input order: `forward` runs on batches of similar length.
pub fn by_length<T: Send>(
    py: Python<'_>,
    encodings: Vec<Encoded>,
    batch_size: usize,
    progress: Option<&Bound<'_, PyAny>>,
    forward: impl Fn(&[Encoded]) -> roformer::Result<Vec<T>> + Sync,
) -> PyResult<Vec<T>> {
    let batch_size = at_least_one(batch_size, "batch_size")?;
    let mut indexed: Vec<(usize, Encoded)> = encodings.into_iter().enumerate().collect();
    indexed.sort_by_key(|(_, e)| e.len());
    let (order, sorted): (Vec<usize>, Vec<Encoded>) = indexed.into_iter().unzip();
    let mut rows: Vec<Option<T>> = (0..sorted.len()).map(|_| None).collect();
    for (indices, batch) in order.chunks(batch_size).zip(sorted.chunks(batch_size)) {
        py.check_signals()?;
        let out = py.detach(|| forward(batch)).or_raise()?;
        if out.len() != batch.len() {
            return Err(crate::errors::value_error(format!(
                "a batch of {} gave {} rows",
                batch.len(),
                out.len()
            )));
        }
        for (&i, row) in indices.iter().zip(out) {
            rows[i] = Some(row);
        }
        advance(progress, 1)?;
    }
    // Every index is in one batch, and each batch gave as many rows as it had inputs.
    Ok(rows.into_iter().flatten().collect())
}

/// One output per input, in input order: `forward` runs on `batch_size` inputs at a time, as
/// given (transformers' pipelines keep the input order).
pub fn in_order<I: Sync, T: Send>(
    py: Python<'_>,
    inputs: &[I],
    batch_size: usize,
    forward: impl Fn(&[I]) -> roformer::Result<Vec<T>> + Sync,
) -> PyResult<Vec<T>> {
    let batch_size = at_least_one(batch_size, "batch_size")?;
    let mut rows = Vec::with_capacity(inputs.len());
    for batch in inputs.chunks(batch_size) {
        py.check_signals()?;
        rows.extend(py.detach(|| forward(batch)).or_raise()?);
    }
    Ok(rows)
}

/// Tokenizes without the GIL.
pub fn tokenize<T: Send>(py: Python<'_>, run: impl FnOnce() -> roformer::Result<T> + Send) -> PyResult<T> {
    py.detach(run).or_raise()
}

/// The tokenizer a call encodes with: the model's own where the call asks nothing of truncation,
/// else a copy that cuts at `max_length` (`truncation` true) or does not cut at all (false).
pub fn call_tokenizer(
    base: &roformer::Tokenizer,
    truncation: bool,
    max_length: Option<usize>,
) -> PyResult<Cow<'_, roformer::Tokenizer>> {
    if truncation && max_length.is_none() {
        return Ok(Cow::Borrowed(base));
    }
    let mut tokenizer = base.clone();
    match (truncation, max_length) {
        (true, Some(n)) => tokenizer
            .set_truncation(Some(roformer::Truncation::LongestFirst), Some(at_least_one(n, "max_length")?))
            .or_raise()?,
        _ => tokenizer.set_truncation(None, None).or_raise()?,
    }
    Ok(Cow::Owned(tokenizer))
}

/// With a call's own truncation, each input must fit the model's positions
/// (max_position_embeddings, where transformers' position table ends), unless its config scales
/// RoPE past them: the first that does not is named with its length.
pub fn check_positions(config: &roformer::Config, encodings: &[Encoded]) -> PyResult<()> {
    if !matches!(config.rope_scaling(), Ok(None)) {
        return Ok(());
    }
    let limit = config.max_position_embeddings;
    match encodings.iter().position(|e| e.len() > limit) {
        Some(i) => Err(crate::errors::value_error(format!(
            "inputs[{i}] has {} tokens, more than the {limit} positions of the model (max_position_embeddings): \
             pass truncation=True",
            encodings[i].len()
        ))),
        None => Ok(()),
    }
}
