//! Causal language modelling: [`RoFormerForCausalLM`], the masked-LM head under a causal mask,
//! and the [`GenerationMode`] its checkpoints generate in. `generate` itself is in the
//! `generation` module, which builds on this one.

use candle_core::Tensor;
use candle_nn::VarBuilder;

use crate::error::Result;
use crate::loading::config::Config;
use crate::model::heads::{MaskedLmHead, RoFormerForMaskedLM};
use crate::model::roformer::{Inputs, RoFormerModel};
use crate::model::task::task_model;

/// Which earlier positions a generated token attends to, and its token type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GenerationMode {
    /// UniLM, as junnyu's sim checkpoints generate: the source is bidirectional, and generated
    /// tokens (token type 1) see the source and the generated tokens up to themselves.
    SourceThenTarget,
    /// Every token sees itself and the tokens before it; all have token type 0.
    Causal,
}

/// Causal language modelling (`RoFormerForCausalLM`): the masked-LM head under a causal mask.
#[derive(Debug)]
pub struct RoFormerForCausalLM {
    roformer: RoFormerModel,
    cls: MaskedLmHead,
    mode: GenerationMode,
}

task_model!(RoFormerForCausalLM);

impl RoFormerForCausalLM {
    /// Builds the model from the weights under `vb`, a checkpoint's root.
    pub fn load(vb: VarBuilder, config: &Config) -> Result<Self> {
        let (roformer, cls) = RoFormerForMaskedLM::load(vb, config)?.into_parts();
        // junnyu's sim checkpoints are the causal-LM checkpoints that carry a pooler, and they
        // were trained to generate as UniLM does.
        let mode = if roformer.pooler().is_some() {
            GenerationMode::SourceThenTarget
        } else {
            GenerationMode::Causal
        };
        Ok(Self { roformer, cls, mode })
    }

    /// How [`RoFormerForCausalLM::generate`] lays out source and generated tokens unless told
    /// otherwise: source-then-target (UniLM) for checkpoints with junnyu's pooler (the sim
    /// checkpoints), causal for the others.
    pub fn generation_mode(&self) -> GenerationMode {
        self.mode
    }

    /// Vocabulary scores (.., vocab_size) of hidden states (.., hidden).
    pub(crate) fn lm_head(&self, hidden: &Tensor) -> Result<Tensor> {
        self.cls.forward(hidden)
    }

    /// Next-token scores, (batch, seq, vocab_size).
    pub fn forward(&self, inputs: Inputs) -> Result<Tensor> {
        self.cls.forward(&self.roformer.run(&self.roformer.batch(inputs)?, true, None, None)?)
    }
}
