//! Opt-in int8 inference: the encoder's linear layers get int8 weights, quantized once per output
//! channel, and their inputs are quantized per row at run time. Embeddings, norms, softmax, the
//! pooler and the task heads stay in f32.

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
}

impl std::str::FromStr for Quantization {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "none" | "f32" => Ok(Quantization::None),
            "int8" => Ok(Quantization::Int8),
            _ => Err(Error::option(
                "quantization",
                format!("unknown quantization `{s}` (choices: none, int8)"),
            )),
        }
    }
}

impl std::fmt::Display for Quantization {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Quantization::None => "none",
            Quantization::Int8 => "int8",
        })
    }
}
