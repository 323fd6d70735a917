//! Which code computes a model's forward pass, decided once, in [`Engine::for_weights`], when the
//! model loads:
//! - [`Engine::Fused`]: the fused CPU kernels of `kernels` at one SIMD level, for f32 inference on
//!   the CPU: weights packed (f32, or int8 once quantized), batches packed back to back without
//!   padding, attention blocked with an online softmax;
//! - [`Engine::Candle`]: Candle's tensor ops, for everything else: GPUs, f16 and bf16, and
//!   training, whose weights are variables that autograd follows.
//!
//! The seam is engine-specific forms behind one model type, as text-embeddings-inference picks
//! its flash or plain model once. Each component is built by the engine into the form it
//! computes with (a packed weight or a tensor, the fused or Candle norm), and each forward pass
//! carries the engine's form of the mask (sequence spans, or an additive bias): the blocks read as
//! one chain and nothing after the load asks about the device, the dtype or the CPU again.

use candle_core::{DType, Tensor};

use crate::error::{Error, Result};
use crate::runtime::kernels::{configured_level, Level};

/// The engine of one model.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Engine {
    /// The fused CPU kernels, at this SIMD level.
    Fused(Level),
    /// Candle's ops; `trainable` when the weights are variables (training).
    Candle { trainable: bool },
}

impl Engine {
    /// The engine for a model whose weights are like `sample` (its word embeddings): fused for
    /// fixed f32 weights on the CPU, Candle's otherwise, or Candle's everywhere when
    /// `ROFORMER_ENGINE=candle` (read once) asks for it. `ROFORMER_CPU_LEVEL` lowers the fused
    /// engine's SIMD level (see `kernels::Level`).
    pub fn for_weights(sample: &Tensor) -> Result<Engine> {
        let trainable = sample.is_variable();
        let fits = sample.device().is_cpu() && sample.dtype() == DType::F32 && !trainable;
        if !fits || candle_requested()? {
            return Ok(Engine::Candle { trainable });
        }
        Ok(Engine::Fused(configured_level().map_err(Error::Input)?))
    }

    /// Whether batches go to this engine packed back to back (no padding).
    pub fn packs_batches(self) -> bool {
        matches!(self, Engine::Fused(_))
    }

    /// Whether the query, key and value weights may be stacked into one: not while an optimiser
    /// updates them one by one.
    pub fn stacks_projections(self) -> bool {
        !matches!(self, Engine::Candle { trainable: true })
    }
}

/// Whether `ROFORMER_ENGINE` names Candle's engine (`candle`) rather than the default (`fused`).
pub(crate) fn candle_requested() -> Result<bool> {
    use std::sync::OnceLock;
    static CHOICE: OnceLock<std::result::Result<bool, String>> = OnceLock::new();
    CHOICE
        .get_or_init(|| match std::env::var("ROFORMER_ENGINE").as_deref().map(str::trim) {
            Err(_) | Ok("fused") => Ok(false),
            Ok("candle") => Ok(true),
            Ok(other) => Err(format!("ROFORMER_ENGINE={other}: not an engine (choices: fused, candle)")),
        })
        .clone()
        .map_err(Error::Input)
}
