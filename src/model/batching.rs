//! Batches of encodings for the pipelines and the trainer: padded rows in length order, or
//! packed back to back when the fused CPU kernels run the model.

use candle_core::{Device, IndexOp, Tensor, D};

use crate::error::{Error, Result};
use crate::loading::tokenizer::Encoded;

/// The token ids of a batch, and how they form sequences.
pub(crate) enum Batch {
    /// (batch, seq) ids and types, and the mask: 1 for tokens, 0 for padding (`None`: no padding).
    Padded { ids: Tensor, types: Tensor, mask: Option<Tensor> },
    /// (tokens,) ids and types, and each sequence as (first token, length).
    Packed { ids: Tensor, types: Tensor, spans: Vec<(usize, usize)> },
}

impl Batch {
    /// The batch of `encodings`: packed, or padded to the longest with `pad_id`.
    pub fn new(encodings: &[&Encoded], pad_id: u32, device: &Device, packed: bool) -> Result<Self> {
        if packed {
            let mut spans = Vec::with_capacity(encodings.len());
            let (mut ids, mut types) = (Vec::new(), Vec::new());
            for e in encodings {
                spans.push((ids.len(), e.len()));
                ids.extend_from_slice(&e.input_ids);
                types.extend_from_slice(&e.token_type_ids);
            }
            let n = ids.len();
            return Ok(Batch::Packed {
                ids: Tensor::from_vec(ids, n, device)?,
                types: Tensor::from_vec(types, n, device)?,
                spans,
            });
        }
        let len = encodings.iter().map(|e| e.len()).max().unwrap_or(0);
        let pad = |v: &[u32], fill: u32| {
            v.iter().copied().chain(std::iter::repeat(fill)).take(len).collect::<Vec<u32>>()
        };
        let stack = |rows: Vec<Vec<u32>>| -> Result<Tensor> {
            let flat: Vec<u32> = rows.into_iter().flatten().collect();
            Ok(Tensor::from_vec(flat, (encodings.len(), len), device)?)
        };
        Ok(Batch::Padded {
            ids: stack(encodings.iter().map(|e| pad(&e.input_ids, pad_id)).collect())?,
            types: stack(encodings.iter().map(|e| pad(&e.token_type_ids, 0)).collect())?,
            mask: Some(stack(encodings.iter().map(|e| pad(&e.attention_mask, 0)).collect())?),
        })
    }

    /// The hidden state (or logits) of each sequence's first token: (batch, width).
    pub fn first_tokens(&self, xs: &Tensor) -> Result<Tensor> {
        match self {
            Batch::Padded { .. } => Ok(xs.narrow(1, 0, 1)?.squeeze(1)?),
            Batch::Packed { spans, .. } => {
                let starts: Vec<u32> = spans.iter().map(|&(s, _)| s as u32).collect();
                let n = starts.len();
                Ok(xs.index_select(&Tensor::from_vec(starts, n, xs.device())?, 0)?)
            }
        }
    }

    /// The mean of each sequence's real tokens: (batch, width).
    pub fn mean(&self, xs: &Tensor) -> Result<Tensor> {
        match self {
            Batch::Padded { mask: None, .. } => Ok(xs.mean(1)?),
            Batch::Padded { mask: Some(mask), .. } => {
                let mask = mask.to_dtype(xs.dtype())?.unsqueeze(D::Minus1)?;
                let summed = xs.broadcast_mul(&mask)?.sum(1)?;
                let counts = mask.sum(1)?.clamp(1e-9, f64::INFINITY)?;
                Ok(summed.broadcast_div(&counts)?)
            }
            Batch::Packed { spans, .. } => {
                let rows: Vec<Tensor> = spans
                    .iter()
                    .map(|&(s, l)| Ok(xs.narrow(0, s, l)?.mean_keepdim(0)?))
                    .collect::<Result<_>>()?;
                Ok(Tensor::cat(&rows, 0)?)
            }
        }
    }

    /// The rows of the first `len` tokens of sequence `b`: (len, ...).
    pub fn tokens(&self, xs: &Tensor, b: usize, len: usize) -> Result<Tensor> {
        match self {
            Batch::Padded { .. } => Ok(xs.i(b)?.narrow(0, 0, len)?),
            Batch::Packed { spans, .. } => Ok(xs.narrow(0, spans[b].0, len)?),
        }
    }

    /// The row of token `pos` of sequence `b`.
    pub fn token(&self, xs: &Tensor, b: usize, pos: usize) -> Result<Tensor> {
        match self {
            Batch::Padded { .. } => Ok(xs.i((b, pos))?),
            Batch::Packed { spans, .. } => Ok(xs.i(spans[b].0 + pos)?),
        }
    }
}

/// Runs `forward` on batches of up to `batch_size` encodings of similar length and returns its
/// rows (one per encoding) in input order. Sorting by length keeps padding small when lengths
/// are mixed, and packed batches of similar lengths balance the attention tasks.
pub(crate) fn run_by_length<T>(
    encodings: &[&Encoded],
    batch_size: usize,
    pad_id: u32,
    device: &Device,
    packed: bool,
    mut forward: impl FnMut(&Batch, &[&Encoded]) -> Result<Vec<T>>,
) -> Result<Vec<T>> {
    let mut order: Vec<usize> = (0..encodings.len()).collect();
    order.sort_by_key(|&i| encodings[i].len());
    let mut results: Vec<Option<T>> = (0..encodings.len()).map(|_| None).collect();
    for chunk in order.chunks(batch_size.max(1)) {
        let batch: Vec<&Encoded> = chunk.iter().map(|&i| encodings[i]).collect();
        let rows = forward(&Batch::new(&batch, pad_id, device, packed)?, &batch)?;
        if rows.len() != chunk.len() {
            return Err(Error::Input(format!("batch of {} gave {} rows", chunk.len(), rows.len())));
        }
        for (&i, row) in chunk.iter().zip(rows) {
            results[i] = Some(row);
        }
    }
    Ok(results.into_iter().flatten().collect())
}
