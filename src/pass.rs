//! What one forward pass shares across its layers: how tokens form sequences (padding and
//! causality), the rotary tables for its length, and dropout when training.

use std::sync::OnceLock;

use candle_core::{DType, Result, Tensor};

use crate::layers::DropoutRng;
use crate::rotary::RotaryTables;

pub(crate) struct Pass<'a> {
    pub batch: usize,
    pub len: usize,
    /// (batch, len) 1 for tokens that may be attended to, 0 for padding; `None` when all may.
    keep: Option<Tensor>,
    causal: bool,
    pub rope: RotaryTables,
    dropout: Option<&'a DropoutRng>,
    /// The additive attention bias, built on first use.
    bias: OnceLock<Option<Tensor>>,
}

impl<'a> Pass<'a> {
    pub fn new(
        batch: usize,
        len: usize,
        keep: Option<Tensor>,
        causal: bool,
        rope: RotaryTables,
        dropout: Option<&'a DropoutRng>,
    ) -> Self {
        Self { batch, len, keep, causal, rope, dropout, bias: OnceLock::new() }
    }

    /// Dropout with probability `p` in training; the identity otherwise.
    pub fn dropout(&self, xs: &Tensor, p: f64) -> Result<Tensor> {
        match self.dropout {
            Some(rng) => rng.apply(xs, p),
            None => Ok(xs.clone()),
        }
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
        let (batch, len) = (self.batch, self.len);
        let device = self.rope.cos.device();
        let keep = match (&self.keep, self.causal) {
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
