//! The stack of transformer layers: attention, then the feed-forward block, each post-norm.

use candle_core::Tensor;
use candle_nn::VarBuilder;

use crate::error::Result;
use crate::loading::config::Config;
use crate::model::attention::Attention;
use crate::model::layers::{Linear, Norm};
use crate::model::pass::Pass;
use crate::runtime::activation::Activation;
use crate::runtime::engine::Engine;
use crate::runtime::kernels;
use crate::runtime::quantization::Quantization;

/// The feed-forward block: `intermediate` (dense + activation) then `output` (dense, residual, norm).
#[derive(Debug, Clone)]
struct FeedForward {
    intermediate: Linear,
    activation: Activation,
    output: Linear,
    norm: Norm,
    dropout: f64,
}

impl FeedForward {
    fn load(vb: VarBuilder, config: &Config, engine: Engine) -> Result<Self> {
        let (h, i, bias) = (config.hidden_size, config.intermediate_size, config.use_bias());
        Ok(Self {
            intermediate: Linear::load_in(
                vb.pp("intermediate.dense"),
                (h, i, bias),
                config,
                engine,
                config.quantization,
            )?,
            activation: config.hidden_act,
            output: Linear::load_in(
                vb.pp("output.dense"),
                (i, h, bias),
                config,
                engine,
                config.quantization,
            )?,
            norm: Norm::load(vb.pp("output.LayerNorm"), h, config, engine)?,
            dropout: config.hidden_dropout_prob,
        })
    }

    fn quantize(&mut self, precision: Quantization) -> Result<()> {
        self.intermediate.quantize(precision)?;
        self.output.quantize(precision)
    }

    fn forward(&self, xs: &Tensor, pass: &Pass) -> Result<Tensor> {
        let out = match (self.intermediate.fused(), self.output.fused()) {
            (Some(up), Some(down)) => kernels::linear::feed_forward_packed(xs, up, self.activation, down)?,
            _ => self.output.forward(&self.intermediate.forward_act(xs, self.activation)?)?,
        };
        self.norm.forward_residual(&pass.dropout(&out, self.dropout)?, xs)
    }
}

#[derive(Debug, Clone)]
struct Layer {
    attention: Attention,
    feed_forward: FeedForward,
}

impl Layer {
    fn load(vb: VarBuilder, config: &Config, engine: Engine, index: usize) -> Result<Self> {
        Ok(Self {
            attention: Attention::load(vb.pp("attention"), config, engine, index)?,
            feed_forward: FeedForward::load(vb, config, engine)?,
        })
    }

    fn quantize(&mut self, precision: Quantization) -> Result<()> {
        self.attention.quantize(precision)?;
        self.feed_forward.quantize(precision)
    }

    fn forward(&self, xs: &Tensor, pass: &Pass) -> Result<Tensor> {
        let xs = self.attention.forward(xs, pass)?;
        self.feed_forward.forward(&xs, pass)
    }
}

#[derive(Debug, Clone)]
pub(crate) struct Encoder {
    layers: Vec<Layer>,
}

impl Encoder {
    pub fn load(vb: VarBuilder, config: &Config, engine: Engine) -> Result<Self> {
        let layers = (0..config.num_hidden_layers)
            .map(|i| Layer::load(vb.pp(format!("layer.{i}")), config, engine, i))
            .collect::<Result<_>>()?;
        Ok(Self { layers })
    }

    /// Every linear layer of every layer in `precision`.
    pub fn quantize(&mut self, precision: Quantization) -> Result<()> {
        self.layers.iter_mut().try_for_each(|layer| layer.quantize(precision))
    }

    /// Runs every layer; with `hidden_states`, also collects the input and each layer's output.
    pub fn forward(
        &self,
        xs: &Tensor,
        pass: &Pass,
        mut hidden_states: Option<&mut Vec<Tensor>>,
    ) -> Result<Tensor> {
        let mut xs = xs.clone();
        for layer in &self.layers {
            if let Some(states) = hidden_states.as_deref_mut() {
                states.push(xs.clone());
            }
            xs = layer.forward(&xs, pass)?;
        }
        if let Some(states) = hidden_states {
            states.push(xs.clone());
        }
        Ok(xs)
    }
}
