//! `RoFormerModel`: embeddings, optional projection, the encoder, and junnyu's optional pooler.

use candle_core::{DType, Device, Module, Tensor};
use candle_nn::VarBuilder;

use crate::error::{Error, Result};
use crate::loading::config::Config;
use crate::model::batching::Batch;
use crate::model::embeddings::Embeddings;
use crate::model::encoder::Encoder;
use crate::model::layers::{DropoutRng, Linear};
use crate::model::pass::Pass;
use crate::model::rotary::{RotaryEmbedding, RotaryTables};
use crate::runtime::activation::Activation;
use crate::runtime::engine::Engine;
use crate::runtime::kv_cache::KvCache;
use crate::runtime::quantization::Quantization;

/// The inputs of one forward pass, as transformers names them.
#[derive(Debug, Clone, Copy)]
pub struct Inputs<'a> {
    /// (batch, seq) token ids, any integer dtype.
    pub input_ids: &'a Tensor,
    /// (batch, seq) segment ids; all zero when absent.
    pub token_type_ids: Option<&'a Tensor>,
    /// (batch, seq) 1 for real tokens and 0 for padding; all ones when absent.
    pub attention_mask: Option<&'a Tensor>,
}

impl<'a> Inputs<'a> {
    /// Token ids alone: one segment, no padding.
    pub fn new(input_ids: &'a Tensor) -> Self {
        Self { input_ids, token_type_ids: None, attention_mask: None }
    }

    /// Adds segment ids.
    pub fn with_token_type_ids(mut self, token_type_ids: &'a Tensor) -> Self {
        self.token_type_ids = Some(token_type_ids);
        self
    }

    /// Adds the padding mask.
    pub fn with_attention_mask(mut self, attention_mask: &'a Tensor) -> Self {
        self.attention_mask = Some(attention_mask);
        self
    }
}

/// The `roformer.pooler` of junnyu's sim checkpoints: a dense layer and an activation on `[CLS]`.
#[derive(Debug, Clone)]
pub struct Pooler {
    dense: Linear,
    activation: Activation,
}

impl Pooler {
    fn load(vb: VarBuilder, config: &Config, engine: Engine) -> Result<Self> {
        let h = config.hidden_size;
        Ok(Self {
            dense: Linear::load(vb.pp("dense"), h, h, true, config, engine)?,
            activation: config.pooler_activation(),
        })
    }

    /// (batch, hidden) `[CLS]` states -> (batch, hidden).
    pub(crate) fn pool(&self, cls: &Tensor) -> Result<Tensor> {
        self.dense.forward_act(cls, self.activation)
    }
}

impl Module for Pooler {
    /// (batch, seq, hidden) last hidden state -> (batch, hidden).
    fn forward(&self, sequence_output: &Tensor) -> candle_core::Result<Tensor> {
        self.pool(&sequence_output.narrow(1, 0, 1)?.squeeze(1)?).map_err(Error::into_candle)
    }
}

impl Clone for RoFormerModel {
    /// Shares the weights (tensors and packed weights are reference-counted); the copy starts with
    /// an empty rotary table cache.
    fn clone(&self) -> Self {
        Self {
            embeddings: self.embeddings.clone(),
            embeddings_project: self.embeddings_project.clone(),
            encoder: self.encoder.clone(),
            pooler: self.pooler.clone(),
            rotary: self.rotary.empty_copy(),
            engine: self.engine,
            config: self.config.clone(),
        }
    }
}

/// The bare RoFormer encoder (transformers' `RoFormerModel`).
///
/// Attention is bidirectional whatever the config's `is_decoder` says: the causal mask belongs to
/// [`crate::RoFormerForCausalLM`], and junnyu's sim checkpoints, whose configs set `is_decoder`,
/// encode sentences bidirectionally.
///
/// Any checkpoint's encoder loads as a `RoFormerModel` (a task model's `roformer.` prefix is
/// resolved), and runs on token ids from the checkpoint's [`crate::Tokenizer`]:
///
/// ```
/// # #[cfg(feature = "bundled-sst2")]
/// # fn main() -> roformer::Result<()> {
/// use candle_core::{DType, Device, Tensor};
/// use roformer::{Checkpoint, Config, Inputs, ModelFiles, RoFormerModel, Tokenizer};
///
/// let files = ModelFiles::bundled_sst2()?; // or ModelFiles::from_dir("path/to/checkpoint")
/// let config = Config::from_files(&files)?;
/// let model: RoFormerModel = Checkpoint::from_files(&files)?.load(&config, DType::F32, &Device::Cpu)?;
/// let ids = Tokenizer::from_files(&files)?.encode("a gorgeous , witty movie .")?.input_ids;
/// let input_ids = Tensor::new(ids.as_slice(), &Device::Cpu)?.unsqueeze(0)?;
/// let hidden = model.forward(Inputs::new(&input_ids))?; // (batch, seq, hidden)
/// assert_eq!(hidden.dims(), &[1, ids.len(), config.hidden_size]);
/// # Ok(())
/// # }
/// # #[cfg(not(feature = "bundled-sst2"))]
/// # fn main() {}
/// ```
#[derive(Debug)]
pub struct RoFormerModel {
    embeddings: Embeddings,
    embeddings_project: Option<Linear>,
    encoder: Encoder,
    pooler: Option<Pooler>,
    rotary: RotaryEmbedding,
    engine: Engine,
    config: Config,
}

impl RoFormerModel {
    /// Builds the model from the weights under `vb`: the root of a bare-model checkpoint, or the
    /// `roformer` prefix of a task model's.
    pub fn load(vb: VarBuilder, config: &Config) -> Result<Self> {
        let rotary = RotaryEmbedding::new(
            config.head_dim(),
            config.rope_theta()?,
            config.rope_scaling()?,
            config.max_position_embeddings,
            vb.dtype(),
            vb.device(),
        );
        let words = Embeddings::load_words(&vb.pp("embeddings"), config)?;
        let engine = Engine::for_weights(&words)?;
        Self::load_inner(vb, words, config, rotary, engine)
    }

    fn load_inner(
        vb: VarBuilder,
        words: Tensor,
        config: &Config,
        rotary: RotaryEmbedding,
        engine: Engine,
    ) -> Result<Self> {
        let embeddings = Embeddings::load(vb.pp("embeddings"), words, config, engine)?;
        let embeddings_project = if config.embedding_size() != config.hidden_size {
            let (e, h) = (config.embedding_size(), config.hidden_size);
            Some(Linear::load(vb.pp("embeddings_project"), e, h, true, config, engine)?)
        } else {
            None
        };
        let encoder = Encoder::load(vb.pp("encoder"), config, engine)?;
        let pooler = if vb.contains_tensor("pooler.dense.weight") {
            Some(Pooler::load(vb.pp("pooler"), config, engine)?)
        } else {
            None
        };
        Ok(Self { embeddings, embeddings_project, encoder, pooler, rotary, engine, config: config.clone() })
    }

    /// The configuration the model was built from.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// Where the weights live.
    pub fn device(&self) -> &Device {
        self.embeddings.word_embeddings().device()
    }

    /// The dtype of the weights and of every hidden state.
    pub fn dtype(&self) -> DType {
        self.embeddings.word_embeddings().dtype()
    }

    /// Switches the encoder's linear layers to `quantization` (once, after loading), on the
    /// fused CPU engine, from f32 weights: int8 weights per output channel and int8 activations
    /// per row, or bf16 weights and inputs summed in f32. A model loaded for training, on a GPU or
    /// in half precision is refused.
    pub fn quantize(&mut self, quantization: Quantization) -> Result<()> {
        match quantization {
            Quantization::None => Ok(()),
            Quantization::Int8 | Quantization::Bf16 => {
                self.encoder.quantize(quantization)?;
                self.config.quantization = quantization;
                Ok(())
            }
        }
    }

    /// junnyu's pooler, when the checkpoint carries `roformer.pooler.dense`.
    pub fn pooler(&self) -> Option<&Pooler> {
        self.pooler.as_ref()
    }

    pub(crate) fn word_embeddings(&self) -> &Tensor {
        self.embeddings.word_embeddings()
    }

    /// The last hidden state, (batch, seq, hidden).
    pub fn forward(&self, inputs: Inputs) -> Result<Tensor> {
        self.run(&self.batch(inputs)?, false, None, None)
    }

    /// Every hidden state: the embedding output and each layer's output (num_hidden_layers + 1).
    pub fn forward_hidden_states(&self, inputs: Inputs) -> Result<Vec<Tensor>> {
        let mut states = Vec::with_capacity(self.config.num_hidden_layers + 1);
        self.run(&self.batch(inputs)?, false, None, Some(&mut states))?;
        Ok(states)
    }

    /// The engine chosen when the model loaded; heads build their layers for it.
    pub(crate) fn engine(&self) -> Engine {
        self.engine
    }

    /// Whether batches go to this model packed back to back, without padding.
    pub(crate) fn packs_batches(&self) -> bool {
        self.engine.packs_batches()
    }

    /// `inputs` as a padded batch, after checking their shapes.
    pub(crate) fn batch(&self, inputs: Inputs) -> Result<Batch> {
        let input_ids = inputs.input_ids;
        let (batch, len) = input_ids.dims2().map_err(|_| {
            Error::Input(format!("input_ids has shape {:?}, expected (batch, seq)", input_ids.dims()))
        })?;
        if batch == 0 || len == 0 {
            return Err(Error::Input(format!("input_ids has shape {:?}: no tokens", input_ids.dims())));
        }
        let types = match inputs.token_type_ids {
            Some(t) => {
                check_same_shape("token_type_ids", t, (batch, len))?;
                t.clone()
            }
            None => input_ids.zeros_like()?,
        };
        if let Some(mask) = inputs.attention_mask {
            check_same_shape("attention_mask", mask, (batch, len))?;
        }
        Ok(Batch::Padded { ids: input_ids.clone(), types, mask: inputs.attention_mask.cloned() })
    }

    /// One forward pass: `causal` masks future tokens, `dropout` is set in training. The result is
    /// (batch, seq, hidden) for a padded batch and (tokens, hidden) for a packed one.
    pub(crate) fn run(
        &self,
        batch: &Batch,
        causal: bool,
        dropout: Option<&DropoutRng>,
        hidden_states: Option<&mut Vec<Tensor>>,
    ) -> Result<Tensor> {
        let (ids, types, longest) = match batch {
            Batch::Padded { ids, types, .. } => (ids, types, ids.dim(1)?),
            Batch::Packed { ids, types, spans } => (ids, types, spans.iter().map(|s| s.1).max().unwrap_or(0)),
        };
        let rope = self.rotary.tables(longest)?;
        let pass = Pass::new(self.engine, batch, causal, rope, self.dtype(), dropout)?;
        self.encode(ids, types, &pass, hidden_states)
    }

    /// A decoding step: the hidden states (batch, len, hidden) of `ids` and `types` (batch, len)
    /// at the positions after those `cache` holds, which it then holds too. The query at position
    /// q sees the key at position k where `sees(q, k)`.
    pub(crate) fn run_cached(
        &self,
        ids: &Tensor,
        types: &Tensor,
        cache: &KvCache,
        sees: impl Fn(usize, usize) -> bool,
    ) -> Result<Tensor> {
        let (start, len) = (cache.len(), ids.dim(1)?);
        let tables = self.rotary.tables(start + len)?;
        let rope =
            RotaryTables { cos: tables.cos.narrow(0, start, len)?, sin: tables.sin.narrow(0, start, len)? };
        let pass = Pass::cached(cache, len, sees, rope, self.dtype())?;
        self.encode(ids, types, &pass, None)
    }

    /// Embeddings, projection and encoder under `pass`.
    fn encode(
        &self,
        ids: &Tensor,
        types: &Tensor,
        pass: &Pass,
        hidden_states: Option<&mut Vec<Tensor>>,
    ) -> Result<Tensor> {
        let xs = self.embeddings.forward(ids, types, pass)?;
        let xs = match &self.embeddings_project {
            Some(project) => project.forward(&xs)?,
            None => xs,
        };
        self.encoder.forward(&xs, pass, hidden_states)
    }

    /// An empty key-value cache for `batch` sequences of up to `capacity` tokens.
    pub(crate) fn kv_cache(&self, batch: usize, capacity: usize) -> Result<KvCache> {
        let c = &self.config;
        let (layers, heads, head_dim) = (c.num_hidden_layers, c.num_attention_heads, c.head_dim());
        KvCache::new(layers, batch, heads, capacity, head_dim, self.dtype(), self.device())
    }
}

fn check_same_shape(name: &str, t: &Tensor, expected: (usize, usize)) -> Result<()> {
    if t.dims() != [expected.0, expected.1] {
        return Err(Error::Input(format!(
            "{name} has shape {:?}, input_ids has {:?}",
            t.dims(),
            [expected.0, expected.1]
        )));
    }
    Ok(())
}
