//! How a pipeline loads and runs.

use std::path::PathBuf;

use candle_core::{DType, Device};

use crate::error::{Error, Result};
use crate::loading::hub::options::HubOptions;
use crate::runtime::quantization::Quantization;
use crate::runtime::rope_scaling::RopeScaling;

/// Where and how a pipeline runs. Start from `PipelineOptions::default()` and chain `with_*`:
///
/// ```
/// use roformer::{PipelineOptions, Pooling};
/// let options = PipelineOptions::default().with_batch_size(8).with_max_length(64).with_pooling(Pooling::Mean);
/// assert_eq!(options.batch_size, 8);
/// ```
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct PipelineOptions {
    /// CPU by default.
    pub device: Device,
    /// F32 by default; F16 and BF16 halve the memory, at some precision. BF16 on the CPU is the
    /// fused engine's bf16: the encoder's linear layers in bf16 ([`Quantization::Bf16`]), the
    /// rest in f32.
    pub dtype: DType,
    /// Texts per forward pass (32).
    pub batch_size: usize,
    /// Longer inputs are truncated; `None` means the tokenizer's model_max_length, else 512.
    pub max_length: Option<usize>,
    /// Hub revision (branch, tag, commit or `refs/pr/N`) when the model is a Hub id.
    pub revision: Option<String>,
    /// Sentence pooling; `None` lets the checkpoint decide (see [`crate::SentenceEncoder`]).
    pub pooling: Option<Pooling>,
    /// Scale embeddings to unit length; `None` lets the checkpoint decide (see [`crate::SentenceEncoder`]).
    pub normalize: Option<bool>,
    /// The prompt of this name in a sentence-transformers folder's `config_sentence_transformers.json`
    /// is put before each text; `None` means its `default_prompt_name`, if any.
    pub prompt_name: Option<String>,
    /// This text is put before each text to encode (instead of a named prompt).
    pub prompt: Option<String>,
    /// Embeddings are cut to their first `truncate_dim` values (Matryoshka); `None` means the
    /// folder's `truncate_dim`, if any, else the whole embedding.
    pub truncate_dim: Option<usize>,
    /// Int8 or bf16 linear layers in the encoder (CPU only), or none.
    pub quantization: Quantization,
    /// RoPE scaling for inputs past the trained length, over the checkpoint's own (if any).
    pub rope_scaling: Option<RopeScaling>,
    /// Threads of the pipeline's own pool on the CPU; `None` means one per core.
    pub threads: Option<usize>,
    /// Cache, server, offline mode and token for Hub ids.
    pub hub: HubOptions,
}

impl Default for PipelineOptions {
    fn default() -> Self {
        Self {
            device: Device::Cpu,
            dtype: DType::F32,
            batch_size: 32,
            max_length: None,
            revision: None,
            pooling: None,
            normalize: None,
            prompt_name: None,
            prompt: None,
            truncate_dim: None,
            quantization: Quantization::None,
            rope_scaling: None,
            threads: None,
            hub: HubOptions::from_env(),
        }
    }
}

impl PipelineOptions {
    /// The dtype the checkpoint loads in, and the precision of the encoder's linear layers.
    /// BF16 on the CPU is decided here, once: the fused engine's bf16 (f32 loaded, then the linear
    /// layers repacked), as Candle's CPU matmul has no bf16 kernel; under
    /// `ROFORMER_ENGINE=candle`, Candle's BF16 as asked.
    pub(crate) fn load_precision(&self) -> Result<(DType, Quantization)> {
        let fused_bf16 =
            self.dtype == DType::BF16 && self.device.is_cpu() && !crate::runtime::engine::candle_requested()?;
        if !fused_bf16 {
            return Ok((self.dtype, self.quantization));
        }
        match self.quantization {
            Quantization::None | Quantization::Bf16 => Ok((DType::F32, Quantization::Bf16)),
            Quantization::Int8 => Err(Error::option(
                "quantization",
                "int8 cannot be combined with dtype bf16: int8 is quantized from f32 weights (leave the dtype f32)",
            )),
        }
    }

    /// Runs on `device` (CPU by default).
    pub fn with_device(mut self, device: Device) -> Self {
        self.device = device;
        self
    }

    /// Loads the weights in `dtype` (F32 by default).
    pub fn with_dtype(mut self, dtype: DType) -> Self {
        self.dtype = dtype;
        self
    }

    /// Texts per forward pass.
    pub fn with_batch_size(mut self, batch_size: usize) -> Self {
        self.batch_size = batch_size;
        self
    }

    /// Truncates longer inputs to `max_length` tokens, special tokens included.
    pub fn with_max_length(mut self, max_length: usize) -> Self {
        self.max_length = Some(max_length);
        self
    }

    /// The Hub revision: branch, tag, commit or `refs/pr/N`.
    pub fn with_revision(mut self, revision: impl Into<String>) -> Self {
        self.revision = Some(revision.into());
        self
    }

    /// The sentence pooling, instead of the checkpoint's default.
    pub fn with_pooling(mut self, pooling: Pooling) -> Self {
        self.pooling = Some(pooling);
        self
    }

    /// Whether sentence embeddings are scaled to unit length.
    pub fn with_normalize(mut self, normalize: bool) -> Self {
        self.normalize = Some(normalize);
        self
    }

    /// Puts the folder's prompt of this name (`config_sentence_transformers.json`) before each text
    /// to encode, as sentence-transformers' `encode(prompt_name=...)`.
    pub fn with_prompt_name(mut self, prompt_name: impl Into<String>) -> Self {
        self.prompt_name = Some(prompt_name.into());
        self
    }

    /// Puts `prompt` before each text to encode, as sentence-transformers' `encode(prompt=...)`;
    /// an empty prompt turns the folder's default prompt off.
    pub fn with_prompt(mut self, prompt: impl Into<String>) -> Self {
        self.prompt = Some(prompt.into());
        self
    }

    /// Cuts embeddings to their first `truncate_dim` values (Matryoshka), after the folder's
    /// modules, as sentence-transformers' `truncate_dim`.
    pub fn with_truncate_dim(mut self, truncate_dim: usize) -> Self {
        self.truncate_dim = Some(truncate_dim);
        self
    }

    /// Int8 linear layers in the encoder (CPU only, from f32 weights).
    pub fn with_quantization(mut self, quantization: Quantization) -> Self {
        self.quantization = quantization;
        self
    }

    /// RoPE scaling (`"linear:4".parse()?`, say), over the checkpoint's own.
    pub fn with_rope_scaling(mut self, rope_scaling: RopeScaling) -> Self {
        self.rope_scaling = Some(rope_scaling);
        self
    }

    /// Threads of the pipeline's pool.
    pub fn with_threads(mut self, threads: usize) -> Self {
        self.threads = Some(threads);
        self
    }

    /// All Hub settings at once.
    pub fn with_hub(mut self, hub: HubOptions) -> Self {
        self.hub = hub;
        self
    }

    /// The Hub cache folder.
    pub fn with_cache_dir(mut self, cache_dir: impl Into<PathBuf>) -> Self {
        self.hub.cache_dir = cache_dir.into();
        self
    }

    /// The Hub server.
    pub fn with_endpoint(mut self, endpoint: impl Into<String>) -> Self {
        self.hub.endpoint = endpoint.into();
        self
    }

    /// Reads the Hub cache alone.
    pub fn with_offline(mut self, offline: bool) -> Self {
        self.hub.offline = offline;
        self
    }

    /// The Hub access token.
    pub fn with_token(mut self, token: impl Into<String>) -> Self {
        self.hub.token = Some(token.into());
        self
    }
}

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
            _ => Err(Error::option("pooling", format!("unknown pooling `{s}` (cls, mean or pooler)"))),
        }
    }
}
