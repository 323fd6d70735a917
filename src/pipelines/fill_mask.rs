//! Top-k predictions for each `[MASK]` of each text.

use std::path::Path;

use candle_core::DType;

use super::core::{shared_accessors, Pipeline};
use super::options::PipelineOptions;
use crate::error::{Error, Result};
use crate::loading::tokenizer::Encoded;
use crate::model::heads::RoFormerForMaskedLM;
use crate::runtime::scores::{self, softmax};

/// One candidate for a `[MASK]`.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct MaskCandidate {
    /// The token text.
    pub token: String,
    /// Its id.
    pub token_id: u32,
    /// Softmax probability over the vocabulary.
    pub score: f32,
}

/// Fills `[MASK]` tokens with a masked-LM checkpoint (v1 or v2).
///
/// ```no_run
/// # fn main() -> roformer::Result<()> {
/// let fill = roformer::FillMask::from_pretrained("junnyu/roformer_chinese_base")?;
/// // One list per text, one per [MASK] in it, the top 5 tokens of each.
/// for candidate in &fill.fill(&["今天[MASK]很好"], 5)?[0][0] {
///     println!("{} {:.3}", candidate.token, candidate.score);
/// }
/// # Ok(())
/// # }
/// ```
#[derive(Debug)]
pub struct FillMask {
    pipeline: Pipeline<RoFormerForMaskedLM>,
}

impl FillMask {
    /// Loads a masked-LM checkpoint from a folder or a Hub id, with default options.
    pub fn from_pretrained(model: impl AsRef<Path>) -> Result<Self> {
        Self::from_pretrained_with(model, PipelineOptions::default())
    }

    /// Loads a masked-LM checkpoint from a folder or a Hub id.
    pub fn from_pretrained_with(model: impl AsRef<Path>, options: PipelineOptions) -> Result<Self> {
        Ok(Self { pipeline: Pipeline::load(model.as_ref(), options)? })
    }

    /// For each text, for each `[MASK]` in order, the `top_k` most likely tokens (all of the
    /// vocabulary where it holds fewer). A `top_k` of 0 is an error, as in the other pipelines,
    /// rather than lists that are all empty.
    pub fn fill<S: AsRef<str>>(&self, texts: &[S], top_k: usize) -> Result<Vec<Vec<Vec<MaskCandidate>>>> {
        if top_k == 0 {
            return Err(Error::at_least_one("top_k"));
        }
        let encodings = self.pipeline.tokenizer.encode_batch(texts)?;
        self.fill_tokenized(&encodings, top_k)
    }

    /// [`FillMask::fill`] for texts already encoded (by this pipeline's tokenizer, or a copy of it
    /// that truncates elsewhere): for each, for each `[MASK]` id in order, the `top_k` candidates.
    pub fn fill_tokenized(
        &self,
        encodings: &[Encoded],
        top_k: usize,
    ) -> Result<Vec<Vec<Vec<MaskCandidate>>>> {
        if top_k == 0 {
            return Err(Error::at_least_one("top_k"));
        }
        let pipeline = &self.pipeline;
        let tokenizer = &pipeline.tokenizer;
        let mask_id = tokenizer.token_id(&tokenizer.special_tokens().mask)?;
        pipeline.run(encodings, |batch, encodings| {
            let logits = pipeline.model.run(batch)?;
            let mut rows = Vec::with_capacity(encodings.len());
            for (b, e) in encodings.iter().enumerate() {
                let mut masks = Vec::new();
                for (pos, _) in e.input_ids.iter().enumerate().filter(|(_, &id)| id == mask_id) {
                    let row = batch.token(&logits, b, pos)?.to_dtype(DType::F32)?.to_vec1::<f32>()?;
                    let candidates = scores::top_k(&softmax(&row), top_k)
                        .into_iter()
                        .map(|(id, score)| {
                            let token_id =
                                u32::try_from(id).map_err(|_| Error::Input(format!("token id {id}")))?;
                            let token = tokenizer.id_to_token(token_id).unwrap_or_default();
                            Ok(MaskCandidate { token, token_id, score })
                        })
                        .collect::<Result<Vec<_>>>()?;
                    masks.push(candidates);
                }
                rows.push(masks);
            }
            Ok(rows)
        })
    }
}

shared_accessors!(FillMask, RoFormerForMaskedLM, pipeline);
