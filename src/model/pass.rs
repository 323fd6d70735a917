//! What one forward pass shares across its layers: the engine's form of the mask (how tokens form
//! sequences and what each may attend to), the rotary tables, and dropout when training.

use candle_core::{DType, Tensor};

use crate::error::{candle_bail, Result};
use crate::model::batching::Batch;
use crate::model::layers::DropoutRng;
use crate::model::rotary::RotaryTables;
use crate::runtime::engine::Engine;
use crate::runtime::kernels::attention::Rotation;
use crate::runtime::kernels::Level;
use crate::runtime::kv_cache::KvCache;

/// The mask in the form the model's engine computes attention with.
pub(crate) enum Mask<'a> {
    /// The fused kernel's: each sequence as (first token, length), and per token an additive key
    /// bias (0, or f32::MIN for padding) when any is padding.
    /// `rotation` holds the rotary tables in the fused kernel's form, built once for every layer.
    Segments { level: Level, spans: Vec<(usize, usize)>, key_bias: Option<Vec<f32>>, rotation: Rotation },
    /// Candle's: (batch, len) rows and an additive bias broadcasting to (batch, heads, query,
    /// key), 0 where attention is allowed and the dtype's minimum elsewhere, as transformers'
    /// eager path does; `None` when nothing is masked, which spares every layer the addition.
    Bias { batch: usize, len: usize, bias: Option<Tensor> },
    /// A decoding step on either engine: (batch, len) rows at the positions after those in
    /// `cache`, which attend to the cached keys and to each other as `bias` (broadcasting to
    /// (batch, heads, len, cached + len)) allows; `None` lets them see everything. Candle's
    /// attention computes it whatever the engine: a step holds a few tokens, so attention is a
    /// small part of its work, and the linear layers still run on the model's engine.
    Cached { cache: &'a KvCache, bias: Option<Tensor> },
}

pub(crate) struct Pass<'a> {
    pub mask: Mask<'a>,
    pub causal: bool,
    pub rope: RotaryTables,
    dropout: Option<&'a DropoutRng>,
}

impl<'a> Pass<'a> {
    /// The pass of `batch` for `engine`, with the rotary tables covering its longest sequence.
    pub fn new(
        engine: Engine,
        batch: &Batch,
        causal: bool,
        rope: RotaryTables,
        dtype: DType,
        dropout: Option<&'a DropoutRng>,
    ) -> Result<Self> {
        let mask = match (engine, batch) {
            (Engine::Fused(level), batch) => {
                let (spans, key_bias) = match batch {
                    Batch::Packed { spans, .. } => (spans.clone(), None),
                    Batch::Padded { ids, mask, .. } => {
                        let (b, len) = ids.dims2()?;
                        let key_bias = match padding(mask)? {
                            Some(keep) => Some(
                                keep.flatten_all()?
                                    .to_vec1::<f32>()?
                                    .into_iter()
                                    .map(|k| if k == 0.0 { f32::MIN } else { 0.0 })
                                    .collect(),
                            ),
                            None => None,
                        };
                        ((0..b).map(|i| (i * len, len)).collect(), key_bias)
                    }
                };
                Mask::Segments { level, spans, key_bias, rotation: Rotation::new(&rope.cos, &rope.sin)? }
            }
            (Engine::Candle { .. }, Batch::Padded { ids, mask, .. }) => {
                let (batch, len) = ids.dims2()?;
                let keep = padding(mask)?.map(|m| m.to_device(rope.cos.device())).transpose()?;
                Mask::Bias { batch, len, bias: bias(batch, len, keep, causal, dtype, &rope)? }
            }
            (Engine::Candle { .. }, Batch::Packed { .. }) => {
                candle_bail!("packed sequences need the fused CPU engine (f32 on the CPU)")
            }
        };
        Ok(Self { mask, causal, rope, dropout })
    }

    /// A decoding step of `len` new positions of the sequences in `cache`, with `rope` covering
    /// them: the query at position q sees the key at position k where `sees(q, k)`.
    pub fn cached(
        cache: &'a KvCache,
        len: usize,
        sees: impl Fn(usize, usize) -> bool,
        rope: RotaryTables,
        dtype: DType,
    ) -> Result<Self> {
        let start = cache.len();
        let keys = start + len;
        let bias: Vec<f32> = (start..keys)
            .flat_map(|q| (0..keys).map(move |k| (q, k)))
            .map(|(q, k)| if sees(q, k) { 0.0 } else { 1.0 })
            .collect();
        let bias = if bias.iter().all(|&b| b == 0.0) {
            None
        } else {
            let blocked = Tensor::from_vec(bias, (1, 1, len, keys), rope.cos.device())?;
            Some((blocked * masked_value(dtype))?.to_dtype(dtype)?)
        };
        Ok(Self { mask: Mask::Cached { cache, bias }, causal: false, rope, dropout: None })
    }

    /// Dropout with probability `p` in training; the identity otherwise.
    pub fn dropout(&self, xs: &Tensor, p: f64) -> Result<Tensor> {
        match self.dropout {
            Some(rng) => rng.apply(xs, p),
            None => Ok(xs.clone()),
        }
    }
}

/// The padding mask as f32 (1 for tokens, 0 for padding), or `None` when nothing is padding.
fn padding(mask: &Option<Tensor>) -> Result<Option<Tensor>> {
    let Some(mask) = mask else { return Ok(None) };
    let mask = mask.to_dtype(DType::F32)?;
    // An all-ones mask masks nothing: skip it.
    Ok(if mask.min_all()?.to_scalar::<f32>()? == 1.0 { None } else { Some(mask) })
}

/// Candle's additive attention bias for (batch, len) rows with padding `keep` and causality.
fn bias(
    batch: usize,
    len: usize,
    keep: Option<Tensor>,
    causal: bool,
    dtype: DType,
    rope: &RotaryTables,
) -> Result<Option<Tensor>> {
    let device = rope.cos.device();
    let keep = match (keep, causal) {
        (None, false) => return Ok(None),
        (Some(keep), _) => keep.reshape((batch, 1, 1, len))?,
        (None, true) => Tensor::ones((batch, 1, 1, len), DType::F32, device)?,
    };
    let keep = if causal {
        let causal: Vec<f32> =
            (0..len).flat_map(|q| (0..len).map(move |k| if k <= q { 1.0 } else { 0.0 })).collect();
        keep.broadcast_mul(&Tensor::from_vec(causal, (1, 1, len, len), device)?)?
    } else {
        keep
    };
    // 1 - keep is exactly 0 or 1, so the bias is exactly 0 or min.
    Ok(Some(((keep.ones_like()? - keep)? * masked_value(dtype))?.to_dtype(dtype)?))
}

/// The additive bias of a masked position: the dtype's minimum, as transformers' eager path adds.
fn masked_value(dtype: DType) -> f64 {
    match dtype {
        DType::F16 => f64::from(half::f16::MIN),
        DType::BF16 => f64::from(half::bf16::MIN),
        DType::F64 => f64::MIN,
        _ => f64::from(f32::MIN),
    }
}
