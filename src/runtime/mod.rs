//! The CPU runtime under the model: `engine` picks once per model between the fused `kernels`
//! and Candle's ops, `ops` holds the Candle-side fallbacks that stay differentiable, and
//! `quantization` the int8 option; `workers` is the thread pool a pipeline runs on.

pub(crate) mod engine;
pub(crate) mod kernels;
pub(crate) mod ops;
pub(crate) mod quantization;
pub(crate) mod workers;
