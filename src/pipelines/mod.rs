//! What people do with the crate: classify texts and tokens, answer questions, encode sentences,
//! rerank, fill masks, paraphrase. Each pipeline loads
//! model, tokenizer and config together from a folder or a Hub id, and batches its inputs.

mod fill_mask;
mod options;
mod paraphraser;
mod question_answerer;
mod reranker;
mod sentence_encoder;
mod sentence_transformers;
mod text_classifier;
mod token_classifier;

use std::path::Path;
use std::sync::Arc;

pub use fill_mask::{FillMask, MaskCandidate};
pub use options::PipelineOptions;
pub use paraphraser::{Paraphrase, Paraphraser};
pub use question_answerer::{Answer, QuestionAnswerer, QuestionAnswererOptions};
pub use reranker::{Ranked, Reranker};
pub use sentence_encoder::{cosine_similarity, l2_normalize, Pooling, Prompt, SentenceEncoder};
pub use text_classifier::{Classification, TextClassifier};
pub use token_classifier::{AggregationStrategy, Entity, TokenClassifier, TokenClassifierOptions};

use crate::error::{Error, Result};
use crate::loading::checkpoint::{Checkpoint, Load};
use crate::loading::config::Config;
use crate::loading::model_files::ModelFiles;
use crate::loading::tokenizer::{Encoded, Tokenizer, Truncation};
use crate::model::batching::{run_by_length, Batch};
use crate::runtime::quantization::Quantize;

/// Model, tokenizer and config of one checkpoint, with the thread pool its work runs on.
#[derive(Debug)]
struct Pipeline<M> {
    model: M,
    tokenizer: Tokenizer,
    config: Config,
    /// The model folder, on disk or in memory.
    files: ModelFiles,
    options: PipelineOptions,
    /// Inputs are truncated to this many tokens.
    max_length: usize,
    pool: Arc<rayon::ThreadPool>,
}

impl<M> Pipeline<M> {
    /// The same checkpoint, tokenizer and thread pool around another model (sharing weights).
    fn with_model<N>(&self, model: N) -> Pipeline<N> {
        Pipeline {
            model,
            tokenizer: self.tokenizer.clone(),
            config: self.config.clone(),
            files: self.files.clone(),
            options: self.options.clone(),
            max_length: self.max_length,
            pool: self.pool.clone(),
        }
    }
}

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

impl<M: Load + Quantize + Sync> Pipeline<M> {
    /// Loads from a folder or a Hub id, truncating inputs to `max_length` (longest first).
    fn load(model: &Path, options: PipelineOptions) -> Result<Self> {
        Self::check(&options)?;
        let dir = options.hub.resolve(model, options.revision.as_deref())?;
        Self::read(&ModelFiles::from_dir(dir), options)
    }

    /// Loads from a model folder on disk or in memory (no Hub), as [`Pipeline::load`].
    fn from_files(files: &ModelFiles, options: PipelineOptions) -> Result<Self> {
        Self::check(&options)?;
        Self::read(files, options)
    }

    /// Options that would fail only later, refused before anything is read.
    fn check(options: &PipelineOptions) -> Result<()> {
        if options.batch_size == 0 {
            return Err(Error::Input("batch_size must be at least 1".into()));
        }
        if options.threads == Some(0) {
            return Err(Error::Input("threads must be at least 1".into()));
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
        let mut model: M = Checkpoint::from_files(files)?.load(&config, options.dtype, &options.device)?;
        model.quantize(options.quantization)?;
        let threads =
            options.threads.unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .thread_name(|i| format!("roformer-{i}"))
            .build()
            .map_err(|e| Error::Input(format!("cannot start {threads} threads: {e}")))?;
        Ok(Self { model, tokenizer, config, files: files.clone(), options, max_length, pool: Arc::new(pool) })
    }

    /// Runs `forward` on batches of similar length, inside the pipeline's thread pool, and
    /// returns one output per encoding, in input order. `forward` gets the batch and its
    /// encodings, and returns one row each.
    fn run<T: Send>(
        &self,
        encodings: &[Encoded],
        packed: bool,
        forward: impl Fn(&Batch, &[&Encoded]) -> Result<Vec<T>> + Send + Sync,
    ) -> Result<Vec<T>> {
        let encodings: Vec<&Encoded> = encodings.iter().collect();
        let device = &self.options.device;
        self.pool.install(|| {
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
