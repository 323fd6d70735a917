//! Activation functions named as in transformers' `ACT2FN`.

use candle_core::{DType, Tensor};

use crate::error::Result;
use crate::runtime::kernels::math;

/// An activation function, by its transformers name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(try_from = "String", into = "String")]
pub enum Activation {
    /// `gelu`: the exact (erf) GELU.
    Gelu,
    /// `gelu_new`: the tanh approximation.
    GeluNew,
    /// `gelu_pytorch_tanh`: the same tanh approximation under PyTorch's name.
    GeluPytorchTanh,
    /// `relu`.
    Relu,
    /// `silu`: x · sigmoid(x).
    Silu,
    /// `swish`: SiLU under its other name.
    Swish,
    /// `tanh`.
    Tanh,
    /// `linear`: the identity.
    Linear,
}

impl Activation {
    const NAMES: [(&'static str, Activation); 8] = [
        ("gelu", Activation::Gelu),
        ("gelu_new", Activation::GeluNew),
        ("gelu_pytorch_tanh", Activation::GeluPytorchTanh),
        ("relu", Activation::Relu),
        ("silu", Activation::Silu),
        ("swish", Activation::Swish),
        ("tanh", Activation::Tanh),
        ("linear", Activation::Linear),
    ];

    /// The transformers name.
    pub fn name(self) -> &'static str {
        Self::NAMES.iter().find(|(_, a)| *a == self).map(|(n, _)| *n).unwrap_or("gelu")
    }

    /// Applies the activation elementwise.
    pub fn forward(self, xs: &Tensor) -> Result<Tensor> {
        match self {
            Activation::Gelu => gelu_erf(xs),
            Activation::GeluNew | Activation::GeluPytorchTanh => Ok(xs.gelu()?),
            Activation::Relu => Ok(xs.relu()?),
            Activation::Silu | Activation::Swish => Ok(xs.silu()?),
            Activation::Tanh => Ok(xs.tanh()?),
            Activation::Linear => Ok(xs.clone()),
        }
    }
}

impl std::str::FromStr for Activation {
    type Err = String;

    fn from_str(s: &str) -> std::result::Result<Self, String> {
        Self::NAMES.iter().find(|(n, _)| *n == s).map(|(_, a)| *a).ok_or_else(|| {
            let known: Vec<&str> = Self::NAMES.iter().map(|(n, _)| *n).collect();
            format!("unknown activation `{s}` (supported: {})", known.join(", "))
        })
    }
}

impl TryFrom<String> for Activation {
    type Error = String;
    fn try_from(s: String) -> std::result::Result<Self, String> {
        s.parse()
    }
}

impl From<Activation> for String {
    fn from(a: Activation) -> String {
        a.name().to_string()
    }
}

impl candle_core::Module for Activation {
    fn forward(&self, xs: &Tensor) -> candle_core::Result<Tensor> {
        Activation::forward(*self, xs).map_err(crate::error::Error::into_candle)
    }
}

/// The exact (erf) GELU. Candle's CPU kernel computes erf with scalar libm code, which took a
/// third of a forward pass on small models; f32 inference on the CPU uses a branch-free rational
/// approximation instead (Eigen's, as vectorised by PyTorch: within 1e-6 of erf).
fn gelu_erf(xs: &Tensor) -> Result<Tensor> {
    if xs.track_op() || xs.dtype() != DType::F32 || !xs.device().is_cpu() {
        return Ok(xs.gelu_erf()?);
    }
    Ok(xs.contiguous()?.apply_op1_no_bwd(&FastGeluErf)?)
}

struct FastGeluErf;

impl candle_core::CustomOp1 for FastGeluErf {
    fn name(&self) -> &'static str {
        "fast-gelu-erf"
    }

    fn cpu_fwd(
        &self,
        storage: &candle_core::CpuStorage,
        layout: &candle_core::Layout,
    ) -> candle_core::Result<(candle_core::CpuStorage, candle_core::Shape)> {
        let candle_core::CpuStorage::F32(data) = storage else {
            candle_core::bail!("fast-gelu-erf takes f32")
        };
        let Some((start, end)) = layout.contiguous_offsets() else {
            candle_core::bail!("fast-gelu-erf takes a contiguous tensor")
        };
        let mut out = data[start..end].to_vec();
        math::gelu_in_place(&mut out);
        Ok((candle_core::CpuStorage::F32(out), layout.shape().clone()))
    }
}
