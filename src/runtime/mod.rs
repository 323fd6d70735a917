//! The CPU runtime under the model: `engine` picks once per model between the fused `kernels`
//! and Candle's ops, `ops` holds the Candle-side fallbacks that stay differentiable, and
//! `quantization` the int8 option; `workers` is the thread pool a pipeline runs on.
//!
//! It also holds the building blocks that know nothing of RoFormer, as candle-nn holds them under
//! Candle's models: `activation` (the functions a config names), `rope_scaling` (a config's
//! `rope_scaling` and the frequencies it gives) and `kv_cache` (the keys and values a decoding
//! step reads). `loading/` parses them, `model/` runs them, `generation/` fills the cache.
//! `scores` (softmax, sigmoid, argmax, top-k on logits) serves generation and the pipelines,
//! public as `roformer::scores`.

pub(crate) mod activation;
pub(crate) mod engine;
pub(crate) mod kernels;
pub(crate) mod kv_cache;
pub(crate) mod ops;
pub(crate) mod quantization;
pub(crate) mod rope_scaling;
pub mod scores;
pub(crate) mod workers;
