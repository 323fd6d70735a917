//! Every task head transformers has for RoFormer, with its weight names.

use candle_core::{Result, Tensor, D};
use candle_nn::{Init, VarBuilder};

use crate::activation::Activation;
use crate::config::{Config, SummaryType};
use crate::model::{Inputs, RoFormerModel};
use crate::nn::{dropout, Linear, Norm};

/// `classifier`: [CLS] -> dense -> hidden_act -> out_proj (hidden_act, not BERT's tanh).
#[derive(Debug, Clone)]
pub struct ClassificationHead {
    dense: Linear,
    out_proj: Linear,
    activation: Activation,
    dropout: f64,
}

impl ClassificationHead {
    pub fn load(vb: VarBuilder, config: &Config) -> Result<Self> {
        let h = config.hidden_size;
        Ok(Self {
            dense: Linear::load(vb.pp("dense"), h, h, true, config)?,
            out_proj: Linear::load(vb.pp("out_proj"), h, config.num_labels(), true, config)?,
            activation: config.hidden_act,
            dropout: config.hidden_dropout_prob,
        })
    }

    pub fn forward(&self, sequence_output: &Tensor, train: bool) -> Result<Tensor> {
        let cls = sequence_output.narrow(1, 0, 1)?.squeeze(1)?;
        let xs = self.dense.forward(&dropout(&cls, self.dropout, train)?)?;
        let xs = self.activation.forward(&xs)?;
        self.out_proj.forward(&dropout(&xs, self.dropout, train)?)
    }
}

/// Sequence classification or regression (transformers' `RoFormerForSequenceClassification`).
#[derive(Debug)]
pub struct RoFormerForSequenceClassification {
    pub roformer: RoFormerModel,
    pub classifier: ClassificationHead,
}

impl RoFormerForSequenceClassification {
    pub fn load(vb: VarBuilder, config: &Config) -> Result<Self> {
        Ok(Self {
            roformer: RoFormerModel::load(vb.pp("roformer"), config)?,
            classifier: ClassificationHead::load(vb.pp("classifier"), config)?,
        })
    }

    /// Logits, (batch, num_labels).
    pub fn forward(&self, inputs: Inputs) -> Result<Tensor> {
        self.forward_t(inputs, false)
    }

    pub fn forward_t(&self, inputs: Inputs, train: bool) -> Result<Tensor> {
        let sequence_output = self.roformer.forward_t(inputs, train)?;
        self.classifier.forward(&sequence_output, train)
    }
}

/// Per-token classification (`RoFormerForTokenClassification`).
#[derive(Debug)]
pub struct RoFormerForTokenClassification {
    pub roformer: RoFormerModel,
    classifier: Linear,
}

impl RoFormerForTokenClassification {
    pub fn load(vb: VarBuilder, config: &Config) -> Result<Self> {
        let classifier =
            Linear::load(vb.pp("classifier"), config.hidden_size, config.num_labels(), true, config)?;
        Ok(Self { roformer: RoFormerModel::load(vb.pp("roformer"), config)?, classifier })
    }

    /// Logits, (batch, seq, num_labels).
    pub fn forward(&self, inputs: Inputs) -> Result<Tensor> {
        let sequence_output = self.roformer.forward(inputs)?;
        self.classifier.forward(&sequence_output)
    }
}

/// `cls.predictions`: transform (dense, activation, norm) then the decoder onto the vocabulary.
#[derive(Debug, Clone)]
pub struct MaskedLmHead {
    dense: Linear,
    activation: Activation,
    norm: Norm,
    decoder: Linear,
}

impl MaskedLmHead {
    /// `word_embeddings` is the decoder weight when the checkpoint omits it: transformers ties the
    /// two and, from version 5 on, does not save the tied copy.
    pub fn load(vb: VarBuilder, config: &Config, word_embeddings: &Tensor) -> Result<Self> {
        let (h, e, v) = (config.hidden_size, config.embedding_size(), config.vocab_size);
        let transform = vb.pp("transform");
        let dense = Linear::load(transform.pp("dense"), h, e, true, config)?;
        let norm = Norm::load(transform.pp("LayerNorm"), e, config)?;
        let decoder_vb = vb.pp("decoder");
        let weight = if decoder_vb.contains_tensor("weight") {
            decoder_vb.get((v, e), "weight")?
        } else {
            word_embeddings.clone()
        };
        // The decoder bias is tied to `cls.predictions.bias`; files carry one or both.
        let bias = if decoder_vb.contains_tensor("bias") {
            decoder_vb.get(v, "bias")?
        } else {
            vb.get_with_hints(v, "bias", Init::Const(0.0))?
        };
        let decoder = Linear::from_weights(weight, Some(bias));
        Ok(Self { dense, activation: config.hidden_act, norm, decoder })
    }

    pub fn forward(&self, sequence_output: &Tensor) -> Result<Tensor> {
        let xs = self.activation.forward(&self.dense.forward(sequence_output)?)?;
        self.decoder.forward(&self.norm.forward(&xs)?)
    }
}

/// Masked language modelling (`RoFormerForMaskedLM`); with `is_decoder` set in the config the
/// mask is causal, which makes it `RoFormerForCausalLM`.
#[derive(Debug)]
pub struct RoFormerForMaskedLM {
    pub roformer: RoFormerModel,
    pub cls: MaskedLmHead,
}

impl RoFormerForMaskedLM {
    pub fn load(vb: VarBuilder, config: &Config) -> Result<Self> {
        let roformer = RoFormerModel::load(vb.pp("roformer"), config)?;
        let cls =
            MaskedLmHead::load(vb.pp("cls.predictions"), config, roformer.embeddings().word_embeddings())?;
        Ok(Self { roformer, cls })
    }

    /// Prediction scores, (batch, seq, vocab_size).
    pub fn forward(&self, inputs: Inputs) -> Result<Tensor> {
        self.forward_t(inputs, false)
    }

    pub fn forward_t(&self, inputs: Inputs, train: bool) -> Result<Tensor> {
        self.cls.forward(&self.roformer.forward_t(inputs, train)?)
    }
}

/// Extractive question answering (`RoFormerForQuestionAnswering`).
#[derive(Debug)]
pub struct RoFormerForQuestionAnswering {
    pub roformer: RoFormerModel,
    qa_outputs: Linear,
}

impl RoFormerForQuestionAnswering {
    pub fn load(vb: VarBuilder, config: &Config) -> Result<Self> {
        Ok(Self {
            roformer: RoFormerModel::load(vb.pp("roformer"), config)?,
            qa_outputs: Linear::load(vb.pp("qa_outputs"), config.hidden_size, 2, true, config)?,
        })
    }

    /// Start and end logits, each (batch, seq).
    pub fn forward(&self, inputs: Inputs) -> Result<(Tensor, Tensor)> {
        let logits = self.qa_outputs.forward(&self.roformer.forward(inputs)?)?;
        let start = logits.narrow(D::Minus1, 0, 1)?.squeeze(D::Minus1)?;
        let end = logits.narrow(D::Minus1, 1, 1)?.squeeze(D::Minus1)?;
        Ok((start, end))
    }
}

/// Multiple choice (`RoFormerForMultipleChoice`): each choice is encoded, summarised by
/// `sequence_summary` (the last token unless `summary_type` says otherwise) and scored.
#[derive(Debug)]
pub struct RoFormerForMultipleChoice {
    pub roformer: RoFormerModel,
    summary_type: SummaryType,
    summary: Option<Linear>,
    summary_activation: Option<Activation>,
    classifier: Linear,
}

impl RoFormerForMultipleChoice {
    pub fn load(vb: VarBuilder, config: &Config) -> Result<Self> {
        let h = config.hidden_size;
        let summary = if config.summary_use_proj.unwrap_or(false) {
            let out = if config.summary_proj_to_labels.unwrap_or(false) { config.num_labels() } else { h };
            Some(Linear::load(vb.pp("sequence_summary.summary"), h, out, true, config)?)
        } else {
            None
        };
        let summary_activation = match config.summary_activation.as_deref() {
            None => None,
            Some(name) => Some(name.parse::<Activation>().map_err(candle_core::Error::msg)?),
        };
        Ok(Self {
            roformer: RoFormerModel::load(vb.pp("roformer"), config)?,
            summary_type: config.summary_type.unwrap_or_default(),
            summary,
            summary_activation,
            classifier: Linear::load(vb.pp("classifier"), h, 1, true, config)?,
        })
    }

    /// `input_ids` etc. are (batch, num_choices, seq); the result is (batch, num_choices).
    pub fn forward(&self, inputs: Inputs) -> Result<Tensor> {
        let (batch, choices, seq) = inputs.input_ids.dims3()?;
        let flat = |t: &Tensor| t.reshape((batch * choices, seq));
        let ids = flat(inputs.input_ids)?;
        let types = inputs.token_type_ids.map(flat).transpose()?;
        let mask = inputs.attention_mask.map(flat).transpose()?;
        let sequence_output = self.roformer.forward(Inputs {
            input_ids: &ids,
            token_type_ids: types.as_ref(),
            attention_mask: mask.as_ref(),
        })?;
        let pooled = match self.summary_type {
            SummaryType::Last => sequence_output.narrow(1, seq - 1, 1)?.squeeze(1)?,
            SummaryType::First => sequence_output.narrow(1, 0, 1)?.squeeze(1)?,
            SummaryType::Mean => sequence_output.mean(1)?,
        };
        let pooled = match &self.summary {
            Some(proj) => proj.forward(&pooled)?,
            None => pooled,
        };
        let pooled = match self.summary_activation {
            Some(act) => act.forward(&pooled)?,
            None => pooled,
        };
        self.classifier.forward(&pooled)?.reshape((batch, choices))
    }
}
