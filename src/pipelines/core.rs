//! The one generic pipeline every task pipeline wraps: loading (folder, Hub id or memory), the
//! accessors, and batched runs on the pipeline's own thread pool.

use std::path::Path;

use super::options::PipelineOptions;
use crate::error::{Error, Result};
use crate::loading::checkpoint::Checkpoint;
use crate::loading::config::Config;
use crate::loading::model_files::ModelFiles;
use crate::loading::tokenizer::{Encoded, Tokenizer, Truncation};
use crate::model::batching::{run_by_length, Batch};
use crate::model::task::TaskModel;
use crate::runtime::workers::Workers;

/// Model, tokenizer and config of one checkpoint, with the thread pool its work runs on: what
/// every task pipeline ([`crate::TextClassifier`], [`crate::SentenceEncoder`], ...) is built on.
/// Each pipeline has the same accessors, `classifier.config()` or `encoder.tokenizer()`, and
/// `pipeline()` to reach this one.
#[derive(Debug)]
pub struct Pipeline<M> {
    pub(super) model: M,
    pub(super) tokenizer: Tokenizer,
    pub(super) config: Config,
    /// The model folder, on disk or in memory.
    pub(super) files: ModelFiles,
    pub(super) options: PipelineOptions,
    /// Inputs are truncated to this many tokens.
    pub(super) max_length: usize,
    pub(super) workers: Workers,
}

impl<M> Pipeline<M> {
    /// Inputs are truncated to this many tokens, special tokens included.
    pub fn max_length(&self) -> usize {
        self.max_length
    }

    /// The checkpoint's configuration: sizes, labels, problem type.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// The tokenizer, truncating to [`Pipeline::max_length`].
    pub fn tokenizer(&self) -> &Tokenizer {
        &self.tokenizer
    }

    /// The model: the task head, or the bare encoder.
    pub fn model(&self) -> &M {
        &self.model
    }

    /// The local folder the checkpoint was loaded from (a Hub id's cache snapshot), or the name of
    /// an in-memory one.
    pub fn path(&self) -> &Path {
        self.files.root()
    }

    /// The same checkpoint, tokenizer and thread pool around another model (sharing weights).
    pub(super) fn with_model<N>(&self, model: N) -> Pipeline<N> {
        Pipeline {
            model,
            tokenizer: self.tokenizer.clone(),
            config: self.config.clone(),
            files: self.files.clone(),
            options: self.options.clone(),
            max_length: self.max_length,
            workers: self.workers.clone(),
        }
    }
}

/// The accessors every pipeline shares, as inherent methods of the pipeline type `$name`, whose
/// `Pipeline<$model>` is at `self.$field` (a plain method each, rather than a `Deref` to the
/// `Pipeline`, which the API guidelines keep for smart pointers).
macro_rules! shared_accessors {
    ($name:ty, $model:ty, $($field:ident).+) => {
        impl $name {
            /// The generic pipeline under this one, which holds the accessors below.
            pub fn pipeline(&self) -> &$crate::pipelines::core::Pipeline<$model> {
                &self.$($field).+
            }

            /// Inputs are truncated to this many tokens, special tokens included.
            pub fn max_length(&self) -> usize {
                self.pipeline().max_length()
            }

            /// The checkpoint's configuration: sizes, labels, problem type.
            pub fn config(&self) -> &$crate::loading::config::Config {
                self.pipeline().config()
            }

            /// The tokenizer, truncating to `max_length()`.
            pub fn tokenizer(&self) -> &$crate::loading::tokenizer::Tokenizer {
                self.pipeline().tokenizer()
            }

            /// The model: the task head, or the bare encoder.
            pub fn model(&self) -> &$model {
                self.pipeline().model()
            }

            /// The local folder the checkpoint was loaded from (a Hub id's cache snapshot), or the
            /// name of an in-memory one.
            pub fn path(&self) -> &std::path::Path {
                self.pipeline().path()
            }
        }
    };
}
pub(super) use shared_accessors;

/// A token id past the embedding table would fail only at inference, on the first text that uses
/// it, with an index error naming no file: refuse it at load.
fn check_vocab_size(tokenizer: &Tokenizer, config: &Config, files: &ModelFiles) -> Result<()> {
    let tokens = tokenizer.vocab_size();
    if tokens <= config.vocab_size {
        return Ok(());
    }
    let vocab = if files.contains("vocab.txt") { "vocab.txt" } else { "tokenizer.json" };
    Err(Error::Vocab {
        path: files.path(vocab),
        line: None,
        message: format!(
            "the vocabulary has {tokens} tokens, but config.json's vocab_size is {}: ids past {} have no embedding",
            config.vocab_size,
            config.vocab_size - 1
        ),
    })
}

impl<M: TaskModel + Sync> Pipeline<M> {
    /// Loads from a folder or a Hub id, truncating inputs to `max_length` (longest first).
    pub(super) fn load(model: &Path, options: PipelineOptions) -> Result<Self> {
        Self::check(&options)?;
        let dir = options.hub.resolve(model, options.revision.as_deref())?;
        Self::read(&ModelFiles::from_dir(dir), options)
    }

    /// Loads from a model folder on disk or in memory (no Hub), as [`Pipeline::load`].
    pub(super) fn from_files(files: &ModelFiles, options: PipelineOptions) -> Result<Self> {
        Self::check(&options)?;
        Self::read(files, options)
    }

    /// Options that would fail only later, refused before anything is read.
    fn check(options: &PipelineOptions) -> Result<()> {
        if options.batch_size == 0 {
            return Err(Error::at_least_one("batch_size"));
        }
        if options.threads == Some(0) {
            return Err(Error::at_least_one("threads"));
        }
        Ok(())
    }

    fn read(files: &ModelFiles, options: PipelineOptions) -> Result<Self> {
        let mut config = Config::from_files(files)?;
        if let Some(scaling) = &options.rope_scaling {
            config.set_rope_scaling(Some(scaling.clone()));
        }
        let mut tokenizer = Tokenizer::from_files(files)?;
        check_vocab_size(&tokenizer, &config, files)?;
        let max_length = options.max_length.or(tokenizer.model_max_length()).unwrap_or(512);
        tokenizer.set_truncation(Some(Truncation::LongestFirst), Some(max_length))?;
        let (dtype, precision) = options.load_precision()?;
        config.quantization = precision;
        let model: M = Checkpoint::from_files(files)?.load(&config, dtype, &options.device)?;
        let workers = Workers::new(options.threads)?;
        // The weights are in the model now: an in-memory folder's copy of them is let go.
        Ok(Self { model, tokenizer, config, files: files.without_weights(), options, max_length, workers })
    }

    /// Runs `forward` on batches of similar length, inside the pipeline's thread pool, and
    /// returns one output per encoding, in input order. `forward` gets the batch and its
    /// encodings, and returns one row each. Batches are packed (no padding) when the model's
    /// engine, decided once at load, takes them so.
    pub(super) fn run<T: Send>(
        &self,
        encodings: &[Encoded],
        forward: impl Fn(&Batch, &[&Encoded]) -> Result<Vec<T>> + Send + Sync,
    ) -> Result<Vec<T>> {
        let encodings: Vec<&Encoded> = encodings.iter().collect();
        let device = &self.options.device;
        let packed = self.model.roformer().packs_batches();
        self.workers.install(|| {
            run_by_length(
                &encodings,
                self.options.batch_size,
                self.tokenizer.pad_id(),
                device,
                packed,
                &forward,
            )
        })
    }
}
