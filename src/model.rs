//! `RoFormerModel`: embeddings, optional projection, the encoder, and junnyu's optional pooler.

use candle_core::{DType, Device, Result, Tensor, D};
use candle_nn::VarBuilder;

use crate::activation::Activation;
use crate::attention::RotaryTables;
use crate::config::Config;
use crate::embeddings::Embeddings;
use crate::encoder::Encoder;
use crate::nn::Linear;
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
    pub fn new(input_ids: &'a Tensor) -> Self {
        Self { input_ids, token_type_ids: None, attention_mask: None }
    }

    pub fn with_token_type_ids(mut self, token_type_ids: &'a Tensor) -> Self {
        self.token_type_ids = Some(token_type_ids);
        self
    }

    pub fn with_attention_mask(mut self, attention_mask: &'a Tensor) -> Self {
        self.attention_mask = Some(attention_mask);
        self
    }
}

/// The `roformer.pooler` of junnyu's sim checkpoints: a dense layer on [CLS].
#[derive(Debug, Clone)]
pub struct Pooler {
    dense: Linear,
    activation: Activation,
}

impl Pooler {
    pub fn load(vb: VarBuilder, config: &Config) -> Result<Self> {
        let h = config.hidden_size;
        Ok(Self {
            dense: Linear::load(vb.pp("dense"), h, h, true, config)?,
            activation: config.pooler_activation(),
        })
    }

    pub fn forward(&self, sequence_output: &Tensor) -> Result<Tensor> {
        let cls = sequence_output.narrow(1, 0, 1)?.squeeze(1)?;
        self.activation.forward(&self.dense.forward(&cls)?)
    }
}

/// The bare RoFormer encoder (transformers' `RoFormerModel`).
#[derive(Debug)]
pub struct RoFormerModel {
    embeddings: Embeddings,
    embeddings_project: Option<Linear>,
    encoder: Encoder,
    pooler: Option<Pooler>,
    rotary: RotaryEmbedding,
    config: Config,
    device: Device,
    dtype: DType,
}

impl RoFormerModel {
    /// Loads the weights under `vb`, which points at the `roformer` prefix of a task model or at
    /// the root of a bare model (the checkpoint backend resolves either).
    pub fn load(vb: VarBuilder, config: &Config) -> Result<Self> {
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
            rotary: RotaryEmbedding::new(config.head_dim(), config.max_position_embeddings),
            config: config.clone(),
            device: vb.device().clone(),
            dtype: vb.dtype(),
        })
    }

    pub fn config(&self) -> &Config {
        &self.config
    }

    pub fn device(&self) -> &Device {
        &self.device
    }

    pub fn dtype(&self) -> DType {
        self.dtype
    }

    pub fn embeddings(&self) -> &Embeddings {
        &self.embeddings
    }

    pub fn rotary(&self) -> &RotaryEmbedding {
        &self.rotary
    }

    pub fn pooler(&self) -> Option<&Pooler> {
        self.pooler.as_ref()
    }

    /// The last hidden state, (batch, seq, hidden).
    pub fn forward(&self, inputs: Inputs) -> Result<Tensor> {
        self.forward_t(inputs, false)
    }

    /// The last hidden state, with dropout active when `train` is set.
    pub fn forward_t(&self, inputs: Inputs, train: bool) -> Result<Tensor> {
        self.run(inputs, train, None)
    }

    /// Every hidden state: the embedding output and each layer's output (num_hidden_layers + 1).
    pub fn forward_hidden_states(&self, inputs: Inputs) -> Result<Vec<Tensor>> {
        let mut states = Vec::with_capacity(self.config.num_hidden_layers + 1);
        self.run(inputs, false, Some(&mut states))?;
        Ok(states)
    }

    fn run(&self, inputs: Inputs, train: bool, hidden_states: Option<&mut Vec<Tensor>>) -> Result<Tensor> {
        let input_ids = inputs.input_ids;
        let (batch, seq_len) = input_ids.dims2()?;
        if seq_len == 0 {
            candle_core::bail!("input_ids has no tokens: sequence length 0")
        }
        let zeros;
        let token_type_ids = match inputs.token_type_ids {
            Some(t) => t,
            None => {
                zeros = input_ids.zeros_like()?;
                &zeros
            }
        };
        check_same_shape("token_type_ids", token_type_ids, (batch, seq_len))?;

        let xs = self.embeddings.forward(input_ids, token_type_ids, train)?;
        let xs = match &self.embeddings_project {
            Some(project) => project.forward(&xs)?,
            None => xs,
        };
        let mask = self.additive_mask(inputs.attention_mask, batch, seq_len)?;
        let (cos, sin) = self.rotary.cos_sin(seq_len, self.dtype, &self.device)?;
        self.encoder.forward(&xs, mask.as_ref(), &RotaryTables { cos, sin }, train, hidden_states)
    }

    /// The padding mask as an additive bias broadcasting to (batch, heads, query, key): 0 where
    /// attention is allowed and the dtype's minimum elsewhere, as transformers' eager path does.
    /// `None` when nothing is masked, which spares every layer the addition.
    fn additive_mask(
        &self,
        attention_mask: Option<&Tensor>,
        batch: usize,
        seq_len: usize,
    ) -> Result<Option<Tensor>> {
        let min = match self.dtype {
            DType::F16 => f64::from(half::f16::MIN),
            DType::BF16 => f64::from(half::bf16::MIN),
            DType::F64 => f64::MIN,
            _ => f64::from(f32::MIN),
        };
        let keep = match attention_mask {
            Some(m) => {
                check_same_shape("attention_mask", m, (batch, seq_len))?;
                let m = m.to_dtype(DType::F32)?.to_device(&self.device)?;
                if !self.config.is_decoder && m.min_all()?.to_scalar::<f32>()? == 1.0 {
                    return Ok(None);
                }
                m.reshape((batch, 1, 1, seq_len))?
            }
            None if !self.config.is_decoder => return Ok(None),
            None => Tensor::ones((batch, 1, 1, seq_len), DType::F32, &self.device)?,
        };
        let keep = if self.config.is_decoder {
            let causal: Vec<f32> = (0..seq_len)
                .flat_map(|q| (0..seq_len).map(move |k| if k <= q { 1.0 } else { 0.0 }))
                .collect();
            let causal = Tensor::from_vec(causal, (1, 1, seq_len, seq_len), &self.device)?;
            keep.broadcast_mul(&causal)?
        } else {
            keep
        };
        // 1 - keep is exactly 0 or 1, so the bias is exactly 0 or min.
        Ok(Some(((keep.ones_like()? - keep)? * min)?.to_dtype(self.dtype)?))
    }

    /// Masked mean of the last hidden state over real tokens, (batch, hidden).
    pub fn mean_pool(sequence_output: &Tensor, attention_mask: Option<&Tensor>) -> Result<Tensor> {
        let Some(mask) = attention_mask else { return sequence_output.mean(1) };
        let mask = mask.to_dtype(sequence_output.dtype())?.unsqueeze(D::Minus1)?;
        let summed = sequence_output.broadcast_mul(&mask)?.sum(1)?;
        let counts = mask.sum(1)?.clamp(1e-9, f64::INFINITY)?;
        summed.broadcast_div(&counts)
    }
}

fn check_same_shape(name: &str, t: &Tensor, expected: (usize, usize)) -> Result<()> {
    if t.dims() != [expected.0, expected.1] {
        candle_core::bail!("{name} has shape {:?}, input_ids has {:?}", t.dims(), [expected.0, expected.1])
    }
    Ok(())
}
