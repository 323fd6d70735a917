//! RoFormer (Su et al. 2021, "Enhanced Transformer with Rotary Position Embedding") for Candle.
//!
//! A map of the crate:
//! - [`config`]: `config.json` with transformers' defaults and junnyu's extra keys;
//! - [`rotary`]: the rotary position embedding and its cached sin/cos tables;
//! - [`embeddings`], [`attention`], [`encoder`], [`model`]: the encoder, component by component;
//! - [`heads`]: every task head transformers has for RoFormer;
//! - [`loading`]: checkpoint folders (safetensors, sharded safetensors, `pytorch_model.bin`).
//!
//! ```no_run
//! use candle_core::{DType, Device, Tensor};
//! use roformer::{Inputs, RoFormerForSequenceClassification};
//!
//! # fn main() -> roformer::Result<()> {
//! let device = Device::Cpu;
//! let model: RoFormerForSequenceClassification = roformer::load_dir("path/to/checkpoint", DType::F32, &device)?;
//! let input_ids = Tensor::new(&[[101u32, 2769, 4263, 102]], &device)?;
//! let logits = model.forward(Inputs::new(&input_ids))?;
//! println!("{logits}");
//! # Ok(())
//! # }
//! ```

pub mod activation;
pub mod attention;
pub mod config;
pub mod embeddings;
pub mod encoder;
pub mod error;
pub mod glue;
pub mod heads;
pub mod hub;
pub mod loading;
pub mod model;
pub mod nn;
pub mod ops;
pub mod pipelines;
pub mod rotary;
pub mod tokenizer;
pub mod training;

pub use activation::Activation;
pub use config::{Config, NormType, ProblemType};
pub use error::{Error, Result};
pub use heads::{
    RoFormerForMaskedLM, RoFormerForMultipleChoice, RoFormerForQuestionAnswering,
    RoFormerForSequenceClassification, RoFormerForTokenClassification,
};
pub use loading::{load_dir, Checkpoint, Load};
pub use model::{Inputs, RoFormerModel};
pub use rotary::RotaryEmbedding;
pub use tokenizer::{Encoded, Padding, Tokenizer, TokenizerKind, Truncation};
