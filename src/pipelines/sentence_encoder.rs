//! Sentence embeddings, in the spirit of sentence-transformers' `encode`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use candle_core::{DType, Tensor};

use super::core::{shared_accessors, Pipeline};
use super::options::{PipelineOptions, Pooling};
use super::sentence_transformers::{self as st, Module, Normalize, SentenceTransformers};
use super::text_classifier::TextClassifier;
use crate::error::{Error, Result};
use crate::loading::model_files::ModelFiles;
use crate::loading::tokenizer::{Encoded, Tokenizer};
use crate::model::roformer::RoFormerModel;
use crate::model::task::TaskModel;

/// Sentence embeddings from any RoFormer checkpoint: a bare encoder, a task model through its
/// encoder, or a sentence-transformers folder.
///
/// A folder with `modules.json` is encoded as sentence-transformers encodes it: the Transformer
/// module's `max_seq_length` and `do_lower_case`, the Pooling module's modes (cls, max, mean,
/// mean_sqrt_len_tokens, weightedmean, lasttoken, with `include_prompt`; `Cls` or `Mean` of
/// [`PipelineOptions::with_pooling`] in their place, as TEI's `--pooling` overrides them), then
/// its Dense and Normalize modules in order; the prompt of [`PipelineOptions::with_prompt`] or [`PipelineOptions::with_prompt_name`]
/// (else the folder's `default_prompt_name`) is put before each text. Any other checkpoint
/// decides the defaults itself: one with junnyu's pooler (the sim checkpoints) is encoded as its
/// authors do, pooler on `[CLS]` with a linear activation, bidirectional attention,
/// L2-normalised; any other is mean-pooled over real tokens and L2-normalised;
/// [`PipelineOptions::with_pooling`] overrides the pooling there.
///
/// After the modules (the normalisation, for a folder without `modules.json`), embeddings are cut
/// to [`PipelineOptions::with_truncate_dim`] (or the folder's `truncate_dim`), which gives up
/// unit length as in sentence-transformers; `with_normalize(true)` scales them to unit length
/// after the cut, `with_normalize(false)` leaves the normalisation out.
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
    pooling: Pool,
    /// Dense and Normalize modules after the pooling.
    modules: Vec<Module>,
    /// Put before each text by [`SentenceEncoder::encode`]; empty for none.
    prompt: String,
    /// Tokens of the prompt, `[CLS]` included: what a pooling without the prompt leaves out.
    prompt_tokens: usize,
    /// A sentence-transformers folder's prompts by name, with the config_sentence_transformers.json
    /// they came from; `None` for a folder without `modules.json`.
    prompts: Option<(BTreeMap<String, String>, PathBuf)>,
    /// Embeddings are cut to this length, when shorter than they are.
    truncate_dim: Option<usize>,
    /// Whether embeddings are scaled to unit length after the cut.
    normalize_last: bool,
}

/// What [`SentenceEncoder::encode_with`] puts before each text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Prompt<'a> {
    /// The prompt the encoder was loaded with: [`PipelineOptions::with_prompt`] or
    /// [`PipelineOptions::with_prompt_name`], else the folder's `default_prompt_name`, else none.
    Default,
    /// No prompt.
    None,
    /// The prompt of this name in the folder's config_sentence_transformers.json.
    Named(&'a str),
    /// This text.
    Text(&'a str),
}

/// Tokens of a prompt, `[CLS]` included, as sentence-transformers measures them (the prompt alone,
/// less its closing `[SEP]`): what a pooling without the prompt leaves out.
fn prompt_tokens(tokenizer: &Tokenizer, prompt: &str) -> Result<usize> {
    Ok(if prompt.is_empty() { 0 } else { tokenizer.encode(prompt)?.len().saturating_sub(1) })
}

/// A prompt name asked of a checkpoint that is no sentence-transformers folder.
fn no_prompts<M>(pipeline: &Pipeline<M>, name: &str) -> Error {
    Error::UnknownPrompt {
        name: name.to_string(),
        known: Vec::new(),
        path: pipeline.files.path("config_sentence_transformers.json"),
    }
}

/// The pooling of a plain checkpoint, or of a sentence-transformers folder.
#[derive(Debug)]
enum Pool {
    Plain(Pooling),
    SentenceTransformers(st::Pooling),
}

impl SentenceEncoder {
    /// Loads any RoFormer checkpoint from a folder or a Hub id, with default options.
    pub fn from_pretrained(model: impl AsRef<Path>) -> Result<Self> {
        Self::from_pretrained_with(model, PipelineOptions::default())
    }

    /// Loads any RoFormer checkpoint from a folder or a Hub id.
    pub fn from_pretrained_with(model: impl AsRef<Path>, options: PipelineOptions) -> Result<Self> {
        Self::from_pipeline(Pipeline::load(model.as_ref(), options)?)
    }

    /// Loads any RoFormer checkpoint from a model folder on disk or in memory (no Hub), as
    /// [`SentenceEncoder::from_pretrained_with`] loads it from a folder.
    pub fn from_files(files: &ModelFiles, options: PipelineOptions) -> Result<Self> {
        Self::from_pipeline(Pipeline::from_files(files, options)?)
    }

    fn from_pipeline(mut pipeline: Pipeline<RoFormerModel>) -> Result<Self> {
        let folder = SentenceTransformers::read(
            &pipeline.files,
            pipeline.config.hidden_size,
            &pipeline.options.device,
            pipeline.options.pooling,
        )?;
        if let Some(folder) = &folder {
            folder.transformer.apply(&mut pipeline)?;
        }
        Self::around(pipeline, folder)
    }

    /// The encoder under a classifier, sharing its weights, tokenizer and threads: embeddings of
    /// a classification checkpoint without loading it twice.
    pub fn from_classifier(classifier: &TextClassifier) -> Result<Self> {
        Self::around(classifier.pipeline.with_model(classifier.model().roformer().clone()), None)
    }

    pub(super) fn around(
        pipeline: Pipeline<RoFormerModel>,
        folder: Option<SentenceTransformers>,
    ) -> Result<Self> {
        let options = &pipeline.options;
        let hidden_size = pipeline.config.hidden_size;
        let (pooling, mut modules, prompt, dim, folder_truncate_dim, prompts) = match folder {
            Some(folder) => {
                let prompt = folder.prompt(options.prompt.as_deref(), options.prompt_name.as_deref())?;
                let dim = folder.dim(hidden_size);
                let prompts = Some((folder.prompts, folder.config_path));
                (
                    Pool::SentenceTransformers(folder.pooling),
                    folder.modules,
                    prompt,
                    dim,
                    folder.truncate_dim,
                    prompts,
                )
            }
            None => {
                if let Some(name) = &options.prompt_name {
                    return Err(no_prompts(&pipeline, name));
                }
                let has_pooler = pipeline.model.pooler().is_some();
                let pooling =
                    options.pooling.unwrap_or(if has_pooler { Pooling::Pooler } else { Pooling::Mean });
                if pooling == Pooling::Pooler && !has_pooler {
                    return Err(Error::Unsupported(format!(
                        "pooling `pooler` needs `roformer.pooler.dense` weights, which {} lacks",
                        pipeline.files.root().display()
                    )));
                }
                let modules = if options.normalize.unwrap_or(true) {
                    vec![Module::Normalize(Normalize)]
                } else {
                    vec![]
                };
                (Pool::Plain(pooling), modules, options.prompt.clone(), hidden_size, None, None)
            }
        };
        if options.normalize == Some(false) {
            modules.retain(|m| !matches!(m, Module::Normalize(_)));
        }
        let truncate_dim = match options.truncate_dim.or(folder_truncate_dim) {
            Some(0) => return Err(Error::at_least_one("truncate_dim")),
            Some(d) if d > dim => {
                return Err(Error::option(
                    "truncate_dim",
                    format!("truncate_dim {d} is more than the embeddings' {dim} values"),
                ))
            }
            Some(d) if d < dim => Some(d),
            _ => None,
        };
        let prompt = prompt.unwrap_or_default();
        let prompt_tokens = prompt_tokens(&pipeline.tokenizer, &prompt)?;
        // Once is enough when nothing comes between the last Normalize and the end.
        let normalized = truncate_dim.is_none() && matches!(modules.last(), Some(Module::Normalize(_)));
        let normalize_last = options.normalize == Some(true) && !normalized;
        Ok(Self { pipeline, pooling, modules, prompt, prompt_tokens, prompts, truncate_dim, normalize_last })
    }

    /// One embedding per text, in input order, each text after the prompt the encoder was
    /// loaded with (if any); an empty slice gives an empty result.
    pub fn encode<S: AsRef<str>>(&self, texts: &[S]) -> Result<Vec<Vec<f32>>> {
        self.encode_with(texts, Prompt::Default)
    }

    /// One embedding per text, in input order, each text after `prompt`: one encoder (one copy of
    /// the weights) serves every prompt of a folder. An unknown prompt name is an
    /// [`Error::UnknownPrompt`], which lists the folder's prompts.
    ///
    /// ```no_run
    /// # fn main() -> roformer::Result<()> {
    /// use roformer::{Prompt, SentenceEncoder};
    /// let encoder = SentenceEncoder::from_pretrained("path/to/sentence-transformers-folder")?;
    /// let queries = encoder.encode_with(&["a good movie"], Prompt::Named("query"))?;
    /// let documents = encoder.encode_with(&["a great film"], Prompt::Text("passage: "))?;
    /// # Ok(())
    /// # }
    /// ```
    pub fn encode_with<S: AsRef<str>>(&self, texts: &[S], prompt: Prompt<'_>) -> Result<Vec<Vec<f32>>> {
        let named;
        let (prompt, prompt_tokens) = match prompt {
            Prompt::Default => (self.prompt.as_str(), self.prompt_tokens),
            Prompt::None => ("", 0),
            Prompt::Named(name) => {
                named = match &self.prompts {
                    Some((prompts, config_path)) => st::named_prompt(prompts, config_path, name)?,
                    None => return Err(no_prompts(&self.pipeline, name)),
                };
                (named.as_str(), prompt_tokens(&self.pipeline.tokenizer, &named)?)
            }
            Prompt::Text(text) => (text, prompt_tokens(&self.pipeline.tokenizer, text)?),
        };
        let encodings = if prompt.is_empty() {
            self.pipeline.tokenizer.encode_batch(texts)?
        } else {
            let prompted: Vec<String> = texts.iter().map(|t| format!("{prompt}{}", t.as_ref())).collect();
            self.pipeline.tokenizer.encode_batch(&prompted)?
        };
        self.embed(&encodings, prompt_tokens)
    }

    /// The prompt names of a sentence-transformers folder (config_sentence_transformers.json),
    /// sorted; empty for any other checkpoint.
    pub fn prompt_names(&self) -> Vec<&str> {
        self.prompts.iter().flat_map(|(prompts, _)| prompts.keys().map(String::as_str)).collect()
    }

    /// One embedding per encoding from [`Pipeline::tokenizer`], in input order, as given:
    /// no prompt is put before them, nor left out of the pooling.
    pub fn encode_tokenized(&self, encodings: &[Encoded]) -> Result<Vec<Vec<f32>>> {
        self.embed(encodings, 0)
    }

    fn embed(&self, encodings: &[Encoded], prompt_tokens: usize) -> Result<Vec<Vec<f32>>> {
        let pipeline = &self.pipeline;
        pipeline.run(encodings, |batch, encodings| {
            let hidden = pipeline.model.run(batch, false, None, None)?;
            let mut pooled = match &self.pooling {
                Pool::Plain(Pooling::Cls) => batch.first_tokens(&hidden)?,
                Pool::Plain(Pooling::Mean) => batch.mean(&hidden)?,
                Pool::Plain(Pooling::Pooler) => match pipeline.model.pooler() {
                    Some(pooler) => pooler.pool(&batch.first_tokens(&hidden)?)?,
                    None => return Err(Error::Unsupported("the checkpoint has no pooler".into())),
                },
                Pool::SentenceTransformers(pooling) => {
                    let hidden = hidden.to_dtype(DType::F32)?;
                    let rows = encodings
                        .iter()
                        .enumerate()
                        .map(|(b, e)| pooling.pool(&batch.tokens(&hidden, b, e.len())?, prompt_tokens))
                        .collect::<Result<Vec<_>>>()?;
                    Tensor::stack(&rows, 0)?
                }
            }
            .to_dtype(DType::F32)?;
            for module in &self.modules {
                pooled = module.forward(&pooled)?;
            }
            if let Some(dim) = self.truncate_dim {
                pooled = pooled.narrow(1, 0, dim)?;
            }
            if self.normalize_last {
                pooled = Normalize.forward(&pooled)?;
            }
            Ok(pooled.to_vec2::<f32>()?)
        })
    }

    /// The pooling in use; for a sentence-transformers folder, [`Pooling::Cls`] when its Pooling
    /// module takes the first token alone, else [`Pooling::Mean`] (its `1_Pooling/config.json`
    /// names the modes).
    pub fn pooling(&self) -> Pooling {
        match &self.pooling {
            Pool::Plain(pooling) => *pooling,
            Pool::SentenceTransformers(pooling) => pooling.as_public(),
        }
    }

    /// Whether embeddings are scaled to unit length.
    pub fn normalize(&self) -> bool {
        self.normalize_last
            || (self.truncate_dim.is_none() && matches!(self.modules.last(), Some(Module::Normalize(_))))
    }

    /// The length of each embedding.
    pub fn dim(&self) -> usize {
        self.truncate_dim.unwrap_or_else(|| self.full_dim())
    }

    /// The length of embeddings before any truncate_dim.
    fn full_dim(&self) -> usize {
        let hidden_size = self.pipeline.config.hidden_size;
        let pooled = match &self.pooling {
            Pool::Plain(_) => hidden_size,
            Pool::SentenceTransformers(pooling) => pooling.dim(hidden_size),
        };
        self.modules.iter().fold(pooled, |dim, m| m.out_dim(dim))
    }
}

/// Entry points for inputs the caller has already tokenized (a server that tokenizes each input
/// once to validate and count it): the same vectors as the text entry points.
impl SentenceEncoder {
    /// The text put before each input under `prompt` (empty for none), as
    /// [`SentenceEncoder::encode_with`] puts it: an input encoded as `prompt_text + text` by
    /// [`Pipeline::tokenizer`] goes to [`SentenceEncoder::encode_tokenized_with`] with the same
    /// `prompt`. An unknown prompt name is an [`Error::UnknownPrompt`].
    ///
    /// ```no_run
    /// # fn main() -> roformer::Result<()> {
    /// use roformer::{Prompt, SentenceEncoder};
    /// let encoder = SentenceEncoder::from_pretrained("path/to/sentence-transformers-folder")?;
    /// let prompt = encoder.prompt_text(Prompt::Named("query"))?;
    /// let encodings = encoder.tokenizer().encode_batch(&[format!("{prompt}a good movie")])?;
    /// let queries = encoder.encode_tokenized_with(&encodings, Prompt::Named("query"))?;
    /// assert_eq!(queries, encoder.encode_with(&["a good movie"], Prompt::Named("query"))?);
    /// # Ok(())
    /// # }
    /// ```
    pub fn prompt_text(&self, prompt: Prompt<'_>) -> Result<String> {
        Ok(match prompt {
            Prompt::Default => self.prompt.clone(),
            Prompt::None => String::new(),
            Prompt::Named(name) => match &self.prompts {
                Some((prompts, config_path)) => st::named_prompt(prompts, config_path, name)?,
                None => return Err(no_prompts(&self.pipeline, name)),
            },
            Prompt::Text(text) => text.to_string(),
        })
    }

    /// One embedding per encoding, in input order, where each encoding is of a text after
    /// `prompt` ([`SentenceEncoder::prompt_text`] followed by the text, encoded by
    /// [`Pipeline::tokenizer`]): the prompt's tokens are left out of the pooling where the folder's
    /// Pooling module says so, and the vectors are those [`SentenceEncoder::encode_with`] gives
    /// for the texts and `prompt`. With [`Prompt::None`] this is
    /// [`SentenceEncoder::encode_tokenized`].
    pub fn encode_tokenized_with(&self, encodings: &[Encoded], prompt: Prompt<'_>) -> Result<Vec<Vec<f32>>> {
        let prompt_tokens = match prompt {
            Prompt::Default => self.prompt_tokens,
            Prompt::None => 0,
            _ => prompt_tokens(&self.pipeline.tokenizer, &self.prompt_text(prompt)?)?,
        };
        self.embed(encodings, prompt_tokens)
    }

    /// Every token's last hidden state (sentence-transformers' `token_embeddings`), special
    /// tokens included: one row of `hidden_size` values per token of each encoding, in input
    /// order. The encodings run in the pipeline's batches, as [`SentenceEncoder::encode`]'s do;
    /// each row is what [`RoFormerModel::forward`] gives for that encoding alone.
    pub fn token_embeddings_tokenized(&self, encodings: &[Encoded]) -> Result<Vec<Vec<Vec<f32>>>> {
        let pipeline = &self.pipeline;
        pipeline.run(encodings, |batch, encodings| {
            let hidden = pipeline.model.run(batch, false, None, None)?.to_dtype(DType::F32)?;
            encodings
                .iter()
                .enumerate()
                .map(|(b, e)| Ok(batch.tokens(&hidden, b, e.len())?.to_vec2::<f32>()?))
                .collect()
        })
    }
}

/// Scales `v` to unit L2 length in place: each element divided by the vector's norm, clamped
/// below at `1e-12` so that an all-zero vector stays all zeros.
///
/// ```
/// let mut v = [3.0f32, 4.0];
/// roformer::l2_normalize(&mut v);
/// assert_eq!(v, [0.6, 0.8]);
/// let mut zeros = [0.0f32; 3];
/// roformer::l2_normalize(&mut zeros);
/// assert_eq!(zeros, [0.0; 3]);
/// ```
pub fn l2_normalize(v: &mut [f32]) {
    let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt().max(1e-12);
    v.iter_mut().for_each(|x| *x /= norm);
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

shared_accessors!(SentenceEncoder, RoFormerModel, pipeline);
