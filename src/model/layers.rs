//! The parametrised building blocks every component uses, with transformers' initialisation
//! (normal(0, initializer_range) weights, zero biases, unit norms) for models built from scratch.

use std::sync::{Arc, Mutex};

use candle_core::Tensor;
use candle_nn::{Init, VarBuilder};

use crate::error::Result;
use crate::loading::config::{Config, NormType};
use crate::runtime::activation::Activation;
use crate::runtime::engine::Engine;
use crate::runtime::kernels;
use crate::runtime::kernels::gemm::{PackedBf16, PackedF32, PackedI8};
use crate::runtime::kernels::linear::PackedWeight;
use crate::runtime::quantization::Quantization;

/// A dense layer `x Wᵀ + b`, in the form its engine computes with.
#[derive(Debug, Clone)]
pub(crate) enum Linear {
    /// Candle's matmul over the weight tensor (out, in).
    Candle { weight: Tensor, bias: Option<Tensor> },
    /// The weight packed for the fused kernels: f32, or int8 or bf16 once quantized.
    Fused { weight: Packed, bias: Option<Tensor> },
}

/// A weight packed for the fused kernels.
#[derive(Debug, Clone)]
pub(crate) enum Packed {
    F32(Arc<PackedF32>),
    Int8(Arc<PackedI8>),
    Bf16(Arc<PackedBf16>),
}

/// Loads `weight` (out, in) and, with `bias`, the bias of the dense layer under `vb`.
pub(crate) fn load_weights(
    vb: VarBuilder,
    in_dim: usize,
    out_dim: usize,
    bias: bool,
    config: &Config,
) -> Result<(Tensor, Option<Tensor>)> {
    let init = Init::Randn { mean: 0.0, stdev: config.initializer_range };
    let weight = vb.get_with_hints((out_dim, in_dim), "weight", init)?;
    let bias = if bias { Some(vb.get_with_hints(out_dim, "bias", Init::Const(0.0))?) } else { None };
    Ok((weight, bias))
}

impl Packed {
    /// The packed weight, whichever its precision.
    fn weight(&self) -> &dyn PackedWeight {
        match self {
            Packed::F32(w) => w.as_ref(),
            Packed::Int8(w) => w.as_ref(),
            Packed::Bf16(w) => w.as_ref(),
        }
    }

    /// `w` (n, k) packed for the fused kernels of `level` in `precision`.
    fn new(level: kernels::Level, w: &[f32], n: usize, k: usize, precision: Quantization) -> Self {
        match precision {
            Quantization::None => Packed::F32(Arc::new(PackedF32::new(level, w, n, k))),
            Quantization::Int8 => Packed::Int8(Arc::new(PackedI8::new(level, w, n, k))),
            Quantization::Bf16 => Packed::Bf16(Arc::new(PackedBf16::new(level, w, n, k))),
        }
    }
}

impl Linear {
    /// Loads the layer under `vb` for `engine`.
    pub fn load(
        vb: VarBuilder,
        in_dim: usize,
        out_dim: usize,
        bias: bool,
        config: &Config,
        engine: Engine,
    ) -> Result<Self> {
        let (weight, bias) = load_weights(vb, in_dim, out_dim, bias, config)?;
        Self::new(weight, bias, engine)
    }

    /// Loads the layer under `vb` for `engine`, its weight packed in `precision` straight from
    /// the loaded tensor.
    pub fn load_in(
        vb: VarBuilder,
        (in_dim, out_dim, bias): (usize, usize, bool),
        config: &Config,
        engine: Engine,
        precision: Quantization,
    ) -> Result<Self> {
        let (weight, bias) = load_weights(vb, in_dim, out_dim, bias, config)?;
        Self::new_in(weight, bias, engine, precision)
    }

    /// The layer over `weight` (out, in) and `bias` for `engine`: packed for the fused kernels
    /// (the tensor is then dropped, so memory does not double), kept as a tensor for Candle's.
    pub fn new(weight: Tensor, bias: Option<Tensor>, engine: Engine) -> Result<Self> {
        Self::new_in(weight, bias, engine, Quantization::None)
    }

    /// [`Linear::new`], with the fused engine's weight packed in `precision`: int8 or bf16 from
    /// the f32 tensor directly, so no f32 packed copy is ever made. Candle's engine takes only f32.
    pub fn new_in(
        weight: Tensor,
        bias: Option<Tensor>,
        engine: Engine,
        precision: Quantization,
    ) -> Result<Self> {
        match engine {
            Engine::Candle { .. } if precision != Quantization::None => Err(refused(precision, &weight)),
            Engine::Candle { .. } => Ok(Linear::Candle { weight, bias }),
            Engine::Fused(level) => {
                let (n, k) = weight.dims2()?;
                let weight = weight.contiguous()?;
                let packed = Packed::new(level, kernels::View::new(&weight)?.slice(), n, k, precision);
                Ok(Linear::Fused { weight: packed, bias })
            }
        }
    }

    /// Repacks the f32 weight in `precision`: int8 per output channel, or bf16, for the fused
    /// engine's kernels of that precision.
    pub fn quantize(&mut self, precision: Quantization) -> Result<()> {
        match self {
            Linear::Fused { weight, .. } => {
                if let (Packed::F32(packed), Quantization::Int8 | Quantization::Bf16) = (&weight, precision) {
                    let (level, (n, k)) = (packed.level(), packed.dims());
                    *weight = Packed::new(level, &packed.unpack(), n, k, precision);
                }
                Ok(())
            }
            Linear::Candle { weight, .. } => Err(refused(precision, weight)),
        }
    }

    /// `activation(x Wᵀ + b)`.
    pub fn forward_act(&self, xs: &Tensor, activation: Activation) -> Result<Tensor> {
        match self {
            Linear::Fused { weight, bias } => {
                kernels::linear::linear_packed(xs, weight.weight(), bias.as_ref(), activation)
            }
            Linear::Candle { weight, bias } => {
                // Flattening to 2-D keeps the weight out of batched matmul, whose CPU kernel in
                // candle-core 0.11.1 mishandles some transposed/broadcast operand pairs.
                let dims = xs.dims().to_vec();
                let in_dim = *dims.last().unwrap_or(&0);
                let rows = xs.elem_count() / in_dim.max(1);
                let ys = xs.contiguous()?.reshape((rows, in_dim))?.matmul(&weight.t()?)?;
                let ys = match bias {
                    Some(b) => ys.broadcast_add(b)?,
                    None => ys,
                };
                let mut out_dims = dims;
                if let Some(last) = out_dims.last_mut() {
                    *last = weight.dim(0)?;
                }
                activation.forward(&ys.reshape(out_dims)?)
            }
        }
    }

    /// The packed weight and the bias, where the layer runs on the fused kernels.
    pub fn fused(&self) -> Option<(&dyn PackedWeight, Option<&Tensor>)> {
        match self {
            Linear::Fused { weight, bias } => Some((weight.weight(), bias.as_ref())),
            Linear::Candle { .. } => None,
        }
    }

    /// `x Wᵀ + b`.
    pub fn forward(&self, xs: &Tensor) -> Result<Tensor> {
        self.forward_act(xs, Activation::Linear)
    }
}

/// Why Candle's engine cannot take `precision` for `weight`.
fn refused(precision: Quantization, weight: &Tensor) -> crate::error::Error {
    crate::error::Error::Unsupported(if weight.is_variable() {
        "a model loaded for training cannot be quantized".to_string()
    } else if !weight.device().is_cpu() {
        format!(
            "{precision} runs on the CPU only, and this model is on {:?}: load it on the CPU or leave quantization off",
            weight.device().location()
        )
    } else if weight.dtype() != candle_core::DType::F32 {
        format!(
            "{precision} is quantized from f32 weights, and this model was loaded in {:?}",
            weight.dtype()
        )
    } else {
        format!("{precision} runs on the fused CPU engine, and ROFORMER_ENGINE=candle chose Candle's")
    })
}

/// The normalisation after each residual: LayerNorm (`affine` weight and bias), or RoFormer v2's
/// weightless RMS norm (`affine` none), in the form its engine computes with.
#[derive(Debug, Clone)]
pub(crate) enum Norm {
    /// `norm(x + residual)` in one pass of the fused kernel.
    Fused { affine: Option<(Tensor, Tensor)>, eps: f64 },
    /// Candle's ops, differentiable where training needs it.
    Candle { affine: Option<(Tensor, Tensor)>, eps: f64 },
}

impl Norm {
    pub fn load(vb: VarBuilder, dim: usize, config: &Config, engine: Engine) -> Result<Self> {
        let eps = config.layer_norm_eps;
        let affine = match config.norm_type() {
            NormType::RmsNorm => None,
            NormType::LayerNorm => {
                // Checkpoints converted from TensorFlow may still name the affine part gamma/beta.
                let (w, b) = if !vb.contains_tensor("weight") && vb.contains_tensor("gamma") {
                    ("gamma", "beta")
                } else {
                    ("weight", "bias")
                };
                Some((
                    vb.get_with_hints(dim, w, Init::Const(1.0))?,
                    vb.get_with_hints(dim, b, Init::Const(0.0))?,
                ))
            }
        };
        Ok(match engine {
            Engine::Fused(_) => Norm::Fused { affine, eps },
            Engine::Candle { .. } => Norm::Candle { affine, eps },
        })
    }

    /// `norm(xs + residual)`.
    pub fn forward_residual(&self, xs: &Tensor, residual: &Tensor) -> Result<Tensor> {
        match self {
            Norm::Fused { affine, eps } => {
                let affine = affine.as_ref().map(|(w, b)| (w, b));
                kernels::norm::add_norm(xs, Some(residual), affine, *eps)
            }
            Norm::Candle { .. } => self.forward(&(xs + residual)?),
        }
    }

    /// `norm(xs)`.
    pub fn forward(&self, xs: &Tensor) -> Result<Tensor> {
        match self {
            Norm::Fused { affine, eps } => {
                kernels::norm::add_norm(xs, None, affine.as_ref().map(|(w, b)| (w, b)), *eps)
            }
            Norm::Candle { affine: Some((weight, bias)), eps } => {
                crate::runtime::ops::layer_norm(xs, weight, bias, *eps)
            }
            Norm::Candle { affine: None, eps } => crate::runtime::ops::rms_norm(xs, *eps),
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
        Ok((xs * mask)?)
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
