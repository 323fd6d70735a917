//! `RoFormerModel`: embeddings, optional projection, the encoder, and junnyu's optional pooler.

use candle_core::{DType, Device, Module, Tensor};
use candle_nn::VarBuilder;

use crate::activation::Activation;
use crate::config::Config;
use crate::embeddings::Embeddings;
use crate::encoder::Encoder;
use crate::error::{Error, Result};
use crate::layers::{DropoutRng, Linear};
use crate::pass::Pass;
use crate::rotary::RotaryEmbedding;

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
    fn load(vb: VarBuilder, config: &Config) -> candle_core::Result<Self> {
        let h = config.hidden_size;
        Ok(Self {
            dense: Linear::load(vb.pp("dense"), h, h, true, config)?,
            activation: config.pooler_activation(),
        })
    }
}

impl Module for Pooler {
    /// (batch, seq, hidden) last hidden state -> (batch, hidden).
    fn forward(&self, sequence_output: &Tensor) -> candle_core::Result<Tensor> {
        let cls = sequence_output.narrow(1, 0, 1)?.squeeze(1)?;
        self.activation.forward(&self.dense.forward(&cls)?)
    }
}

/// The bare RoFormer encoder (transformers' `RoFormerModel`).
///
/// Attention is bidirectional whatever the config's `is_decoder` says: the causal mask belongs to
/// [`crate::RoFormerForCausalLM`], and junnyu's sim checkpoints, whose configs set `is_decoder`,
/// encode sentences bidirectionally.
#[derive(Debug)]
pub struct RoFormerModel {
    embeddings: Embeddings,
    embeddings_project: Option<Linear>,
    encoder: Encoder,
    pooler: Option<Pooler>,
    rotary: RotaryEmbedding,
    config: Config,
}

impl RoFormerModel {
    /// Builds the model from the weights under `vb`: the root of a bare-model checkpoint, or the
    /// `roformer` prefix of a task model's.
    pub fn load(vb: VarBuilder, config: &Config) -> Result<Self> {
        Ok(Self::load_inner(vb, config)?)
    }

    fn load_inner(vb: VarBuilder, config: &Config) -> candle_core::Result<Self> {
        let embeddings = Embeddings::load(vb.pp("embeddings"), config)?;
        let embeddings_project = if config.embedding_size() != config.hidden_size {
            let (e, h) = (config.embedding_size(), config.hidden_size);
            Some(Linear::load(vb.pp("embeddings_project"), e, h, true, config)?)
        } else {
            None
        };
        let encoder = Encoder::load(vb.pp("encoder"), config)?;
        let pooler = if vb.contains_tensor("pooler.dense.weight") {
            Some(Pooler::load(vb.pp("pooler"), config)?)
        } else {
            None
        };
        Ok(Self {
            embeddings,
            embeddings_project,
            encoder,
            pooler,
            rotary: RotaryEmbedding::new(config.head_dim(), vb.dtype(), vb.device()),
            config: config.clone(),
        })
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

    /// junnyu's pooler, when the checkpoint carries `roformer.pooler.dense`.
    pub fn pooler(&self) -> Option<&Pooler> {
        self.pooler.as_ref()
    }

    pub(crate) fn word_embeddings(&self) -> &Tensor {
        self.embeddings.word_embeddings()
    }

    /// The last hidden state, (batch, seq, hidden).
    pub fn forward(&self, inputs: Inputs) -> Result<Tensor> {
        self.run(inputs, false, None, None)
    }

    /// Every hidden state: the embedding output and each layer's output (num_hidden_layers + 1).
    pub fn forward_hidden_states(&self, inputs: Inputs) -> Result<Vec<Tensor>> {
        let mut states = Vec::with_capacity(self.config.num_hidden_layers + 1);
        self.run(inputs, false, None, Some(&mut states))?;
        Ok(states)
    }

    /// One forward pass: `causal` masks future tokens, `dropout` is set in training.
    pub(crate) fn run(
        &self,
        inputs: Inputs,
        causal: bool,
        dropout: Option<&DropoutRng>,
        hidden_states: Option<&mut Vec<Tensor>>,
    ) -> Result<Tensor> {
        let input_ids = inputs.input_ids;
        let (batch, len) = input_ids.dims2().map_err(|_| {
            Error::Input(format!("input_ids has shape {:?}, expected (batch, seq)", input_ids.dims()))
        })?;
        if batch == 0 || len == 0 {
            return Err(Error::Input(format!("input_ids has shape {:?}: no tokens", input_ids.dims())));
        }
        let zeros;
        let token_type_ids = match inputs.token_type_ids {
            Some(t) => t,
            None => {
                zeros = input_ids.zeros_like()?;
                &zeros
            }
        };
        check_same_shape("token_type_ids", token_type_ids, (batch, len))?;
        let keep = match inputs.attention_mask {
            Some(mask) => {
                check_same_shape("attention_mask", mask, (batch, len))?;
                let mask = mask.to_dtype(DType::F32)?.to_device(self.device())?;
                // An all-ones mask masks nothing: skip it.
                if mask.min_all()?.to_scalar::<f32>()? == 1.0 {
                    None
                } else {
                    Some(mask)
                }
            }
            None => None,
        };
        let pass = Pass::new(batch, len, keep, causal, self.rotary.tables(len)?, dropout);

        let xs = self.embeddings.forward(input_ids, token_type_ids, &pass)?;
        let xs = match &self.embeddings_project {
            Some(project) => project.forward(&xs)?,
            None => xs,
        };
        Ok(self.encoder.forward(&xs, &pass, hidden_states)?)
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
