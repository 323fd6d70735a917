//! `config.json` of a RoFormer checkpoint, with transformers' defaults.

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::loading::model_files::ModelFiles;
use crate::runtime::activation::Activation;
use crate::runtime::quantization::Quantization;
use crate::runtime::rope_scaling::RopeScaling;

/// What a sequence-classification head computes, as transformers' `problem_type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ProblemType {
    /// One value per input, no softmax.
    Regression,
    /// One class per input: softmax.
    SingleLabelClassification,
    /// Any number of labels per input: a sigmoid each.
    MultiLabelClassification,
}

/// Normalisation layer of junnyu's checkpoints (`norm_type`): `layer_norm`, or any other value
/// for RoFormer v2's weightless norm, as junnyu's code decides.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case", from = "String")]
pub enum NormType {
    /// LayerNorm with weight and bias.
    #[default]
    LayerNorm,
    /// A weightless RMS norm: `x / sqrt(mean(x²) + eps)`.
    RmsNorm,
}

impl From<String> for NormType {
    fn from(name: String) -> Self {
        if name == "layer_norm" {
            NormType::LayerNorm
        } else {
            NormType::RmsNorm
        }
    }
}

/// Which token multiple choice summarises (transformers' `summary_type`, default `last`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum SummaryType {
    /// The last token.
    #[default]
    Last,
    /// The first token.
    First,
    /// The mean over tokens.
    Mean,
}

/// A RoFormer configuration: every `RoFormerConfig` field, plus the extras of junnyu's checkpoints.
/// Keys this crate does not use are kept in `extra`, so a config saved again loses nothing.
///
/// ```
/// # fn main() -> roformer::Result<()> {
/// let config = roformer::Config::from_json(r#"{"hidden_size": 128, "num_attention_heads": 4, "num_hidden_layers": 2}"#)?;
/// assert_eq!((config.head_dim(), config.vocab_size), (32, 50000));
/// // A value the model cannot run with is an error naming the field.
/// let e = roformer::Config::from_json(r#"{"hidden_size": 100, "num_attention_heads": 3}"#).unwrap_err();
/// assert!(e.to_string().contains("hidden_size"));
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Config {
    /// Tokens in the vocabulary (rows of the word embeddings).
    #[serde(default = "d::vocab_size")]
    pub vocab_size: usize,
    /// Width of the embeddings; `None` means `hidden_size` (see [`Config::embedding_size`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub embedding_size: Option<usize>,
    /// Width of the hidden states.
    #[serde(default = "d::hidden_size")]
    pub hidden_size: usize,
    /// Transformer layers.
    #[serde(default = "d::num_hidden_layers")]
    pub num_hidden_layers: usize,
    /// Attention heads per layer.
    #[serde(default = "d::num_attention_heads")]
    pub num_attention_heads: usize,
    /// Width of the feed-forward block.
    #[serde(default = "d::intermediate_size")]
    pub intermediate_size: usize,
    /// Activation of the feed-forward block and of the classification head.
    #[serde(default = "d::hidden_act")]
    pub hidden_act: Activation,
    /// Dropout after embeddings and sublayers, in training.
    #[serde(default = "d::dropout")]
    pub hidden_dropout_prob: f64,
    /// Dropout on attention probabilities, in training.
    #[serde(default = "d::dropout")]
    pub attention_probs_dropout_prob: f64,
    /// The length the model was trained for; longer inputs still run (RoPE extrapolates).
    #[serde(default = "d::max_position_embeddings")]
    pub max_position_embeddings: usize,
    /// Segment types (2: sentence A and B).
    #[serde(default = "d::type_vocab_size")]
    pub type_vocab_size: usize,
    /// Standard deviation of the random init of weights.
    #[serde(default = "d::initializer_range")]
    pub initializer_range: f64,
    /// Epsilon of every norm.
    #[serde(default = "d::layer_norm_eps")]
    pub layer_norm_eps: f64,
    /// Id of the padding token.
    #[serde(default = "d::pad_token_id")]
    pub pad_token_id: Option<u32>,
    /// Whether values are rotated too, not only queries and keys.
    #[serde(default)]
    pub rotary_value: bool,
    /// Set for causal-LM checkpoints; only [`crate::RoFormerForCausalLM`] masks the future.
    #[serde(default)]
    pub is_decoder: bool,
    /// Label names by class id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id2label: Option<BTreeMap<usize, String>>,
    /// Class ids by label name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label2id: Option<BTreeMap<String, usize>>,
    /// Explicit label count; otherwise the size of `id2label`, else 2 (see [`Config::num_labels`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub num_labels: Option<usize>,
    /// What a sequence-classification head computes; inferred when absent (see [`Config::problem_type`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub problem_type: Option<ProblemType>,
    /// The model classes the checkpoint was saved from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub architectures: Option<Vec<String>>,
    /// Activation of junnyu's pooler (`linear` in the sim checkpoints; `tanh` when absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pooler_activation: Option<Activation>,
    /// junnyu's norm choice; `rms_norm` selects RoFormer v2.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub norm_type: Option<NormType>,
    /// Whether linear layers carry a bias (false in RoFormer v2).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub use_bias: Option<bool>,
    /// Multiple choice: which token summarises a choice.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary_type: Option<SummaryType>,
    /// Multiple choice: a projection after the summary.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary_use_proj: Option<bool>,
    /// Multiple choice: the projection maps to num_labels rather than hidden_size.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary_proj_to_labels: Option<bool>,
    /// Multiple choice: an activation after the summary.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary_activation: Option<Activation>,
    /// The precision the encoder's linear layers are built in, as transformers'
    /// `from_pretrained` takes a quantization config. Set before loading
    /// ([`crate::PipelineOptions::quantization`] does), it quantizes the weights layer by layer as
    /// they load, so the model never holds all of them in f32 at once. Not part of config.json.
    #[serde(skip)]
    pub quantization: Quantization,
    /// Every other key of the file, kept so that a saved config loses nothing.
    #[serde(flatten)]
    pub extra: serde_json::Map<String, serde_json::Value>,
}

mod d {
    use crate::runtime::activation::Activation;
    pub fn vocab_size() -> usize {
        50000
    }
    pub fn hidden_size() -> usize {
        768
    }
    pub fn num_hidden_layers() -> usize {
        12
    }
    pub fn num_attention_heads() -> usize {
        12
    }
    pub fn intermediate_size() -> usize {
        3072
    }
    pub fn hidden_act() -> Activation {
        Activation::Gelu
    }
    pub fn dropout() -> f64 {
        0.1
    }
    pub fn max_position_embeddings() -> usize {
        1536
    }
    pub fn type_vocab_size() -> usize {
        2
    }
    pub fn initializer_range() -> f64 {
        0.02
    }
    pub fn layer_norm_eps() -> f64 {
        1e-12
    }
    pub fn pad_token_id() -> Option<u32> {
        Some(0)
    }
}

impl Default for Config {
    /// `RoFormerConfig()`: the junnyu/roformer_chinese_base shape.
    fn default() -> Self {
        serde_json::from_str("{}").expect("every field has a default")
    }
}

impl Config {
    /// Reads and validates a `config.json`.
    pub fn from_file(path: impl AsRef<Path>) -> Result<Self> {
        let path = path.as_ref();
        let text = std::fs::read_to_string(path).map_err(|e| Error::io(path, e))?;
        Self::from_json_at(&text, path)
    }

    /// Reads and validates the `config.json` of a model folder on disk or in memory.
    pub fn from_files(files: &ModelFiles) -> Result<Self> {
        let path = files.path("config.json");
        let bytes = files.read("config.json")?;
        let text = std::str::from_utf8(&bytes)
            .map_err(|e| Error::io(&path, std::io::Error::new(std::io::ErrorKind::InvalidData, e)))?;
        Self::from_json_at(text, &path)
    }

    /// [`Config::from_json`], with errors naming the file the text came from.
    fn from_json_at(text: &str, path: &Path) -> Result<Self> {
        Self::from_json(text).map_err(|e| match e {
            Error::Config { field, message, .. } => {
                Error::Config { path: Some(path.to_path_buf()), field, message }
            }
            other => other,
        })
    }

    /// Parses and validates a config from JSON text.
    pub fn from_json(text: &str) -> Result<Self> {
        let de = &mut serde_json::Deserializer::from_str(text);
        let config: Config = serde_path_to_error::deserialize(de).map_err(|e| {
            let field = e.path().to_string();
            let field = if field == "." || field == "?" { String::new() } else { field };
            Error::config(&field, e.into_inner().to_string())
        })?;
        config.validate()?;
        Ok(config)
    }

    /// Writes the config as pretty JSON.
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).expect("a config always serialises")
    }

    /// Checks the relations between fields that serde cannot.
    pub fn validate(&self) -> Result<()> {
        let positive = [
            ("vocab_size", self.vocab_size),
            ("hidden_size", self.hidden_size),
            ("num_hidden_layers", self.num_hidden_layers),
            ("num_attention_heads", self.num_attention_heads),
            ("intermediate_size", self.intermediate_size),
            ("max_position_embeddings", self.max_position_embeddings),
            ("type_vocab_size", self.type_vocab_size),
        ];
        for (field, value) in positive {
            if value == 0 {
                return Err(Error::config(field, "must be at least 1"));
            }
        }
        if self.embedding_size == Some(0) {
            return Err(Error::config("embedding_size", "must be at least 1"));
        }
        self.check_sizes()?;
        if !self.hidden_size.is_multiple_of(self.num_attention_heads) {
            return Err(Error::config(
                "num_attention_heads",
                format!(
                    "hidden_size {} is not divisible by num_attention_heads {}",
                    self.hidden_size, self.num_attention_heads
                ),
            ));
        }
        if !self.head_dim().is_multiple_of(2) {
            return Err(Error::config(
                "num_attention_heads",
                format!(
                    "head dimension {} (hidden_size / num_attention_heads) must be even for rotary embeddings",
                    self.head_dim()
                ),
            ));
        }
        if self.layer_norm_eps.is_nan() || self.layer_norm_eps <= 0.0 {
            return Err(Error::config("layer_norm_eps", "must be positive"));
        }
        for (field, p) in [
            ("hidden_dropout_prob", self.hidden_dropout_prob),
            ("attention_probs_dropout_prob", self.attention_probs_dropout_prob),
        ] {
            if !(0.0..1.0).contains(&p) {
                return Err(Error::config(field, format!("{p} is not a probability in [0, 1)")));
            }
        }
        self.rope()?;
        if let Some(id2label) = &self.id2label {
            if let Some(n) = self.num_labels {
                if n != id2label.len() {
                    return Err(Error::config(
                        "num_labels",
                        format!("{n} disagrees with the {} entries of id2label", id2label.len()),
                    ));
                }
            }
            if let Some(bad) = id2label.keys().find(|&&k| k >= id2label.len()) {
                return Err(Error::config("id2label", format!("label id {bad} is out of range")));
            }
        }
        Ok(())
    }

    /// The weight counts the sizes imply, in checked arithmetic: a size so large that a tensor
    /// could not be addressed is refused here, naming it, before anything is allocated.
    fn check_sizes(&self) -> Result<()> {
        const LIMIT: usize = isize::MAX as usize / 8;
        let too_large = |field: &str| {
            Error::config(field, format!("the tensor sizes it implies overflow (more than {LIMIT} elements)"))
        };
        let product = |field: &str, a: usize, b: usize| {
            a.checked_mul(b).filter(|&n| n <= LIMIT).ok_or_else(|| too_large(field))
        };
        let embedding = self.embedding_size.unwrap_or(self.hidden_size);
        product("vocab_size", self.vocab_size, embedding)?;
        product("type_vocab_size", self.type_vocab_size, embedding)?;
        if self.embedding_size.is_some() {
            product("embedding_size", embedding, self.hidden_size)?;
        }
        let attention = product("hidden_size", self.hidden_size, self.hidden_size)?;
        let ffn = product("intermediate_size", self.intermediate_size, self.hidden_size)?;
        let layer = attention
            .checked_mul(4)
            .and_then(|a| ffn.checked_mul(2).and_then(|f| a.checked_add(f)))
            .ok_or_else(|| too_large("intermediate_size"))?;
        product("num_hidden_layers", layer, self.num_hidden_layers)?;
        Ok(())
    }

    /// The RoPE scaling this config asks for: `rope_scaling`, or transformers 5's `rope_parameters`
    /// (`rope_type` or `type`: linear, dynamic, yarn; `default` means none).
    pub fn rope_scaling(&self) -> Result<Option<RopeScaling>> {
        Ok(self.rope()?.0)
    }

    /// The rotary base: `rope_theta` inside the scaling dict, else at the top level, else 10000.
    /// Another base with the default type is NTK-aware scaling with a fixed base.
    pub fn rope_theta(&self) -> Result<f64> {
        Ok(self.rope()?.1)
    }

    /// Sets or clears the RoPE scaling; a saved config holds it as `rope_scaling`.
    pub fn set_rope_scaling(&mut self, scaling: Option<RopeScaling>) {
        match scaling {
            Some(scaling) => {
                self.extra.insert("rope_scaling".into(), scaling.to_json());
            }
            None => {
                self.extra.remove("rope_scaling");
            }
        }
        // transformers lets `rope_scaling` win over `rope_parameters`; keep only the base of the latter.
        if let Some(serde_json::Value::Object(parameters)) = self.extra.get_mut("rope_parameters") {
            parameters.retain(|k, _| k == "rope_theta");
        }
    }

    fn rope(&self) -> Result<(Option<RopeScaling>, f64)> {
        let mut theta = None;
        let mut scaling = None;
        for key in ["rope_parameters", "rope_scaling"] {
            match self.extra.get(key) {
                None | Some(serde_json::Value::Null) => {}
                Some(value) => {
                    let (s, t) = RopeScaling::from_json(value).map_err(|m| Error::config(key, m))?;
                    theta = t.or(theta);
                    if s.is_some() || key == "rope_scaling" {
                        scaling = s;
                    }
                }
            }
        }
        let theta = match theta {
            Some(t) => t,
            None => match self.extra.get("rope_theta") {
                None | Some(serde_json::Value::Null) => 10000.0,
                Some(v) => v.as_f64().ok_or_else(|| Error::config("rope_theta", "must be a number"))?,
            },
        };
        if !(theta.is_finite() && theta > 1.0) {
            return Err(Error::config("rope_theta", format!("{theta} must be a number above 1")));
        }
        Ok((scaling, theta))
    }

    /// Width of the embeddings: `embedding_size`, else `hidden_size`.
    pub fn embedding_size(&self) -> usize {
        self.embedding_size.unwrap_or(self.hidden_size)
    }

    /// Width of one attention head.
    pub fn head_dim(&self) -> usize {
        self.hidden_size / self.num_attention_heads
    }

    /// Number of labels of a classification head, as transformers counts them.
    pub fn num_labels(&self) -> usize {
        self.num_labels.or(self.id2label.as_ref().map(|m| m.len())).unwrap_or(2)
    }

    /// The label name of class `id`: `id2label[id]`, else `LABEL_{id}` as transformers names them.
    pub fn label(&self, id: usize) -> String {
        self.id2label.as_ref().and_then(|m| m.get(&id).cloned()).unwrap_or_else(|| format!("LABEL_{id}"))
    }

    /// The problem type, inferred as transformers does when the config does not say.
    pub fn problem_type(&self) -> ProblemType {
        self.problem_type.unwrap_or(if self.num_labels() == 1 {
            ProblemType::Regression
        } else {
            ProblemType::SingleLabelClassification
        })
    }

    /// The norm of every layer: LayerNorm unless the config asks for RoFormer v2's RMS norm.
    pub fn norm_type(&self) -> NormType {
        self.norm_type.unwrap_or_default()
    }

    /// Whether the encoder's linear layers carry biases (not in RoFormer v2).
    pub fn use_bias(&self) -> bool {
        self.use_bias.unwrap_or(true)
    }

    /// The activation of junnyu's pooler. Only the sim checkpoints carry a pooler, and their
    /// authors run it linear, while their published configs may omit the key: linear by default.
    pub fn pooler_activation(&self) -> Activation {
        self.pooler_activation.unwrap_or(Activation::Linear)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn field_of(json: &str) -> String {
        match Config::from_json(json) {
            Err(Error::Config { field, .. }) => field,
            other => panic!("expected a config error for {json}, got {other:?}"),
        }
    }

    #[test]
    fn validation_names_the_field() {
        assert_eq!(field_of(r#"{"hidden_size": 30, "num_attention_heads": 4}"#), "num_attention_heads");
        assert_eq!(field_of(r#"{"hidden_size": 36, "num_attention_heads": 4}"#), "num_attention_heads");
        assert_eq!(field_of(r#"{"layer_norm_eps": 0}"#), "layer_norm_eps");
        assert_eq!(field_of(r#"{"hidden_dropout_prob": 1.0}"#), "hidden_dropout_prob");
        assert_eq!(field_of(r#"{"embedding_size": 0}"#), "embedding_size");
        assert_eq!(field_of(r#"{"num_labels": 3, "id2label": {"0": "a", "1": "b"}}"#), "num_labels");
        assert_eq!(field_of(r#"{"summary_activation": "gelu_magic"}"#), "summary_activation");
        assert!(Config::from_json(r#"{"hidden_size": 64, "num_attention_heads": 4}"#).is_ok());
    }

    #[test]
    fn derived_values_follow_transformers() {
        let c =
            Config::from_json(r#"{"hidden_size": 64, "num_attention_heads": 4, "num_labels": 1}"#).unwrap();
        assert_eq!((c.head_dim(), c.embedding_size()), (16, 64));
        assert_eq!(c.problem_type(), ProblemType::Regression);
        let c = Config::from_json(r#"{"id2label": {"0": "a", "1": "b", "2": "c"}}"#).unwrap();
        assert_eq!((c.num_labels(), c.label(2).as_str(), c.label(7).as_str()), (3, "c", "LABEL_7"));
        assert_eq!(c.problem_type(), ProblemType::SingleLabelClassification);
        assert_eq!(
            (c.norm_type(), c.use_bias(), c.pooler_activation()),
            (NormType::LayerNorm, true, Activation::Linear)
        );
        let v2 = Config::from_json(r#"{"norm_type": "rms", "use_bias": false}"#).unwrap();
        assert_eq!((v2.norm_type(), v2.use_bias()), (NormType::RmsNorm, false));
    }

    #[test]
    fn rope_scaling_reads_both_key_forms_and_names_bad_fields() {
        let c = Config::from_json(r#"{"rope_scaling": {"type": "linear", "factor": 2.0}}"#).unwrap();
        assert_eq!(c.rope_scaling().unwrap(), Some(RopeScaling::Linear { factor: 2.0 }));
        let c = Config::from_json(r#"{"rope_parameters": {"rope_type": "default", "rope_theta": 40000.0}}"#)
            .unwrap();
        assert_eq!((c.rope_scaling().unwrap(), c.rope_theta().unwrap()), (None, 40000.0));
        let c = Config::from_json(
            r#"{"rope_theta": 5e5, "rope_scaling": {"rope_type": "dynamic", "factor": 4}}"#,
        )
        .unwrap();
        assert_eq!(
            (c.rope_scaling().unwrap(), c.rope_theta().unwrap()),
            (Some(RopeScaling::Dynamic { factor: 4.0 }), 5e5)
        );
        assert_eq!(field_of(r#"{"rope_scaling": {"rope_type": "linear"}}"#), "rope_scaling");
        assert_eq!(field_of(r#"{"rope_scaling": {"rope_type": "longrope", "factor": 2}}"#), "rope_scaling");
        assert_eq!(field_of(r#"{"rope_scaling": {"rope_type": "linear", "factor": 0.5}}"#), "rope_scaling");
        assert_eq!(field_of(r#"{"rope_theta": 0.5}"#), "rope_theta");
        // Read as no scaling, and as truncating, before.
        assert_eq!(field_of(r#"{"rope_scaling": {"rope_type": 2, "factor": 2}}"#), "rope_scaling");
        assert_eq!(
            field_of(r#"{"rope_scaling": {"rope_type": "yarn", "factor": 2, "truncate": "no"}}"#),
            "rope_scaling"
        );
        // An override is saved as rope_scaling and read back.
        let mut c = Config::default();
        c.set_rope_scaling(Some("yarn:4".parse().unwrap()));
        let again = Config::from_json(&c.to_json()).unwrap();
        assert!(matches!(again.rope_scaling().unwrap(), Some(RopeScaling::Yarn(y)) if y.factor == 4.0));
    }
}
