//! Multi-head self-attention with rotary position embedding on queries and keys (and values
//! when `rotary_value` is set), followed by the output projection and post-LayerNorm.

use candle_core::{Result, Tensor};
use candle_nn::VarBuilder;

use crate::config::Config;
use crate::nn::{dropout, Linear, Norm};
use crate::ops::softmax_last_dim;
use crate::rotary;

/// Sin/cos tables for the current sequence length, shared by every layer of one forward.
#[derive(Debug, Clone)]
pub struct RotaryTables {
    pub cos: Tensor,
    pub sin: Tensor,
}

/// The query, key and value projections.
#[derive(Debug, Clone)]
enum Projections {
    /// Trainable weights: a concatenation would not follow the optimiser's updates.
    Separate { query: Linear, key: Linear, value: Linear },
    /// Fixed weights, concatenated at load: one matmul and one head split instead of three.
    Fused(Linear),
}

#[derive(Debug, Clone)]
pub struct SelfAttention {
    projections: Projections,
    num_heads: usize,
    head_dim: usize,
    rotary_value: bool,
    dropout: f64,
}

impl SelfAttention {
    pub fn load(vb: VarBuilder, config: &Config) -> Result<Self> {
        let h = config.hidden_size;
        let bias = config.use_bias();
        let query = Linear::load(vb.pp("query"), h, h, bias, config)?;
        let key = Linear::load(vb.pp("key"), h, h, bias, config)?;
        let value = Linear::load(vb.pp("value"), h, h, bias, config)?;
        let projections = if query.weight().is_variable() {
            Projections::Separate { query, key, value }
        } else {
            Projections::Fused(Linear::concat(&[&query, &key, &value])?)
        };
        Ok(Self {
            projections,
            num_heads: config.num_attention_heads,
            head_dim: config.head_dim(),
            rotary_value: config.rotary_value,
            dropout: config.attention_probs_dropout_prob,
        })
    }

    /// (batch, seq, hidden) -> (batch, heads, seq, head_dim), contiguous.
    fn split_heads(&self, xs: &Tensor) -> Result<Tensor> {
        let (b, t, _) = xs.dims3()?;
        xs.reshape((b, t, self.num_heads, self.head_dim))?.transpose(1, 2)?.contiguous()
    }

    /// Queries, keys and values, each (batch, heads, seq, head_dim) and contiguous.
    fn project(&self, xs: &Tensor) -> Result<(Tensor, Tensor, Tensor)> {
        match &self.projections {
            Projections::Separate { query, key, value } => Ok((
                self.split_heads(&query.forward(xs)?)?,
                self.split_heads(&key.forward(xs)?)?,
                self.split_heads(&value.forward(xs)?)?,
            )),
            Projections::Fused(qkv) => {
                let (b, t, _) = xs.dims3()?;
                let qkv = qkv
                    .forward(xs)?
                    .reshape((b, t, 3, self.num_heads, self.head_dim))?
                    .permute((2, 0, 3, 1, 4))?
                    .contiguous()?;
                Ok((qkv.get(0)?, qkv.get(1)?, qkv.get(2)?))
            }
        }
    }

    /// `mask` is additive and broadcasts to (batch, heads, seq, seq); `None` when nothing is masked.
    pub fn forward(
        &self,
        xs: &Tensor,
        mask: Option<&Tensor>,
        rope: &RotaryTables,
        train: bool,
    ) -> Result<Tensor> {
        let (b, t, hidden) = xs.dims3()?;
        let (q, k, v) = self.project(xs)?;
        // Scaling q (seq × head_dim) is cheaper than scaling the scores (seq × seq), and the rotation is linear.
        let q = (rotary::apply(&q, &rope.cos, &rope.sin)? * (1.0 / (self.head_dim as f64).sqrt()))?;
        let k = rotary::apply(&k, &rope.cos, &rope.sin)?;
        let v = if self.rotary_value { rotary::apply(&v, &rope.cos, &rope.sin)? } else { v };

        // Kᵀ stays a strided view: gemm reads it in place, and nothing here is broadcast.
        let scores = q.matmul(&k.t()?)?;
        let scores = match mask {
            Some(mask) => scores.broadcast_add(mask)?,
            None => scores,
        };
        let probs = dropout(&softmax_last_dim(&scores)?, self.dropout, train)?;
        probs.matmul(&v)?.transpose(1, 2)?.contiguous()?.reshape((b, t, hidden))
    }
}

/// Projection of the attention output, residual connection and norm.
#[derive(Debug, Clone)]
pub struct SelfOutput {
    dense: Linear,
    norm: Norm,
    dropout: f64,
}

impl SelfOutput {
    pub fn load(vb: VarBuilder, config: &Config) -> Result<Self> {
        let h = config.hidden_size;
        Ok(Self {
            dense: Linear::load(vb.pp("dense"), h, h, config.use_bias(), config)?,
            norm: Norm::load(vb.pp("LayerNorm"), h, config)?,
            dropout: config.hidden_dropout_prob,
        })
    }

    pub fn forward(&self, xs: &Tensor, residual: &Tensor, train: bool) -> Result<Tensor> {
        let xs = dropout(&self.dense.forward(xs)?, self.dropout, train)?;
        self.norm.forward(&(xs + residual)?)
    }
}

/// `attention.self` and `attention.output` of one layer.
#[derive(Debug, Clone)]
pub struct Attention {
    self_attention: SelfAttention,
    output: SelfOutput,
}

impl Attention {
    pub fn load(vb: VarBuilder, config: &Config) -> Result<Self> {
        Ok(Self {
            self_attention: SelfAttention::load(vb.pp("self"), config)?,
            output: SelfOutput::load(vb.pp("output"), config)?,
        })
    }

    pub fn forward(
        &self,
        xs: &Tensor,
        mask: Option<&Tensor>,
        rope: &RotaryTables,
        train: bool,
    ) -> Result<Tensor> {
        let attended = self.self_attention.forward(xs, mask, rope, train)?;
        self.output.forward(&attended, xs, train)
    }
}
