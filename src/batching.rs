//! Padded batches of encodings, in length order, for the pipelines and the trainer.

use candle_core::{Device, Tensor};

use crate::error::{Error, Result};
use crate::model::Inputs;
use crate::tokenizer::Encoded;

/// Runs `forward` on batches of up to `batch_size` encodings of similar length, padded to the
/// longest of each batch, and returns its rows (one per encoding) in input order. Sorting by
/// length keeps padding small when lengths are mixed.
pub(crate) fn run_by_length<T>(
    encodings: &[&Encoded],
    batch_size: usize,
    pad_id: u32,
    device: &Device,
    mut forward: impl FnMut(Inputs, &[&Encoded]) -> Result<Vec<T>>,
) -> Result<Vec<T>> {
    let mut order: Vec<usize> = (0..encodings.len()).collect();
    order.sort_by_key(|&i| encodings[i].len());
    let mut results: Vec<Option<T>> = (0..encodings.len()).map(|_| None).collect();
    for chunk in order.chunks(batch_size.max(1)) {
        let batch: Vec<&Encoded> = chunk.iter().map(|&i| encodings[i]).collect();
        let (ids, types, mask) = batch_tensors(&batch, pad_id, device)?;
        let inputs = Inputs { input_ids: &ids, token_type_ids: Some(&types), attention_mask: Some(&mask) };
        let rows = forward(inputs, &batch)?;
        if rows.len() != chunk.len() {
            return Err(Error::Input(format!("batch of {} gave {} rows", chunk.len(), rows.len())));
        }
        for (&i, row) in chunk.iter().zip(rows) {
            results[i] = Some(row);
        }
    }
    Ok(results.into_iter().flatten().collect())
}

/// Pads a batch to its longest member and stacks ids, type ids and mask as (batch, seq) u32.
pub(crate) fn batch_tensors(
    batch: &[&Encoded],
    pad_id: u32,
    device: &Device,
) -> Result<(Tensor, Tensor, Tensor)> {
    let len = batch.iter().map(|e| e.len()).max().unwrap_or(0);
    let pad = |v: &[u32], fill: u32| {
        v.iter().copied().chain(std::iter::repeat(fill)).take(len).collect::<Vec<u32>>()
    };
    let stack = |rows: Vec<Vec<u32>>| -> Result<Tensor> {
        let flat: Vec<u32> = rows.into_iter().flatten().collect();
        Ok(Tensor::from_vec(flat, (batch.len(), len), device)?)
    };
    Ok((
        stack(batch.iter().map(|e| pad(&e.input_ids, pad_id)).collect())?,
        stack(batch.iter().map(|e| pad(&e.token_type_ids, 0)).collect())?,
        stack(batch.iter().map(|e| pad(&e.attention_mask, 0)).collect())?,
    ))
}
