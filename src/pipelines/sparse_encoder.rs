//! Sparse embeddings (SPLADE) from a masked-LM checkpoint, as sentence-transformers'
//! `SparseEncoder` (MLMTransformer, then SpladePooling) and text-embeddings-inference's
//! `--pooling splade` compute them.

use std::path::Path;

use candle_core::DType;

use super::core::{shared_accessors, Pipeline};
use super::options::PipelineOptions;
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
}

/// SPLADE embeddings: for each vocabulary entry, the largest `log(1 + relu(logit))` over a text's
/// tokens (special tokens included), from the checkpoint's masked-LM head.
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
}

impl SparseEncoder {
    /// Loads a masked-LM checkpoint from a folder or a Hub id, with default options.
    pub fn from_pretrained(model: impl AsRef<Path>) -> Result<Self> {
        Self::from_pretrained_with(model, PipelineOptions::default())
    }

    /// Loads a masked-LM checkpoint from a folder or a Hub id.
    pub fn from_pretrained_with(model: impl AsRef<Path>, options: PipelineOptions) -> Result<Self> {
        Ok(Self { pipeline: Pipeline::load(model.as_ref(), options)? })
    }

    /// Loads a masked-LM checkpoint from a model folder on disk or in memory (no Hub).
    pub fn from_files(files: &ModelFiles, options: PipelineOptions) -> Result<Self> {
        Ok(Self { pipeline: Pipeline::from_files(files, options)? })
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
                rows.push(splade(&tokens));
            }
            Ok(rows)
        })
    }

    /// The vocabulary size: the length of a dense embedding.
    pub fn dim(&self) -> usize {
        self.pipeline.config.vocab_size
    }
}

/// The max over tokens of `log(1 + relu(logit))`, kept where above zero. The max is taken before
/// the logarithm, which does not change it (both are increasing), and `ln_1p` keeps the small
/// values that `ln(1 + x)` would round to zero.
fn splade(tokens: &[Vec<f32>]) -> SparseEmbedding {
    let Some(first) = tokens.first() else { return SparseEmbedding::default() };
    let mut max = first.clone();
    for row in &tokens[1..] {
        for (m, &x) in max.iter_mut().zip(row) {
            *m = m.max(x);
        }
    }
    let (mut indices, mut values) = (Vec::new(), Vec::new());
    for (i, &m) in max.iter().enumerate() {
        if m > 0.0 {
            indices.push(i as u32);
            values.push(m.ln_1p());
        }
    }
    SparseEmbedding { indices, values }
}

shared_accessors!(SparseEncoder, RoFormerForMaskedLM, pipeline);
