//! The parametrised building blocks every component uses, with transformers' initialisation
//! (normal(0, initializer_range) weights, zero biases, unit norms) for models built from scratch.

use std::sync::Mutex;

use candle_core::{Module, Result, Tensor};
use candle_nn::{Init, VarBuilder};

use crate::config::{Config, NormType};

/// A dense layer `x Wᵀ + b`.
#[derive(Debug, Clone)]
pub(crate) struct Linear {
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

    /// One layer computing the outputs of several side by side (their weights stacked).
    pub fn concat(parts: &[&Linear]) -> Result<Self> {
        let weights: Vec<&Tensor> = parts.iter().map(|l| &l.weight).collect();
        let weight = Tensor::cat(&weights, 0)?;
        let bias = if parts.iter().all(|l| l.bias.is_some()) {
            let biases: Vec<&Tensor> = parts.iter().filter_map(|l| l.bias.as_ref()).collect();
            Some(Tensor::cat(&biases, 0)?)
        } else {
            None
        };
        Ok(Self { weight, bias })
    }
}

impl Module for Linear {
    fn forward(&self, xs: &Tensor) -> Result<Tensor> {
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
        if let Some(last) = out_dims.last_mut() {
            *last = self.weight.dim(0)?;
        }
        ys.reshape(out_dims)
    }
}

/// The normalisation after each residual: LayerNorm, or RoFormer v2's weightless RMS norm.
#[derive(Debug, Clone)]
pub(crate) enum Norm {
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
}

impl Module for Norm {
    fn forward(&self, xs: &Tensor) -> Result<Tensor> {
        match self {
            Norm::Layer { weight, bias, eps } => crate::ops::layer_norm(xs, weight, bias, *eps),
            Norm::Rms { eps } => crate::ops::rms_norm(xs, *eps),
        }
    }
}

/// The random masks of dropout in training. Candle's CPU generator cannot be seeded, so each
/// trainer owns one of these, and a training run can be repeated exactly.
#[derive(Debug)]
pub(crate) struct DropoutRng(Mutex<SplitMix64>);

impl DropoutRng {
    pub fn new(seed: u64) -> Self {
        Self(Mutex::new(SplitMix64::new(seed)))
    }

    /// `xs` with each element zeroed with probability `p` and the rest scaled by 1 / (1 - p).
    pub fn apply(&self, xs: &Tensor, p: f64) -> Result<Tensor> {
        if p <= 0.0 {
            return Ok(xs.clone());
        }
        let keep = 1.0 - p;
        let mask: Vec<f32> = {
            let mut rng = self.0.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
            (0..xs.elem_count())
                .map(|_| if rng.next_f64() < keep { (1.0 / keep) as f32 } else { 0.0 })
                .collect()
        };
        let mask = Tensor::from_vec(mask, xs.shape(), xs.device())?.to_dtype(xs.dtype())?;
        xs * mask
    }
}

/// A small, fast, seedable generator (SplitMix64) for dropout and shuffling.
#[derive(Debug, Clone)]
pub(crate) struct SplitMix64(u64);

impl SplitMix64 {
    pub fn new(seed: u64) -> Self {
        Self(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E3779B97F4A7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58476D1CE4E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D049BB133111EB);
        z ^ (z >> 31)
    }

    /// Uniform in [0, 1).
    pub fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Standard normal (Box-Muller).
    pub fn next_normal(&mut self) -> f64 {
        let u1 = 1.0 - self.next_f64();
        let u2 = self.next_f64();
        (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
    }

    /// Fisher-Yates shuffle.
    pub fn shuffle<T>(&mut self, items: &mut [T]) {
        for i in (1..items.len()).rev() {
            let j = (self.next_u64() % (i as u64 + 1)) as usize;
            items.swap(i, j);
        }
    }
}
