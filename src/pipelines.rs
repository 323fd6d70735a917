//! What people do with the crate: classify, encode sentences, fill masks. Each pipeline loads
//! model, tokenizer and config together from a folder or a Hub id.

use std::path::{Path, PathBuf};

use candle_core::{DType, Device, Tensor};

use crate::config::{Config, ProblemType};
use crate::error::{Error, Result};
use crate::heads::{RoFormerForMaskedLM, RoFormerForSequenceClassification};
use crate::loading::{Checkpoint, Load};
use crate::model::{Inputs, RoFormerModel};
use crate::tokenizer::{Encoded, Tokenizer, Truncation};

/// Where and how a pipeline runs.
#[derive(Debug, Clone)]
pub struct PipelineOptions {
    pub device: Device,
    pub dtype: DType,
    /// Texts per forward pass.
    pub batch_size: usize,
    /// Longer inputs are truncated; `None` means the tokenizer's model_max_length (else 512).
    pub max_length: Option<usize>,
    /// Hub revision (branch, tag, commit or `refs/pr/N`) when the model is a Hub id.
    pub revision: Option<String>,
}

impl Default for PipelineOptions {
    fn default() -> Self {
        Self { device: Device::Cpu, dtype: DType::F32, batch_size: 32, max_length: None, revision: None }
    }
}

/// Parses `cpu`, `cuda`, `cuda:N`, `metal`, `metal:N` or `auto` (CUDA, then Metal, then CPU).
pub fn parse_device(spec: &str) -> Result<Device> {
    let (kind, ordinal) = match spec.split_once(':') {
        Some((k, n)) => (
            k,
            n.parse::<usize>()
                .map_err(|_| Error::Input(format!("device `{spec}`: `{n}` is not an ordinal")))?,
        ),
        None => (spec, 0),
    };
    let device = match kind {
        "cpu" => Device::Cpu,
        "cuda" => Device::new_cuda(ordinal)?,
        "metal" => Device::new_metal(ordinal)?,
        "auto" if candle_core::utils::cuda_is_available() => Device::new_cuda(0)?,
        "auto" if candle_core::utils::metal_is_available() => Device::new_metal(0)?,
        "auto" => Device::Cpu,
        _ => return Err(Error::Input(format!("unknown device `{spec}` (cpu, cuda:N, metal or auto)"))),
    };
    Ok(device)
}

/// Pins Candle's CPU thread count to the value Candle would choose, unless `RAYON_NUM_THREADS` is
/// already set. candle-core 0.11.1 otherwise reads /proc/cpuinfo again for every tensor op that asks
/// its thread count, which on a small model costs more than the arithmetic (batch-1 classification
/// ran 1.65 times faster with the count pinned). It sets an environment variable: call it at the
/// start of `main`, before other threads exist.
pub fn pin_cpu_threads() {
    if std::env::var_os("RAYON_NUM_THREADS").is_none() {
        let threads = candle_core::utils::get_num_threads();
        std::env::set_var("RAYON_NUM_THREADS", threads.to_string());
    }
}

/// Parses `f32`, `f16` or `bf16`.
pub fn parse_dtype(spec: &str) -> Result<DType> {
    match spec {
        "f32" => Ok(DType::F32),
        "f16" => Ok(DType::F16),
        "bf16" => Ok(DType::BF16),
        _ => Err(Error::Input(format!("unknown dtype `{spec}` (f32, f16 or bf16)"))),
    }
}

/// Model, tokenizer and config of one checkpoint, ready to batch inputs.
#[derive(Debug)]
pub struct Loaded<M> {
    pub model: M,
    pub tokenizer: Tokenizer,
    pub config: Config,
    pub dir: PathBuf,
    options: PipelineOptions,
}

impl<M: Load> Loaded<M> {
    /// Loads from a folder or a Hub id, truncating inputs to `max_length` (longest first).
    pub fn load(model: &str, options: PipelineOptions) -> Result<Self> {
        let dir = crate::hub::resolve(model, options.revision.as_deref())?;
        Self::load_dir(&dir, options)
    }

    pub fn load_dir(dir: &Path, options: PipelineOptions) -> Result<Self> {
        if options.batch_size == 0 {
            return Err(Error::Input("batch_size must be at least 1".into()));
        }
        let config = Config::from_file(dir.join("config.json"))?;
        let mut tokenizer = Tokenizer::from_dir(dir)?;
        let max_length = options.max_length.or(tokenizer.model_max_length()).unwrap_or(512);
        tokenizer.set_truncation(Some(Truncation::LongestFirst), Some(max_length))?;
        let model = Checkpoint::open(dir)?.load(&config, options.dtype, &options.device)?;
        Ok(Self { model, tokenizer, config, dir: dir.to_path_buf(), options })
    }
}

impl<M> Loaded<M> {
    /// Encodes `inputs`, runs `forward` on batches of similar length, and returns one output per
    /// input, in input order. `forward` gets the batch and its encodings, and returns one row each.
    fn run_batched<T>(
        &self,
        encodings: Vec<Encoded>,
        forward: impl FnMut(Inputs, &[&Encoded]) -> Result<Vec<T>>,
    ) -> Result<Vec<T>> {
        let encodings: Vec<&Encoded> = encodings.iter().collect();
        run_by_length(
            &encodings,
            self.options.batch_size,
            self.tokenizer.pad_id(),
            &self.options.device,
            forward,
        )
    }
}

/// Runs `forward` on batches of up to `batch_size` encodings of similar length, padded to the
/// longest of each batch, and returns its rows (one per encoding) in input order. Sorting by
/// length keeps padding small when lengths are mixed.
pub(crate) fn run_by_length<T>(
    encodings: &[&Encoded],
    batch_size: usize,
    pad_id: u32,
    device: &Device,
    mut forward: impl FnMut(Inputs, &[&Encoded]) -> Result<Vec<T>>,
) -> Result<Vec<T>> {
    let mut order: Vec<usize> = (0..encodings.len()).collect();
    order.sort_by_key(|&i| encodings[i].len());
    let mut results: Vec<Option<T>> = (0..encodings.len()).map(|_| None).collect();
    for chunk in order.chunks(batch_size.max(1)) {
        let batch: Vec<&Encoded> = chunk.iter().map(|&i| encodings[i]).collect();
        let (ids, types, mask) = batch_tensors(&batch, pad_id, device)?;
        let inputs = Inputs { input_ids: &ids, token_type_ids: Some(&types), attention_mask: Some(&mask) };
        let rows = forward(inputs, &batch)?;
        if rows.len() != chunk.len() {
            return Err(Error::Input(format!("batch of {} gave {} rows", chunk.len(), rows.len())));
        }
        for (&i, row) in chunk.iter().zip(rows) {
            results[i] = Some(row);
        }
    }
    Ok(results.into_iter().map(|r| r.expect("every input belongs to one batch")).collect())
}

/// Pads a batch to its longest member and stacks ids, type ids and mask as (batch, seq) u32.
pub(crate) fn batch_tensors(
    batch: &[&Encoded],
    pad_id: u32,
    device: &Device,
) -> Result<(Tensor, Tensor, Tensor)> {
    let len = batch.iter().map(|e| e.len()).max().unwrap_or(0);
    let pad = |v: &[u32], fill: u32| {
        v.iter().copied().chain(std::iter::repeat(fill)).take(len).collect::<Vec<u32>>()
    };
    let stack = |rows: Vec<Vec<u32>>| -> Result<Tensor> {
        let flat: Vec<u32> = rows.into_iter().flatten().collect();
        Ok(Tensor::from_vec(flat, (batch.len(), len), device)?)
    };
    Ok((
        stack(batch.iter().map(|e| pad(&e.input_ids, pad_id)).collect())?,
        stack(batch.iter().map(|e| pad(&e.token_type_ids, 0)).collect())?,
        stack(batch.iter().map(|e| pad(&e.attention_mask, 0)).collect())?,
    ))
}

/// One prediction of a sequence classifier.
#[derive(Debug, Clone, PartialEq)]
pub struct Classification {
    /// Name of the best class (id2label), or the value as text for regression.
    pub label: String,
    /// Index of the best class (0 for regression).
    pub label_id: usize,
    /// Probability of the best class; the predicted value for regression.
    pub score: f32,
    /// Softmax probabilities (single-label), sigmoid probabilities (multi-label), or the
    /// regression outputs.
    pub scores: Vec<f32>,
    pub logits: Vec<f32>,
    /// Whether the input was truncated to max_length.
    pub truncated: bool,
}

impl Classification {
    /// The prediction for one row of logits: softmax (single-label), sigmoid (multi-label) or the
    /// value (regression), and the best class with its label from id2label.
    pub fn from_logits(config: &Config, logits: Vec<f32>, truncated: bool) -> Self {
        let problem = config.problem_type();
        if problem == ProblemType::Regression {
            let value = logits.first().copied().unwrap_or(f32::NAN);
            let scores = logits.clone();
            return Classification {
                label: format!("{value}"),
                label_id: 0,
                score: value,
                scores,
                logits,
                truncated,
            };
        }
        let scores: Vec<f32> = if problem == ProblemType::MultiLabelClassification {
            logits.iter().map(|l| 1.0 / (1.0 + (-l).exp())).collect()
        } else {
            let max = logits.iter().copied().fold(f32::NEG_INFINITY, f32::max);
            let exp: Vec<f32> = logits.iter().map(|l| (l - max).exp()).collect();
            let sum: f32 = exp.iter().sum();
            exp.iter().map(|e| e / sum).collect()
        };
        // total_cmp puts NaN last, so a NaN logit never wins silently over real numbers.
        let best = scores.iter().enumerate().max_by(|a, b| a.1.total_cmp(b.1)).map(|(i, _)| i).unwrap_or(0);
        Classification {
            label: config.label(best),
            label_id: best,
            score: scores[best],
            scores,
            logits,
            truncated,
        }
    }
}

/// Sequence classification: single sentences or pairs, single-label, multi-label or regression.
pub type TextClassifier = Loaded<RoFormerForSequenceClassification>;

impl TextClassifier {
    pub fn problem_type(&self) -> ProblemType {
        self.config.problem_type()
    }

    pub fn classify(&self, texts: &[&str]) -> Result<Vec<Classification>> {
        let encodings = self.tokenizer.encode_batch(texts)?;
        self.classify_encoded(encodings)
    }

    pub fn classify_pairs(&self, pairs: &[(&str, &str)]) -> Result<Vec<Classification>> {
        let encodings = self.tokenizer.encode_pair_batch(pairs)?;
        self.classify_encoded(encodings)
    }

    fn classify_encoded(&self, encodings: Vec<Encoded>) -> Result<Vec<Classification>> {
        self.run_batched(encodings, |inputs, batch| {
            let logits = self.model.forward(inputs)?.to_dtype(DType::F32)?.to_vec2::<f32>()?;
            Ok(logits
                .into_iter()
                .zip(batch)
                .map(|(logits, e)| Classification::from_logits(&self.config, logits, e.truncated))
                .collect())
        })
    }
}

/// How a sentence encoder turns token states into one vector.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pooling {
    /// The [CLS] token's last hidden state.
    Cls,
    /// The mean of the last hidden states of real (unpadded) tokens.
    Mean,
    /// junnyu's pooler (`roformer.pooler.dense`) on [CLS], as the sim checkpoints use.
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

/// Sentence embeddings, in the spirit of sentence-transformers' `encode`.
pub type SentenceEncoder = Loaded<RoFormerModel>;

impl SentenceEncoder {
    /// One embedding per text, in input order.
    pub fn encode(&self, texts: &[&str], pooling: Pooling, normalize: bool) -> Result<Vec<Vec<f32>>> {
        if pooling == Pooling::Pooler && self.model.pooler().is_none() {
            return Err(Error::Input(format!(
                "pooling `pooler` needs `roformer.pooler.dense` weights, which {} lacks",
                self.dir.display()
            )));
        }
        let encodings = self.tokenizer.encode_batch(texts)?;
        self.run_batched(encodings, |inputs, _| {
            let hidden = self.model.forward(inputs)?;
            let pooled = match pooling {
                Pooling::Cls => hidden.narrow(1, 0, 1)?.squeeze(1)?,
                Pooling::Mean => RoFormerModel::mean_pool(&hidden, inputs.attention_mask)?,
                Pooling::Pooler => self.model.pooler().expect("checked above").forward(&hidden)?,
            };
            let pooled = pooled.to_dtype(DType::F32)?;
            let pooled = if normalize {
                let norm = pooled.sqr()?.sum_keepdim(1)?.sqrt()?.clamp(1e-12, f64::INFINITY)?;
                pooled.broadcast_div(&norm)?
            } else {
                pooled
            };
            Ok(pooled.to_vec2::<f32>()?)
        })
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

/// One candidate for a [MASK].
#[derive(Debug, Clone, PartialEq)]
pub struct MaskCandidate {
    pub token: String,
    pub token_id: u32,
    pub score: f32,
}

/// Top-k predictions for each [MASK] of each text.
pub type FillMask = Loaded<RoFormerForMaskedLM>;

impl FillMask {
    /// For each text, for each [MASK] in order, the `top_k` most likely tokens.
    pub fn fill(&self, texts: &[&str], top_k: usize) -> Result<Vec<Vec<Vec<MaskCandidate>>>> {
        let mask_id = self.tokenizer.token_id(&self.tokenizer.special_tokens().mask)?;
        let encodings = self.tokenizer.encode_batch(texts)?;
        self.run_batched(encodings, |inputs, batch| {
            let logits = self.model.forward(inputs)?;
            let mut rows = Vec::with_capacity(batch.len());
            for (b, e) in batch.iter().enumerate() {
                let mut masks = Vec::new();
                for (pos, _) in e.input_ids.iter().enumerate().filter(|(_, &id)| id == mask_id) {
                    let probs = candle_nn::ops::softmax(&logits.get(b)?.get(pos)?.to_dtype(DType::F32)?, 0)?;
                    let probs = probs.to_vec1::<f32>()?;
                    let mut ranked: Vec<(usize, f32)> = probs.into_iter().enumerate().collect();
                    ranked.sort_by(|x, y| y.1.total_cmp(&x.1));
                    masks.push(
                        ranked
                            .into_iter()
                            .take(top_k)
                            .map(|(id, score)| MaskCandidate {
                                token: self.tokenizer.id_to_token(id as u32).unwrap_or_default(),
                                token_id: id as u32,
                                score,
                            })
                            .collect(),
                    );
                }
                rows.push(masks);
            }
            Ok(rows)
        })
    }
}
