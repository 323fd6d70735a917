//! What one forward pass shares across its layers: how tokens form sequences (padded rows with
//! a mask, or packed back to back), causality, the rotary tables, and dropout when training.

use std::sync::OnceLock;

use candle_core::{DType, Result, Tensor};

use crate::kernels::attention::Segments;
use crate::layers::DropoutRng;
use crate::rotary::RotaryTables;

/// How the tokens of a batch are laid out.
pub(crate) enum Layout {
    /// (batch, len) rows; `keep` is 1 for tokens that may be attended to and 0 for padding,
    /// `None` when none is padding.
    Padded { batch: usize, len: usize, keep: Option<Tensor> },
    /// Sequences back to back, as (first token, length): no padding at all.
    Packed { spans: Vec<(usize, usize)> },
}

/// Each sequence as (first token, length), and the additive key bias of padded rows.
type FusedLayout = (Vec<(usize, usize)>, Option<Vec<f32>>);

pub(crate) struct Pass<'a> {
    pub layout: Layout,
    causal: bool,
    pub rope: RotaryTables,
    dropout: Option<&'a DropoutRng>,
    /// The additive attention bias of Candle's path, built on first use.
    bias: OnceLock<Option<Tensor>>,
    /// The spans and key bias of the fused kernel, built on first use.
    fused: OnceLock<FusedLayout>,
}

impl<'a> Pass<'a> {
    pub fn new(layout: Layout, causal: bool, rope: RotaryTables, dropout: Option<&'a DropoutRng>) -> Self {
        Self { layout, causal, rope, dropout, bias: OnceLock::new(), fused: OnceLock::new() }
    }

    /// Dropout with probability `p` in training; the identity otherwise.
    pub fn dropout(&self, xs: &Tensor, p: f64) -> Result<Tensor> {
        match self.dropout {
            Some(rng) => rng.apply(xs, p),
            None => Ok(xs.clone()),
        }
    }

    /// The sequences as the fused attention kernel takes them.
    pub fn segments(&self) -> Result<Segments<'_>> {
        if self.fused.get().is_none() {
            let value = match &self.layout {
                Layout::Packed { spans } => (spans.clone(), None),
                Layout::Padded { batch, len, keep } => {
                    let spans = (0..*batch).map(|b| (b * len, *len)).collect();
                    let bias = match keep {
                        Some(keep) => Some(
                            keep.flatten_all()?
                                .to_vec1::<f32>()?
                                .into_iter()
                                .map(|k| if k == 0.0 { f32::MIN } else { 0.0 })
                                .collect(),
                        ),
                        None => None,
                    };
                    (spans, bias)
                }
            };
            let _ = self.fused.set(value);
        }
        let (spans, key_bias) = self.fused.get().expect("set above");
        Ok(Segments { spans, key_bias: key_bias.as_deref(), causal: self.causal })
    }

    /// The mask as an additive bias broadcasting to (batch, heads, query, key): 0 where attention
    /// is allowed and the dtype's minimum elsewhere, as transformers' eager path does. `None` when
    /// nothing is masked, which spares every layer the addition.
    pub fn attention_bias(&self, dtype: DType) -> Result<Option<&Tensor>> {
        if let Some(bias) = self.bias.get() {
            return Ok(bias.as_ref());
        }
        let bias = self.build_bias(dtype)?;
        Ok(self.bias.get_or_init(|| bias).as_ref())
    }

    fn build_bias(&self, dtype: DType) -> Result<Option<Tensor>> {
        let Layout::Padded { batch, len, keep } = &self.layout else {
            candle_core::bail!("packed sequences need the fused CPU kernels (f32 on the CPU)")
        };
        let (batch, len) = (*batch, *len);
        let device = self.rope.cos.device();
        let keep = match (keep, self.causal) {
            (None, false) => return Ok(None),
            (Some(keep), _) => keep.reshape((batch, 1, 1, len))?,
            (None, true) => Tensor::ones((batch, 1, 1, len), DType::F32, device)?,
        };
        let keep = if self.causal {
            let causal: Vec<f32> =
                (0..len).flat_map(|q| (0..len).map(move |k| if k <= q { 1.0 } else { 0.0 })).collect();
            keep.broadcast_mul(&Tensor::from_vec(causal, (1, 1, len, len), device)?)?
        } else {
            keep
        };
        let min = match dtype {
            DType::F16 => f64::from(half::f16::MIN),
            DType::BF16 => f64::from(half::bf16::MIN),
            DType::F64 => f64::MIN,
            _ => f64::from(f32::MIN),
        };
        // 1 - keep is exactly 0 or 1, so the bias is exactly 0 or min.
        Ok(Some(((keep.ones_like()? - keep)? * min)?.to_dtype(dtype)?))
    }
}
