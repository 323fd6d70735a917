//! Sparse embeddings (SPLADE) from a masked-LM checkpoint, as sentence-transformers'
//! `SparseEncoder` (MLMTransformer, then SpladePooling) and text-embeddings-inference's
//! `--pooling splade` compute them.

use std::path::Path;

use candle_core::DType;

use super::core::{shared_accessors, Pipeline};
use super::options::PipelineOptions;
use super::sentence_transformers::SparseFolder;
use super::splade_pooling::SpladePooling;
use crate::error::Result;
use crate::loading::model_files::ModelFiles;
use crate::loading::tokenizer::Encoded;
use crate::model::heads::RoFormerForMaskedLM;

/// One text's sparse embedding: the vocabulary entries that are not zero, by increasing index.
#[derive(Debug, Clone, PartialEq, Default)]
#[non_exhaustive]
pub struct SparseEmbedding {
    /// Vocabulary ids, increasing.
    pub indices: Vec<u32>,
    /// The value of each, above zero.
    pub values: Vec<f32>,
}

impl SparseEmbedding {
    /// The embedding as a dense vector of `dim` values (the vocabulary size).
    pub fn to_dense(&self, dim: usize) -> Vec<f32> {
        let mut dense = vec![0.0; dim];
        for (&i, &v) in self.indices.iter().zip(&self.values) {
            if let Some(slot) = dense.get_mut(i as usize) {
                *slot = v;
            }
        }
        dense
    }

    /// The entries of `dense` above zero.
    fn from_dense(dense: &[f32]) -> Self {
        let (mut indices, mut values) = (Vec::new(), Vec::new());
        for (i, &v) in dense.iter().enumerate() {
            if v > 0.0 {
                indices.push(i as u32);
                values.push(v);
            }
        }
        Self { indices, values }
    }
}

/// SPLADE embeddings: for each vocabulary entry, the largest `log(1 + relu(logit))` over a text's
/// tokens (special tokens included), from the checkpoint's masked-LM head.
///
/// A sentence-transformers SparseEncoder folder (`modules.json` with a Transformer and
/// SpladePooling) is encoded as its modules say: the Transformer's `max_seq_length` and
/// `do_lower_case`, and SpladePooling's `pooling_strategy` (`max`, or `sum` over the tokens) and
/// `activation_function` (`relu`, or `log1p_relu`, which takes `log(1 + ...)` twice). Other
/// modules, or a default prompt that is not empty, are errors.
///
/// ```no_run
/// # fn main() -> roformer::Result<()> {
/// let encoder = roformer::SparseEncoder::from_pretrained("path/to/masked-lm-checkpoint")?;
/// let sparse = encoder.encode(&["a great film"])?;
/// for (id, value) in sparse[0].indices.iter().zip(&sparse[0].values) {
///     println!("{} {value:.3}", encoder.tokenizer().id_to_token(*id).unwrap_or_default());
/// }
/// # Ok(())
/// # }
/// ```
#[derive(Debug)]
pub struct SparseEncoder {
    pipeline: Pipeline<RoFormerForMaskedLM>,
    pooling: SpladePooling,
}

impl SparseEncoder {
    /// Loads a masked-LM checkpoint from a folder or a Hub id, with default options.
    pub fn from_pretrained(model: impl AsRef<Path>) -> Result<Self> {
        Self::from_pretrained_with(model, PipelineOptions::default())
    }

    /// Loads a masked-LM checkpoint from a folder or a Hub id.
    pub fn from_pretrained_with(model: impl AsRef<Path>, options: PipelineOptions) -> Result<Self> {
        Self::from_pipeline(Pipeline::load(model.as_ref(), options)?)
    }

    /// Loads a masked-LM checkpoint from a model folder on disk or in memory (no Hub).
    pub fn from_files(files: &ModelFiles, options: PipelineOptions) -> Result<Self> {
        Self::from_pipeline(Pipeline::from_files(files, options)?)
    }

    fn from_pipeline(mut pipeline: Pipeline<RoFormerForMaskedLM>) -> Result<Self> {
        let pooling = match SparseFolder::read(&pipeline.files)? {
            Some(folder) => {
                folder.transformer.apply(&mut pipeline)?;
                folder.pooling
            }
            None => SpladePooling::default(),
        };
        Ok(Self { pipeline, pooling })
    }

    /// One sparse embedding per text, in input order.
    pub fn encode<S: AsRef<str>>(&self, texts: &[S]) -> Result<Vec<SparseEmbedding>> {
        self.encode_tokenized(&self.pipeline.tokenizer.encode_batch(texts)?)
    }

    /// [`SparseEncoder::encode`] of texts this encoder's tokenizer has already tokenized.
    pub fn encode_tokenized(&self, encodings: &[Encoded]) -> Result<Vec<SparseEmbedding>> {
        let pipeline = &self.pipeline;
        pipeline.run(encodings, |batch, encodings| {
            let logits = pipeline.model.run(batch)?;
            let mut rows = Vec::with_capacity(encodings.len());
            for (b, e) in encodings.iter().enumerate() {
                let tokens = batch.tokens(&logits, b, e.len())?.to_dtype(DType::F32)?.to_vec2::<f32>()?;
                rows.push(SparseEmbedding::from_dense(&self.pooling.pool(&tokens)));
            }
            Ok(rows)
        })
    }

    /// The vocabulary size: the length of a dense embedding.
    pub fn dim(&self) -> usize {
        self.pipeline.config.vocab_size
    }
}

shared_accessors!(SparseEncoder, RoFormerForMaskedLM, pipeline);
