//! The inference core, apart from HTTP (as TEI's `core/`): admission, validation and
//! tokenization, the batching queue and its worker, and the metrics. No HTTP type is used here;
//! errors are [`error::InferError`], which the `http` layer maps to statuses and bodies.

pub mod error;
pub mod inference;
pub mod metrics;
pub mod queue;
pub mod validation;
