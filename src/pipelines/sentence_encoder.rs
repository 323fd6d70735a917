//! Sentence embeddings, in the spirit of sentence-transformers' `encode`.

use std::path::Path;

use candle_core::DType;

use super::{Pipeline, PipelineOptions, TextClassifier};
use crate::config::Config;
use crate::error::{Error, Result};
use crate::model::RoFormerModel;
use crate::tokenizer::{Encoded, Tokenizer};

/// How a sentence encoder turns token states into one vector.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pooling {
    /// The `[CLS]` token's last hidden state.
    Cls,
    /// The mean of the last hidden states of real (unpadded) tokens.
    Mean,
    /// junnyu's pooler (`roformer.pooler.dense`) on `[CLS]`, as the sim checkpoints use.
    Pooler,
}

impl std::str::FromStr for Pooling {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "cls" => Ok(Pooling::Cls),
            "mean" => Ok(Pooling::Mean),
            "pooler" => Ok(Pooling::Pooler),
            _ => Err(Error::Input(format!("unknown pooling `{s}` (cls, mean or pooler)"))),
        }
    }
}

/// Sentence embeddings from any RoFormer checkpoint: a bare encoder, or a task model through
/// its encoder.
///
/// The checkpoint decides the defaults: one with junnyu's pooler (the sim checkpoints) is
/// encoded as its authors do, pooler on `[CLS]` with a linear activation, bidirectional attention,
/// L2-normalised; any other is mean-pooled over real tokens and L2-normalised.
/// [`PipelineOptions::with_pooling`] and [`PipelineOptions::with_normalize`] override them.
///
/// ```no_run
/// # fn main() -> roformer::Result<()> {
/// use roformer::{cosine_similarity, PipelineOptions, SentenceEncoder};
/// let options = PipelineOptions::default().with_revision("refs/pr/1");
/// let encoder = SentenceEncoder::from_pretrained_with("junnyu/roformer_chinese_sim_char_base", options)?;
/// let e = encoder.encode(&["今天天气不错", "今天天气很好"])?;
/// println!("{}", cosine_similarity(&e[0], &e[1]));
/// # Ok(())
/// # }
/// ```
#[derive(Debug)]
pub struct SentenceEncoder {
    pipeline: Pipeline<RoFormerModel>,
    pooling: Pooling,
    normalize: bool,
}

impl SentenceEncoder {
    /// Loads any RoFormer checkpoint from a folder or a Hub id, with default options.
    pub fn from_pretrained(model: impl AsRef<Path>) -> Result<Self> {
        Self::from_pretrained_with(model, PipelineOptions::default())
    }

    /// Loads any RoFormer checkpoint from a folder or a Hub id.
    pub fn from_pretrained_with(model: impl AsRef<Path>, options: PipelineOptions) -> Result<Self> {
        Self::around(Pipeline::load(model.as_ref(), options)?)
    }

    /// The encoder under a classifier, sharing its weights, tokenizer and threads: embeddings of
    /// a classification checkpoint without loading it twice.
    pub fn from_classifier(classifier: &TextClassifier) -> Result<Self> {
        Self::around(classifier.pipeline.with_model(classifier.model().roformer().clone()))
    }

    pub(super) fn around(pipeline: Pipeline<RoFormerModel>) -> Result<Self> {
        let has_pooler = pipeline.model.pooler().is_some();
        let pooling =
            pipeline.options.pooling.unwrap_or(if has_pooler { Pooling::Pooler } else { Pooling::Mean });
        if pooling == Pooling::Pooler && !has_pooler {
            return Err(Error::Input(format!(
                "pooling `pooler` needs `roformer.pooler.dense` weights, which {} lacks",
                pipeline.dir.display()
            )));
        }
        let normalize = pipeline.options.normalize.unwrap_or(true);
        Ok(Self { pipeline, pooling, normalize })
    }

    /// One embedding per text, in input order; an empty slice gives an empty result.
    pub fn encode<S: AsRef<str>>(&self, texts: &[S]) -> Result<Vec<Vec<f32>>> {
        let encodings = self.pipeline.tokenizer.encode_batch(texts)?;
        self.encode_tokenized(&encodings)
    }

    /// One embedding per encoding from [`SentenceEncoder::tokenizer`], in input order.
    pub fn encode_tokenized(&self, encodings: &[Encoded]) -> Result<Vec<Vec<f32>>> {
        let pipeline = &self.pipeline;
        let packed = pipeline.model.packs_batches();
        pipeline.run(encodings, packed, |batch, _| {
            let hidden = pipeline.model.run(batch, false, None, None)?;
            let pooled = match self.pooling {
                Pooling::Cls => batch.first_tokens(&hidden)?,
                Pooling::Mean => batch.mean(&hidden)?,
                Pooling::Pooler => match pipeline.model.pooler() {
                    Some(pooler) => pooler.pool(&batch.first_tokens(&hidden)?)?,
                    None => return Err(Error::Input("the checkpoint has no pooler".into())),
                },
            };
            let pooled = pooled.to_dtype(DType::F32)?;
            let pooled = if self.normalize {
                let norm = pooled.sqr()?.sum_keepdim(1)?.sqrt()?.clamp(1e-12, f64::INFINITY)?;
                pooled.broadcast_div(&norm)?
            } else {
                pooled
            };
            Ok(pooled.to_vec2::<f32>()?)
        })
    }

    /// The pooling in use.
    pub fn pooling(&self) -> Pooling {
        self.pooling
    }

    /// Whether embeddings are scaled to unit length.
    pub fn normalize(&self) -> bool {
        self.normalize
    }

    /// Inputs are truncated to this many tokens, special tokens included.
    pub fn max_length(&self) -> usize {
        self.pipeline.max_length
    }

    /// The length of each embedding.
    pub fn dim(&self) -> usize {
        self.pipeline.config.hidden_size
    }

    /// The checkpoint's configuration.
    pub fn config(&self) -> &Config {
        &self.pipeline.config
    }

    /// The tokenizer, truncating to the pipeline's max_length.
    pub fn tokenizer(&self) -> &Tokenizer {
        &self.pipeline.tokenizer
    }

    /// The encoder.
    pub fn model(&self) -> &RoFormerModel {
        &self.pipeline.model
    }

    /// The local folder the checkpoint was loaded from (a Hub id's cache snapshot).
    pub fn path(&self) -> &Path {
        &self.pipeline.dir
    }
}

/// Cosine similarity of two vectors (0 when either is all zeros).
pub fn cosine_similarity(a: &[f32], b: &[f32]) -> f32 {
    let dot: f32 = a.iter().zip(b).map(|(x, y)| x * y).sum();
    let norm = |v: &[f32]| v.iter().map(|x| x * x).sum::<f32>().sqrt();
    let denom = norm(a) * norm(b);
    if denom == 0.0 {
        0.0
    } else {
        dot / denom
    }
}
