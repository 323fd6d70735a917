//! RoFormer (Su et al. 2021, "Enhanced Transformer with Rotary Position Embedding") for Candle.
//!
//! Three lines classify text, with the SST-2 model built into the crate (feature `bundled-sst2`,
//! on by default), a folder, or a Hugging Face Hub id:
//!
//! ```no_run
//! # fn main() -> roformer::Result<()> {
//! let classifier = roformer::TextClassifier::bundled()?; // or ::from_pretrained("folder or Hub id")
//! let predictions = classifier.classify(&["a gorgeous , witty movie .", "not good at all"])?;
//! println!("{} {:.3}", predictions[0].label, predictions[0].score);
//! # Ok(())
//! # }
//! ```
//!
//! A map of the crate:
//! - pipelines, for most users: [`TextClassifier`], [`TokenClassifier`] (entities, with
//!   [`TokenClassifierOptions`]), [`QuestionAnswerer`] (answer spans, with
//!   [`QuestionAnswererOptions`]), [`SentenceEncoder`] (sentence-transformers folders included:
//!   modules, prompts, Matryoshka), [`SparseEncoder`] (SPLADE on a masked-LM checkpoint),
//!   [`Reranker`] (cross-encoders), [`FillMask`], [`Paraphraser`]
//!   (the sim checkpoints' similar sentences), set up with [`PipelineOptions`] (device, dtype,
//!   batching, pooling, prompts, [`HubOptions`]);
//! - models, for Candle users: [`RoFormerModel`] and every task head, built from a [`Config`]
//!   and a `VarBuilder`, or loaded with [`load_dir`] / [`Checkpoint`] (safetensors, shards,
//!   `pytorch_model.bin`), run on [`Inputs`]; [`RoFormerForCausalLM::generate`] with
//!   [`GenerationOptions`];
//! - [`Tokenizer`]: the ids transformers gives, jieba included for the word-level Chinese vocab;
//! - [`training`]: fine-tuning a sequence classifier on Candle's autograd;
//! - [`Error`] / [`Result`]: every failure names the file, tensor, field or line at fault.
//!
//! Inside, one folder per layer:
//! - `pipelines/`: one file per task, over the shared `Pipeline` of `pipelines/core.rs` (load,
//!   tokenize, batch, run);
//! - `generation/`: `causal_lm` ([`RoFormerForCausalLM`], [`GenerationMode`]), `generate` and its
//!   sampling in `mod.rs`, filling the runtime's `kv_cache`;
//! - `model/`: the network, one small type per component: `embeddings`, `attention` (with
//!   `rotary`), `encoder`, `roformer` ([`RoFormerModel`], the pooler) and the task `heads`, built
//!   from `layers`; `task` ([`TaskModel`], with [`Checkpoint::load`] and [`load_dir`]); `batching`
//!   packs tokenized texts and `pass` carries the engine's mask through a forward pass;
//! - `loading/`: `config`, `checkpoint` (the weights), `safetensors_file` (a weight file read
//!   tensor by tensor, never mapped), `layout` (weight-file names, the shard index, the names a
//!   folder may hold), `json`, `model_files` (a folder on disk or in memory, whose files may be
//!   [`FileBytes`] held elsewhere and read in ranges, [`RangedBytes`]),
//!   `remote` (a folder fetched file by file, as a browser does), `hub/` (`options`, the `cache`
//!   layout, `http`) and `tokenizer/` (the encode API, `folder` load and save, `jieba`, `wordpiece`);
//! - `runtime/`: `engine` decides once per model whether the fused CPU `kernels/` (one GEMM
//!   driver, a microkernel per SIMD level and precision, AMX's tile program) or Candle's `ops`
//!   compute it; `quantization` is the int8 option; `workers` the thread pool a pipeline runs on;
//!   and what knows nothing of RoFormer: [`Activation`], [`RopeScaling`], the `kv_cache`, and
//!   [`scores`] (softmax, sigmoid, argmax, top-k);
//! - `training` and `error` stay at the top.
//!
//! The guides are pages in the repository's `docs/` folder, one topic each (`docs/README.md` lists
//! them), and stay out of the published package; their Rust code compiles as doctests:
//! - `docs/pipelines.md`: every pipeline, sentence-transformers folders, entities and answers;
//! - `docs/generation.md`: RoFormer-Sim similar sentences ([`RoFormerForCausalLM::generate`],
//!   [`Paraphraser`]);
//! - `docs/checkpoints.md` and `docs/model.md`: the checkpoint families that load, and the models
//!   for Candle users;
//! - `docs/hub.md`: the Hub cache shared with Python, [`HubOptions`], the Hub client;
//! - `docs/errors.md`: what bad input gets;
//! - `docs/long-inputs.md`: long inputs and RoPE scaling;
//! - `docs/fine-tuning.md`: [`training::Trainer`];
//! - `docs/serving.md` (with `serving-reference.md`, `serving-deploy.md`, `serving-limits.md`) and
//!   `docs/browser.md`: the HTTP server and the WebAssembly build;
//! - `docs/features.md`: the built-in model, CUDA and Metal;
//! - `docs/testing.md`, `docs/speed.md`: tests and fixtures; which precision on which CPU, and the
//!   benchmarks (`docs/log/`: the measurements behind them);
//! - `docs/upgrading.md`: moving code from an earlier checkout.

#![warn(missing_docs)]
// docs.rs marks the items that need a feature (`bundled-sst2`), from package.metadata.docs.rs.
#![cfg_attr(docsrs, feature(doc_cfg))]
#![deny(unsafe_op_in_unsafe_fn)]

mod error;
mod generation;
mod loading;
mod model;
mod pipelines;
mod runtime;
pub mod training;

pub use error::{BoxError, Error, HubErrorKind, Result};
pub use generation::causal_lm::{GenerationMode, RoFormerForCausalLM};
pub use generation::{GenerationOptions, Sampling};
pub use loading::checkpoint::Checkpoint;
pub use loading::config::{Config, NormType, ProblemType, SummaryType};
pub use loading::hub::options::{DownloadProgress, HubOptions};
pub use loading::model_files::{FileBytes, ModelFiles, RangedBytes};
pub use loading::tokenizer::{Encoded, Padding, Tokenizer, TokenizerKind, Truncation};
pub use model::heads::{
    RoFormerForMaskedLM, RoFormerForMultipleChoice, RoFormerForQuestionAnswering,
    RoFormerForSequenceClassification, RoFormerForTokenClassification,
};
pub use model::roformer::{Inputs, Pooler, RoFormerModel};
pub use model::task::{load_dir, TaskModel};
pub use pipelines::{
    cosine_similarity, l2_normalize, AggregationStrategy, Answer, Classification, Entity, FillMask,
    MaskCandidate, Paraphrase, Paraphraser, Pipeline, PipelineOptions, Pooling, Prompt, QuestionAnswerer,
    QuestionAnswererOptions, Ranked, Reranker, SentenceEncoder, SparseEmbedding, SparseEncoder,
    TextClassifier, TokenClassifier, TokenClassifierOptions,
};
pub use runtime::activation::Activation;
pub use runtime::quantization::Quantization;
pub use runtime::rope_scaling::{RopeScaling, Yarn};
pub use runtime::scores;

/// Timing probes of the fused kernels for `benches/kernels.rs`; not part of the API.
#[doc(hidden)]
pub use runtime::kernels::probe as kernel_probe;

/// The README's code blocks, compiled (and, unless marked `no_run`, run) as doctests.
#[cfg(all(doctest, feature = "bundled-sst2"))]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;

// The docs/ pages' code blocks, compiled as doctests as the README's are. Only a doctest build reads
// them: the published package carries no docs/ (scripts/checks/check_packages.sh holds the line).

/// docs/pipelines.md's code blocks as doctests.
#[cfg(doctest)]
#[doc = include_str!("../docs/pipelines.md")]
struct PipelinesDoctests;

/// docs/generation.md's code blocks as doctests.
#[cfg(doctest)]
#[doc = include_str!("../docs/generation.md")]
struct GenerationDoctests;

/// docs/hub.md's code blocks as doctests.
#[cfg(doctest)]
#[doc = include_str!("../docs/hub.md")]
struct HubDoctests;

/// docs/model.md's code blocks as doctests.
#[cfg(doctest)]
#[doc = include_str!("../docs/model.md")]
struct ModelDoctests;
