//! Every task head transformers has for RoFormer, with its weight names.

use candle_core::{Tensor, D};
use candle_nn::{Init, VarBuilder};

use crate::error::Result;
use crate::loading::config::{Config, NormType, SummaryType};
use crate::model::batching::Batch;
use crate::model::layers::{DropoutRng, Linear, Norm};
use crate::model::roformer::{Inputs, RoFormerModel};
use crate::model::task::task_model;
use crate::runtime::activation::Activation;
use crate::runtime::engine::Engine;

/// `classifier`: `[CLS]` -> dense -> hidden_act -> out_proj (hidden_act, not BERT's tanh).
#[derive(Debug, Clone)]
struct ClassificationHead {
    dense: Linear,
    out_proj: Linear,
    activation: Activation,
    dropout: f64,
}

impl ClassificationHead {
    fn load(vb: VarBuilder, config: &Config, engine: Engine) -> Result<Self> {
        let h = config.hidden_size;
        Ok(Self {
            dense: Linear::load(vb.pp("dense"), h, h, true, config, engine)?,
            out_proj: Linear::load(vb.pp("out_proj"), h, config.num_labels(), true, config, engine)?,
            activation: config.hidden_act,
            dropout: config.hidden_dropout_prob,
        })
    }

    /// (batch, hidden) `[CLS]` states -> (batch, num_labels) logits.
    fn forward(&self, cls: &Tensor, dropout: Option<&DropoutRng>) -> Result<Tensor> {
        let drop = |xs: &Tensor| match dropout {
            Some(rng) => rng.apply(xs, self.dropout),
            None => Ok(xs.clone()),
        };
        let xs = self.dense.forward_act(&drop(cls)?, self.activation)?;
        self.out_proj.forward(&drop(&xs)?)
    }
}

/// Sequence classification or regression (transformers' `RoFormerForSequenceClassification`).
///
/// ```
/// # #[cfg(feature = "bundled-sst2")]
/// # fn main() -> roformer::Result<()> {
/// use candle_core::{DType, Device, Tensor};
/// use roformer::{load_dir, Inputs, RoFormerForSequenceClassification};
///
/// # let files = roformer::ModelFiles::bundled_sst2()?;
/// # let config = roformer::Config::from_files(&files)?;
/// # let model: RoFormerForSequenceClassification =
/// #     roformer::Checkpoint::from_files(&files)?.load(&config, DType::F32, &Device::Cpu)?;
/// # if false {
/// let model: RoFormerForSequenceClassification = load_dir("path/to/checkpoint", DType::F32, &Device::Cpu)?;
/// # }
/// let input_ids = Tensor::new(&[[101u32, 2009, 2003, 102]], &Device::Cpu)?;
/// let logits = model.forward(Inputs::new(&input_ids))?; // (batch, num_labels)
/// assert_eq!(logits.dims(), &[1, 2]);
/// # Ok(())
/// # }
/// # #[cfg(not(feature = "bundled-sst2"))]
/// # fn main() {}
/// ```
#[derive(Debug)]
pub struct RoFormerForSequenceClassification {
    roformer: RoFormerModel,
    classifier: ClassificationHead,
}

task_model!(RoFormerForSequenceClassification);

impl RoFormerForSequenceClassification {
    /// Builds the model from the weights under `vb`, a checkpoint's root.
    pub fn load(vb: VarBuilder, config: &Config) -> Result<Self> {
        let roformer = RoFormerModel::load(vb.pp("roformer"), config)?;
        let classifier = ClassificationHead::load(vb.pp("classifier"), config, roformer.engine())?;
        Ok(Self { roformer, classifier })
    }

    /// Logits, (batch, num_labels).
    pub fn forward(&self, inputs: Inputs) -> Result<Tensor> {
        self.run(&self.roformer.batch(inputs)?, None)
    }

    /// Logits of a batch, with dropout drawn from `dropout` in training.
    pub(crate) fn run(&self, batch: &Batch, dropout: Option<&DropoutRng>) -> Result<Tensor> {
        let sequence_output = self.roformer.run(batch, false, dropout, None)?;
        self.classifier.forward(&batch.first_tokens(&sequence_output)?, dropout)
    }
}

/// Per-token classification (`RoFormerForTokenClassification`).
#[derive(Debug)]
pub struct RoFormerForTokenClassification {
    roformer: RoFormerModel,
    classifier: Linear,
}

task_model!(RoFormerForTokenClassification);

impl RoFormerForTokenClassification {
    /// Builds the model from the weights under `vb`, a checkpoint's root.
    pub fn load(vb: VarBuilder, config: &Config) -> Result<Self> {
        let roformer = RoFormerModel::load(vb.pp("roformer"), config)?;
        let (h, labels, engine) = (config.hidden_size, config.num_labels(), roformer.engine());
        let classifier = Linear::load(vb.pp("classifier"), h, labels, true, config, engine)?;
        Ok(Self { roformer, classifier })
    }

    /// Logits, (batch, seq, num_labels).
    pub fn forward(&self, inputs: Inputs) -> Result<Tensor> {
        let sequence_output = self.roformer.forward(inputs)?;
        self.classifier.forward(&sequence_output)
    }

    /// Logits of every token of a pipeline's batch.
    pub(crate) fn run(&self, batch: &Batch) -> Result<Tensor> {
        self.classifier.forward(&self.roformer.run(batch, false, None, None)?)
    }
}

/// `cls.predictions`: transform (dense, activation, norm) then the decoder onto the vocabulary.
/// RoFormer v2 has the decoder alone, without bias.
#[derive(Debug, Clone)]
pub(crate) struct MaskedLmHead {
    transform: Option<(Linear, Activation, Norm)>,
    decoder: Linear,
}

impl MaskedLmHead {
    /// `word_embeddings` is the decoder weight when the checkpoint omits it: transformers ties the
    /// two and, from version 5 on, does not save the tied copy.
    fn load(vb: VarBuilder, config: &Config, word_embeddings: &Tensor, engine: Engine) -> Result<Self> {
        let (h, e, v) = (config.hidden_size, config.embedding_size(), config.vocab_size);
        let decoder_vb = vb.pp("decoder");
        let weight = if decoder_vb.contains_tensor("weight") {
            decoder_vb.get((v, e), "weight")?
        } else {
            word_embeddings.clone()
        };
        if config.norm_type() == NormType::RmsNorm {
            return Ok(Self { transform: None, decoder: Linear::new(weight, None, engine)? });
        }
        let transform = vb.pp("transform");
        let dense = Linear::load(transform.pp("dense"), h, e, true, config, engine)?;
        let norm = Norm::load(transform.pp("LayerNorm"), e, config, engine)?;
        // The decoder bias is tied to `cls.predictions.bias`; files carry one or both.
        let bias = if decoder_vb.contains_tensor("bias") {
            decoder_vb.get(v, "bias")?
        } else {
            vb.get_with_hints(v, "bias", Init::Const(0.0))?
        };
        Ok(Self {
            transform: Some((dense, config.hidden_act, norm)),
            decoder: Linear::new(weight, Some(bias), engine)?,
        })
    }

    /// (.., hidden) hidden states -> (.., vocab_size) prediction scores.
    pub fn forward(&self, sequence_output: &Tensor) -> Result<Tensor> {
        match &self.transform {
            Some((dense, activation, norm)) => {
                let xs = dense.forward_act(sequence_output, *activation)?;
                self.decoder.forward(&norm.forward(&xs)?)
            }
            None => self.decoder.forward(sequence_output),
        }
    }
}

/// Masked language modelling (`RoFormerForMaskedLM`): bidirectional attention.
#[derive(Debug)]
pub struct RoFormerForMaskedLM {
    roformer: RoFormerModel,
    cls: MaskedLmHead,
}

task_model!(RoFormerForMaskedLM);

impl RoFormerForMaskedLM {
    /// Builds the model from the weights under `vb`, a checkpoint's root.
    pub fn load(vb: VarBuilder, config: &Config) -> Result<Self> {
        let roformer = RoFormerModel::load(vb.pp("roformer"), config)?;
        let cls = MaskedLmHead::load(
            vb.pp("cls.predictions"),
            config,
            roformer.word_embeddings(),
            roformer.engine(),
        )?;
        Ok(Self { roformer, cls })
    }

    /// Prediction scores, (batch, seq, vocab_size).
    pub fn forward(&self, inputs: Inputs) -> Result<Tensor> {
        self.run(&self.roformer.batch(inputs)?)
    }

    /// Prediction scores of a batch: (batch, seq, vocab) padded, (tokens, vocab) packed.
    pub(crate) fn run(&self, batch: &Batch) -> Result<Tensor> {
        self.cls.forward(&self.roformer.run(batch, false, None, None)?)
    }

    /// The encoder and the head, for the causal LM, which has the same weights.
    pub(crate) fn into_parts(self) -> (RoFormerModel, MaskedLmHead) {
        (self.roformer, self.cls)
    }
}

/// Extractive question answering (`RoFormerForQuestionAnswering`).
#[derive(Debug)]
pub struct RoFormerForQuestionAnswering {
    roformer: RoFormerModel,
    qa_outputs: Linear,
}

task_model!(RoFormerForQuestionAnswering);

impl RoFormerForQuestionAnswering {
    /// Builds the model from the weights under `vb`, a checkpoint's root.
    pub fn load(vb: VarBuilder, config: &Config) -> Result<Self> {
        let roformer = RoFormerModel::load(vb.pp("roformer"), config)?;
        let engine = roformer.engine();
        Ok(Self {
            qa_outputs: Linear::load(vb.pp("qa_outputs"), config.hidden_size, 2, true, config, engine)?,
            roformer,
        })
    }

    /// Start and end logits, each (batch, seq).
    pub fn forward(&self, inputs: Inputs) -> Result<(Tensor, Tensor)> {
        let logits = self.qa_outputs.forward(&self.roformer.forward(inputs)?)?;
        let start = logits.narrow(D::Minus1, 0, 1)?.squeeze(D::Minus1)?;
        let end = logits.narrow(D::Minus1, 1, 1)?.squeeze(D::Minus1)?;
        Ok((start, end))
    }

    /// Start and end logits of every token of a pipeline's batch, as the last dimension (2).
    pub(crate) fn run(&self, batch: &Batch) -> Result<Tensor> {
        self.qa_outputs.forward(&self.roformer.run(batch, false, None, None)?)
    }
}

/// Multiple choice (`RoFormerForMultipleChoice`): each choice is encoded, summarised by
/// `sequence_summary` (the last token unless `summary_type` says otherwise) and scored.
#[derive(Debug)]
pub struct RoFormerForMultipleChoice {
    roformer: RoFormerModel,
    summary_type: SummaryType,
    summary: Option<Linear>,
    summary_activation: Option<Activation>,
    classifier: Linear,
}

task_model!(RoFormerForMultipleChoice);

impl RoFormerForMultipleChoice {
    /// Builds the model from the weights under `vb`, a checkpoint's root.
    pub fn load(vb: VarBuilder, config: &Config) -> Result<Self> {
        let h = config.hidden_size;
        let roformer = RoFormerModel::load(vb.pp("roformer"), config)?;
        let engine = roformer.engine();
        let summary = if config.summary_use_proj.unwrap_or(false) {
            let out = if config.summary_proj_to_labels.unwrap_or(false) { config.num_labels() } else { h };
            Some(Linear::load(vb.pp("sequence_summary.summary"), h, out, true, config, engine)?)
        } else {
            None
        };
        Ok(Self {
            roformer,
            summary_type: config.summary_type.unwrap_or_default(),
            summary,
            summary_activation: config.summary_activation,
            classifier: Linear::load(vb.pp("classifier"), h, 1, true, config, engine)?,
        })
    }

    /// `input_ids` etc. are (batch, num_choices, seq); the result is (batch, num_choices).
    pub fn forward(&self, inputs: Inputs) -> Result<Tensor> {
        let (batch, choices, seq) = inputs.input_ids.dims3().map_err(|_| {
            crate::error::Error::Input(format!(
                "input_ids has shape {:?}, expected (batch, num_choices, seq)",
                inputs.input_ids.dims()
            ))
        })?;
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
        Ok(self.classifier.forward(&pooled)?.reshape((batch, choices))?)
    }
}
