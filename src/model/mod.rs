//! The RoFormer network, one small type per component: `embeddings`, `attention` (with `rotary`,
//! over the runtime's `rope_scaling`), `encoder`, the bare model (`roformer`) and the task `heads`,
//! built from `layers` and the runtime's `activation`. `batching` packs tokenized texts into a
//! model's input and `pass` carries one forward pass's mask and caches through the blocks. `task`
//! is what they all are to the loaders and pipelines.

pub(crate) mod attention;
pub(crate) mod batching;
pub(crate) mod embeddings;
pub(crate) mod encoder;
pub(crate) mod heads;
pub(crate) mod layers;
pub(crate) mod pass;
pub(crate) mod roformer;
pub(crate) mod rotary;
pub(crate) mod task;
