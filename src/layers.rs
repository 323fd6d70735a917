//! The parametrised building blocks every component uses, with transformers' initialisation
//! (normal(0, initializer_range) weights, zero biases, unit norms) for models built from scratch.

use std::sync::{Arc, Mutex};

use candle_core::{Module, Result, Tensor};
use candle_nn::{Init, VarBuilder};

use crate::activation::Activation;
use crate::config::{Config, NormType};
use crate::kernels;
use crate::kernels::int8::PackedI8;
use crate::kernels::packed::PackedF32;

/// A dense layer `x Wᵀ + b`.
#[derive(Debug, Clone)]
pub(crate) struct Linear {
    weight: Weight,
    bias: Option<Tensor>,
}

/// The weight of a linear layer: a tensor, or, for fixed f32 weights on an AVX-512 CPU, packed
/// for the fused kernel (the tensor is then dropped, so memory does not double).
#[derive(Debug, Clone)]
enum Weight {
    Dense(Tensor),
    Packed(Arc<PackedF32>),
    Int8(Arc<PackedI8>),
}

impl Linear {
    /// Loads `weight` (out, in) and `bias`, packed for the CPU kernel where it applies.
    pub fn load(vb: VarBuilder, in_dim: usize, out_dim: usize, bias: bool, config: &Config) -> Result<Self> {
        Self::load_dense(vb, in_dim, out_dim, bias, config)?.packed()
    }

    /// Loads the layer with its weight as a tensor, to be combined with others before packing.
    pub fn load_dense(
        vb: VarBuilder,
        in_dim: usize,
        out_dim: usize,
        bias: bool,
        config: &Config,
    ) -> Result<Self> {
        let init = Init::Randn { mean: 0.0, stdev: config.initializer_range };
        let weight = vb.get_with_hints((out_dim, in_dim), "weight", init)?;
        let bias = if bias { Some(vb.get_with_hints(out_dim, "bias", Init::Const(0.0))?) } else { None };
        Ok(Self { weight: Weight::Dense(weight), bias })
    }

    /// A layer over existing weights, kept as tensors (the tied masked-LM decoder shares the word
    /// embeddings this way).
    pub fn from_weights(weight: Tensor, bias: Option<Tensor>) -> Self {
        Self { weight: Weight::Dense(weight), bias }
    }

    /// Whether the weight is a variable that an optimiser updates.
    pub fn is_trainable(&self) -> bool {
        matches!(&self.weight, Weight::Dense(w) if w.is_variable())
    }

    /// One layer computing the outputs of several side by side (their weights stacked), packed.
    pub fn concat(parts: &[&Linear]) -> Result<Self> {
        let weights = parts
            .iter()
            .map(|l| match &l.weight {
                Weight::Dense(w) => Ok(w),
                Weight::Packed(_) | Weight::Int8(_) => candle_core::bail!("cannot stack packed weights"),
            })
            .collect::<Result<Vec<&Tensor>>>()?;
        let weight = Tensor::cat(&weights, 0)?;
        let bias = if parts.iter().all(|l| l.bias.is_some()) {
            let biases: Vec<&Tensor> = parts.iter().filter_map(|l| l.bias.as_ref()).collect();
            Some(Tensor::cat(&biases, 0)?)
        } else {
            None
        };
        Self { weight: Weight::Dense(weight), bias }.packed()
    }

    /// The layer with its weight packed, when the weight is fixed f32 on an AVX-512 CPU.
    fn packed(self) -> Result<Self> {
        let Weight::Dense(weight) = &self.weight else { return Ok(self) };
        if !kernels::fits(weight) || weight.is_variable() {
            return Ok(self);
        }
        let (n, k) = weight.dims2()?;
        let packed = PackedF32::new(kernels::View::new(&weight.contiguous()?)?.slice(), n, k);
        Ok(match packed {
            Some(packed) => Self { weight: Weight::Packed(Arc::new(packed)), bias: self.bias },
            None => self,
        })
    }

    /// Quantizes the weight to int8 (per output channel), for the int8 kernel.
    pub fn quantize(&mut self) -> crate::Result<()> {
        let (values, n, k) = match &self.weight {
            Weight::Int8(_) => return Ok(()),
            Weight::Packed(packed) => {
                self.weight = Weight::Int8(Arc::new(PackedI8::from_f32(packed)));
                return Ok(());
            }
            Weight::Dense(weight) if weight.is_variable() => {
                return Err(crate::Error::Input("a model loaded for training cannot be quantized".into()))
            }
            Weight::Dense(weight) => {
                if !weight.device().is_cpu() {
                    return Err(crate::Error::Input(format!(
                        "int8 runs on the CPU only, and this model is on {:?}: load it on the CPU or leave quantization off",
                        weight.device().location()
                    )));
                }
                if weight.dtype() != candle_core::DType::F32 {
                    return Err(crate::Error::Input(format!(
                        "int8 is quantized from f32 weights, and this model was loaded in {:?}",
                        weight.dtype()
                    )));
                }
                let (n, k) = weight.dims2()?;
                (weight.flatten_all()?.to_vec1::<f32>()?, n, k)
            }
        };
        self.weight = Weight::Int8(Arc::new(PackedI8::new(&values, n, k)));
        Ok(())
    }

    /// `activation(x Wᵀ + b)`, fused into one kernel on the CPU in f32.
    pub fn forward_act(&self, xs: &Tensor, activation: Activation) -> Result<Tensor> {
        match &self.weight {
            Weight::Packed(packed) => {
                kernels::linear::linear_packed(xs, packed.as_ref(), self.bias.as_ref(), activation)
            }
            Weight::Int8(packed) => {
                kernels::linear::linear_packed(xs, packed.as_ref(), self.bias.as_ref(), activation)
            }
            Weight::Dense(weight) if kernels::fits(xs) && kernels::fits(weight) => {
                kernels::linear::linear(xs, weight, self.bias.as_ref(), activation)
            }
            Weight::Dense(weight) => activation.forward(&self.dense(xs, weight)?),
        }
    }

    /// Candle's matmul, for half precision, GPUs and training.
    fn dense(&self, xs: &Tensor, weight: &Tensor) -> Result<Tensor> {
        // Flattening to 2-D keeps the weight out of batched matmul, whose CPU kernel in
        // candle-core 0.11.1 mishandles some transposed/broadcast operand pairs.
        let dims = xs.dims().to_vec();
        let in_dim = *dims.last().unwrap_or(&0);
        let rows = xs.elem_count() / in_dim.max(1);
        let ys = xs.contiguous()?.reshape((rows, in_dim))?.matmul(&weight.t()?)?;
        let ys = match &self.bias {
            Some(b) => ys.broadcast_add(b)?,
            None => ys,
        };
        let mut out_dims = dims;
        if let Some(last) = out_dims.last_mut() {
            *last = weight.dim(0)?;
        }
        ys.reshape(out_dims)
    }
}

impl Module for Linear {
    fn forward(&self, xs: &Tensor) -> Result<Tensor> {
        self.forward_act(xs, Activation::Linear)
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

impl Norm {
    /// `norm(xs + residual)`, in one pass on the CPU in f32.
    pub fn forward_residual(&self, xs: &Tensor, residual: &Tensor) -> Result<Tensor> {
        if self.fused(xs) && kernels::fits(residual) {
            return kernels::norm::add_norm(xs, Some(residual), self.affine(), self.eps());
        }
        self.forward(&(xs + residual)?)
    }

    fn fused(&self, xs: &Tensor) -> bool {
        kernels::fits(xs) && self.affine().is_none_or(|(w, b)| kernels::fits(w) && kernels::fits(b))
    }

    fn affine(&self) -> Option<(&Tensor, &Tensor)> {
        match self {
            Norm::Layer { weight, bias, .. } => Some((weight, bias)),
            Norm::Rms { .. } => None,
        }
    }

    fn eps(&self) -> f64 {
        match self {
            Norm::Layer { eps, .. } | Norm::Rms { eps } => *eps,
        }
    }
}

impl Module for Norm {
    fn forward(&self, xs: &Tensor) -> Result<Tensor> {
        if self.fused(xs) {
            return kernels::norm::add_norm(xs, None, self.affine(), self.eps());
        }
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
