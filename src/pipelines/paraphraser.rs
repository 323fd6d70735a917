//! Similar sentences, as the sim checkpoints' authors use them (`gen_synonyms` on their model
//! cards): sample candidates, drop duplicates, empties and the source, rank by similarity.

use std::collections::HashSet;
use std::path::Path;

use super::core::{shared_accessors, Pipeline};
use super::options::PipelineOptions;
use super::sentence_encoder::{cosine_similarity, SentenceEncoder};
use crate::error::{Error, Result};
use crate::generation::causal_lm::RoFormerForCausalLM;
use crate::generation::GenerationOptions;
use crate::loading::tokenizer::jieba::is_cjk;
use crate::model::task::TaskModel;

/// One generated sentence.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct Paraphrase {
    /// The text, decoded without special tokens; no spaces next to Chinese characters.
    pub text: String,
    /// The generated token ids, without the end token.
    pub ids: Vec<u32>,
    /// Cosine similarity to the source: pooler embeddings (a bidirectional pass with token type
    /// 0) of the re-tokenized texts.
    pub similarity: f32,
}

/// Generates sentences similar to a source with a sim checkpoint (junnyu's
/// roformer_chinese_sim_char_base, _small and the _ft_ variants) and ranks them.
///
/// ```no_run
/// # fn main() -> roformer::Result<()> {
/// use roformer::{GenerationOptions, Paraphraser, Sampling};
/// let paraphraser = Paraphraser::from_pretrained("junnyu/roformer_chinese_sim_char_ft_base")?;
/// let sampling = Sampling::Sample { temperature: 1.0, top_k: None, top_p: 0.95 };
/// let options = GenerationOptions::default().with_num_samples(32).with_sampling(sampling).with_seed(1);
/// for p in paraphraser.paraphrase("今天天气不错", &options, 5)? {
///     println!("{:.3} {}", p.similarity, p.text);
/// }
/// # Ok(())
/// # }
/// ```
#[derive(Debug)]
pub struct Paraphraser {
    pipeline: Pipeline<RoFormerForCausalLM>,
    encoder: SentenceEncoder,
}

impl Paraphraser {
    /// Loads a sim (or any causal-LM) checkpoint from a folder or a Hub id, with default options.
    pub fn from_pretrained(model: impl AsRef<Path>) -> Result<Self> {
        Self::from_pretrained_with(model, PipelineOptions::default())
    }

    /// Loads a sim (or any causal-LM) checkpoint from a folder or a Hub id. The ranking embeds
    /// as [`SentenceEncoder`] does with the same options: junnyu's pooler where the checkpoint
    /// has one.
    pub fn from_pretrained_with(model: impl AsRef<Path>, options: PipelineOptions) -> Result<Self> {
        let pipeline: Pipeline<RoFormerForCausalLM> = Pipeline::load(model.as_ref(), options)?;
        let encoder = SentenceEncoder::around(pipeline.with_model(pipeline.model.roformer().clone()), None)?;
        Ok(Self { pipeline, encoder })
    }

    /// Samples `generation.num_samples()` continuations of `text`, keeps the distinct ones that
    /// are neither empty nor the source, and returns the `num_return` most similar to it, best
    /// first. Without an end token in `generation`, the tokenizer's `[SEP]` ends each sample.
    pub fn paraphrase(
        &self,
        text: &str,
        generation: &GenerationOptions,
        num_return: usize,
    ) -> Result<Vec<Paraphrase>> {
        generation.validate()?;
        if num_return == 0 {
            return Err(Error::at_least_one("num_return"));
        }
        if num_return > generation.num_samples() {
            return Err(Error::option(
                "num_return",
                format!(
                    "num_return {num_return} is larger than num_samples {}: there are only that many candidates",
                    generation.num_samples()
                ),
            ));
        }
        let tokenizer = &self.pipeline.tokenizer;
        let source = tokenizer.encode(text)?;
        if source.truncated {
            return Err(Error::Input(format!(
                "the source has more than max_length {} tokens; generation needs the whole source",
                self.pipeline.max_length
            )));
        }
        let mut generation = generation.clone();
        if generation.eos_token_id().is_none() {
            generation = generation.with_eos_token_id(tokenizer.token_id(&tokenizer.special_tokens().sep)?);
        }
        let samples =
            self.pipeline.workers.install(|| self.pipeline.model.generate(&source.input_ids, &generation))?;

        let source_text = self.decode(&source.input_ids)?;
        let mut seen = HashSet::new();
        let mut candidates = Vec::new();
        for ids in samples {
            let candidate = self.decode(&ids)?;
            if !candidate.is_empty()
                && candidate != text
                && candidate != source_text
                && seen.insert(candidate.clone())
            {
                candidates.push((candidate, ids));
            }
        }
        let texts: Vec<&str> =
            std::iter::once(text).chain(candidates.iter().map(|(t, _)| t.as_str())).collect();
        let embeddings = self.encoder.encode(&texts)?;
        let mut ranked: Vec<Paraphrase> = candidates
            .into_iter()
            .zip(&embeddings[1..])
            .map(|((text, ids), e)| Paraphrase {
                text,
                ids,
                similarity: cosine_similarity(&embeddings[0], e),
            })
            .collect();
        ranked.sort_by(|a, b| b.similarity.total_cmp(&a.similarity));
        ranked.truncate(num_return);
        Ok(ranked)
    }

    /// `ids` as text without special tokens, and without the spaces BERT's decoding puts between
    /// Chinese characters (the authors' recipe removes every space; text in other scripts keeps
    /// its own).
    fn decode(&self, ids: &[u32]) -> Result<String> {
        let text = self.pipeline.tokenizer.decode(ids, true)?;
        let chars: Vec<char> = text.chars().collect();
        let wide = |c: Option<&char>| {
            c.is_some_and(|&c| is_cjk(c) || matches!(c as u32, 0x3000..=0x303F | 0xFF00..=0xFFEF))
        };
        Ok(chars
            .iter()
            .enumerate()
            .filter(|&(i, &c)| {
                !(c == ' ' && (wide(i.checked_sub(1).and_then(|p| chars.get(p))) || wide(chars.get(i + 1))))
            })
            .map(|(_, &c)| c)
            .collect())
    }
}

shared_accessors!(Paraphraser, RoFormerForCausalLM, pipeline);
