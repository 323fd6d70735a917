//! The stack of transformer layers: attention, then the feed-forward block, each post-norm.

use candle_core::{Result, Tensor};
use candle_nn::VarBuilder;

use crate::activation::Activation;
use crate::attention::{Attention, RotaryTables};
use crate::config::Config;
use crate::nn::{dropout, Linear, Norm};

/// The feed-forward block: `intermediate` (dense + activation) then `output` (dense, residual, norm).
#[derive(Debug, Clone)]
pub struct FeedForward {
    intermediate: Linear,
    activation: Activation,
    output: Linear,
    norm: Norm,
    dropout: f64,
}

impl FeedForward {
    pub fn load(vb: VarBuilder, config: &Config) -> Result<Self> {
        let (h, i, bias) = (config.hidden_size, config.intermediate_size, config.use_bias());
        Ok(Self {
            intermediate: Linear::load(vb.pp("intermediate.dense"), h, i, bias, config)?,
            activation: config.hidden_act,
            output: Linear::load(vb.pp("output.dense"), i, h, bias, config)?,
            norm: Norm::load(vb.pp("output.LayerNorm"), h, config)?,
            dropout: config.hidden_dropout_prob,
        })
    }

    pub fn forward(&self, xs: &Tensor, train: bool) -> Result<Tensor> {
        let hidden = self.activation.forward(&self.intermediate.forward(xs)?)?;
        let out = dropout(&self.output.forward(&hidden)?, self.dropout, train)?;
        self.norm.forward(&(out + xs)?)
    }
}

#[derive(Debug, Clone)]
pub struct Layer {
    attention: Attention,
    feed_forward: FeedForward,
}

impl Layer {
    pub fn load(vb: VarBuilder, config: &Config) -> Result<Self> {
        Ok(Self {
            attention: Attention::load(vb.pp("attention"), config)?,
            feed_forward: FeedForward::load(vb, config)?,
        })
    }

    pub fn forward(
        &self,
        xs: &Tensor,
        mask: Option<&Tensor>,
        rope: &RotaryTables,
        train: bool,
    ) -> Result<Tensor> {
        let xs = self.attention.forward(xs, mask, rope, train)?;
        self.feed_forward.forward(&xs, train)
    }
}

#[derive(Debug, Clone)]
pub struct Encoder {
    layers: Vec<Layer>,
}

impl Encoder {
    pub fn load(vb: VarBuilder, config: &Config) -> Result<Self> {
        let layers = (0..config.num_hidden_layers)
            .map(|i| Layer::load(vb.pp(format!("layer.{i}")), config))
            .collect::<Result<_>>()?;
        Ok(Self { layers })
    }

    /// Runs every layer; with `hidden_states`, also collects the input and each layer's output.
    pub fn forward(
        &self,
        xs: &Tensor,
        mask: Option<&Tensor>,
        rope: &RotaryTables,
        train: bool,
        mut hidden_states: Option<&mut Vec<Tensor>>,
    ) -> Result<Tensor> {
        let mut xs = xs.clone();
        for layer in &self.layers {
            if let Some(states) = hidden_states.as_deref_mut() {
                states.push(xs.clone());
            }
            xs = layer.forward(&xs, mask, rope, train)?;
        }
        if let Some(states) = hidden_states {
            states.push(xs.clone());
        }
        Ok(xs)
    }
}
