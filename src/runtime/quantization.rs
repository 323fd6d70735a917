//! Opt-in lower precision for the encoder's linear layers on the fused CPU engine:
//! - int8: weights quantized once per output channel, inputs quantized per row at run time;
//! - bf16: weights rounded to bf16 once, inputs rounded to bf16, products summed in f32 (AMX or
//!   AVX-512 BF16 where the CPU has them).
//!
//! Attention's two products follow at the model's precision (`kernels::attention::Products`):
//! bf16 for bf16 models; for int8 ones Q·Kᵀ in int8 where the CPU's int8 products measured the
//! faster and inputs are long, P·V in bf16. Its softmax, the embeddings, norms, the pooler and the
//! task heads stay in f32.

use crate::error::{Error, Result};

/// How a model's encoder computes its linear layers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum Quantization {
    /// f32 throughout (or the load dtype).
    #[default]
    None,
    /// Int8 weights and activations in the encoder's linear layers, on the CPU.
    Int8,
    /// Bf16 weights and inputs in the encoder's linear layers, summed in f32, on the CPU: what
    /// `dtype` BF16 on the CPU loads to.
    Bf16,
}

impl std::str::FromStr for Quantization {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "none" | "f32" => Ok(Quantization::None),
            "int8" => Ok(Quantization::Int8),
            "bf16" => Ok(Quantization::Bf16),
            _ => Err(Error::option(
                "quantization",
                format!("unknown quantization `{s}` (choices: none, int8, bf16)"),
            )),
        }
    }
}

impl std::fmt::Display for Quantization {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Quantization::None => "none",
            Quantization::Int8 => "int8",
            Quantization::Bf16 => "bf16",
        })
    }
}
