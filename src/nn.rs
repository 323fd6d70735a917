//! The two parametrised building blocks every component uses, with transformers' initialisation
//! (normal(0, initializer_range) weights, zero biases, unit norms) for models built from scratch.

use candle_core::{Result, Tensor};
use candle_nn::{Init, VarBuilder};

use crate::config::{Config, NormType};

/// A dense layer `x Wᵀ + b`.
#[derive(Debug, Clone)]
pub struct Linear {
    weight: Tensor,
    bias: Option<Tensor>,
}

impl Linear {
    pub fn load(vb: VarBuilder, in_dim: usize, out_dim: usize, bias: bool, config: &Config) -> Result<Self> {
        let init = Init::Randn { mean: 0.0, stdev: config.initializer_range };
        let weight = vb.get_with_hints((out_dim, in_dim), "weight", init)?;
        let bias = if bias { Some(vb.get_with_hints(out_dim, "bias", Init::Const(0.0))?) } else { None };
        Ok(Self { weight, bias })
    }

    pub fn from_weights(weight: Tensor, bias: Option<Tensor>) -> Self {
        Self { weight, bias }
    }

    pub fn weight(&self) -> &Tensor {
        &self.weight
    }

    pub fn forward(&self, xs: &Tensor) -> Result<Tensor> {
        // Flattening to 2-D keeps the weight out of batched matmul, whose CPU kernel in
        // candle-core 0.11.1 mishandles some transposed/broadcast operand pairs.
        let dims = xs.dims().to_vec();
        let in_dim = *dims.last().unwrap_or(&0);
        let rows = xs.elem_count() / in_dim.max(1);
        let ys = xs.contiguous()?.reshape((rows, in_dim))?.matmul(&self.weight.t()?)?;
        let ys = match &self.bias {
            Some(b) => ys.broadcast_add(b)?,
            None => ys,
        };
        let mut out_dims = dims;
        *out_dims.last_mut().expect("linear input has a last dimension") = self.weight.dim(0)?;
        ys.reshape(out_dims)
    }
}

/// The normalisation after each residual: LayerNorm, or RoFormer v2's weightless RMS norm.
#[derive(Debug, Clone)]
pub enum Norm {
    Layer { weight: Tensor, bias: Tensor, eps: f64 },
    Rms { eps: f64 },
}

impl Norm {
    pub fn load(vb: VarBuilder, dim: usize, config: &Config) -> Result<Self> {
        let eps = config.layer_norm_eps;
        match config.norm_type() {
            NormType::RmsNorm => Ok(Norm::Rms { eps }),
            NormType::LayerNorm => {
                // Checkpoints converted from TensorFlow may still name the affine part gamma/beta.
                let (w, b) = if !vb.contains_tensor("weight") && vb.contains_tensor("gamma") {
                    ("gamma", "beta")
                } else {
                    ("weight", "bias")
                };
                let weight = vb.get_with_hints(dim, w, Init::Const(1.0))?;
                let bias = vb.get_with_hints(dim, b, Init::Const(0.0))?;
                Ok(Norm::Layer { weight, bias, eps })
            }
        }
    }

    pub fn forward(&self, xs: &Tensor) -> Result<Tensor> {
        match self {
            Norm::Layer { weight, bias, eps } => crate::ops::layer_norm(xs, weight, bias, *eps),
            Norm::Rms { eps } => crate::ops::rms_norm(xs, *eps),
        }
    }
}

/// Dropout that is active only in training.
pub fn dropout(xs: &Tensor, p: f64, train: bool) -> Result<Tensor> {
    if train && p > 0.0 {
        candle_nn::ops::dropout(xs, p as f32)
    } else {
        Ok(xs.clone())
    }
}
