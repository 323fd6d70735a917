//! sentence-transformers folders: `modules.json` and the modules it lists (Transformer, Pooling,
//! Dense, Normalize), `sentence_bert_config.json` and `config_sentence_transformers.json`, read
//! as sentence-transformers 6 reads them, in its own layout and in that of older releases.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use candle_core::{DType, Device, Tensor};
use serde_json::Value;

use crate::error::{Error, Result};
use crate::loading::checkpoint::Checkpoint;
use crate::loading::json::optional_bool;
use crate::loading::layout::TRANSFORMER_CONFIG_FILES;
use crate::loading::model_files::ModelFiles;
use crate::loading::tokenizer::Truncation;
use crate::model::layers::Linear;
use crate::runtime::activation::Activation;
use crate::runtime::engine::Engine;

use super::core::Pipeline;
use super::splade_pooling::SpladePooling;

/// What a sentence-transformers folder asks of the sentence encoder.
#[derive(Debug, Clone)]
pub(super) struct SentenceTransformers {
    /// The Transformer module's settings (sentence_bert_config.json).
    pub transformer: TransformerConfig,
    pub pooling: Pooling,
    /// Dense and Normalize modules after the pooling, in order.
    pub modules: Vec<Module>,
    /// Prompt texts by name.
    pub prompts: BTreeMap<String, String>,
    pub default_prompt_name: Option<String>,
    pub truncate_dim: Option<usize>,
    /// config_sentence_transformers.json, named in errors about prompts.
    pub config_path: PathBuf,
}

/// A module after the pooling.
#[derive(Debug, Clone)]
pub(super) enum Module {
    Dense(Dense),
    Normalize(Normalize),
}

impl Module {
    pub fn forward(&self, xs: &Tensor) -> Result<Tensor> {
        match self {
            Module::Dense(dense) => dense.forward(xs),
            Module::Normalize(normalize) => normalize.forward(xs),
        }
    }

    /// The length of its output for inputs of `dim`.
    pub fn out_dim(&self, dim: usize) -> usize {
        match self {
            Module::Dense(dense) => dense.out_features,
            Module::Normalize(_) => dim,
        }
    }
}

/// The module kinds this crate runs, by the class names of sentence-transformers 6 and of the
/// `sentence_transformers.models` package of older releases.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Transformer,
    Pooling,
    Dense,
    Normalize,
    SpladePooling,
}

impl Kind {
    const NAMES: [(&'static str, Kind); 12] = [
        ("sentence_transformers.base.modules.transformer.Transformer", Kind::Transformer),
        ("sentence_transformers.models.Transformer", Kind::Transformer),
        // sentence-transformers 5's masked-LM Transformer of sparse encoders; 6 names it as above.
        ("sentence_transformers.sparse_encoder.models.MLMTransformer", Kind::Transformer),
        ("sentence_transformers.sparse_encoder.modules.mlm_transformer.MLMTransformer", Kind::Transformer),
        ("sentence_transformers.sparse_encoder.modules.splade_pooling.SpladePooling", Kind::SpladePooling),
        ("sentence_transformers.sparse_encoder.models.SpladePooling", Kind::SpladePooling),
        ("sentence_transformers.sentence_transformer.modules.pooling.Pooling", Kind::Pooling),
        ("sentence_transformers.models.Pooling", Kind::Pooling),
        ("sentence_transformers.base.modules.dense.Dense", Kind::Dense),
        ("sentence_transformers.models.Dense", Kind::Dense),
        ("sentence_transformers.base.modules.normalize.Normalize", Kind::Normalize),
        ("sentence_transformers.models.Normalize", Kind::Normalize),
    ];

    fn from_type(name: &str) -> Option<Kind> {
        Self::NAMES.iter().find(|(n, _)| *n == name).map(|(_, k)| *k)
    }
}

/// The modules `modules.json` lists, in order, after the Transformer module (which must come
/// first, as the folder itself), with that module's config; `None` when the folder has none.
struct ModuleList {
    transformer: TransformerConfig,
    /// Each module's kind, subfolder, and field in `modules.json` (named in errors).
    after: Vec<(Kind, String, String)>,
    path: PathBuf,
}

impl ModuleList {
    /// `task` is what the reader makes of the Transformer module's outputs.
    fn read(files: &ModelFiles, task: Task) -> Result<Option<Self>> {
        let modules_path = files.path("modules.json");
        let Some(list) = files.read_json_if_exists("modules.json")? else { return Ok(None) };
        let entries = list.as_array().ok_or_else(|| {
            Error::config_in(&modules_path, "", "expected a list of modules ({\"type\", \"path\", ...})")
        })?;
        let mut kinds = Vec::with_capacity(entries.len());
        for (i, entry) in entries.iter().enumerate() {
            let field = |name: &str| format!("[{i}].{name}");
            let text = |name: &str| {
                entry
                    .get(name)
                    .and_then(Value::as_str)
                    .ok_or_else(|| Error::config_in(&modules_path, field(name), "missing, or not a string"))
            };
            let type_name = text("type")?;
            let kind = Kind::from_type(type_name).ok_or_else(|| {
                let known: Vec<&str> = Kind::NAMES.iter().map(|(n, _)| *n).collect();
                Error::config_in(
                    &modules_path,
                    field("type"),
                    format!("module `{type_name}` is not supported (supported: {})", known.join(", ")),
                )
            })?;
            let sub = text("path")?;
            if Path::new(sub).components().any(|c| !matches!(c, std::path::Component::Normal(_))) {
                return Err(Error::config_in(
                    &modules_path,
                    field("path"),
                    format!("`{sub}` is not a subfolder"),
                ));
            }
            kinds.push((kind, sub.to_string(), field("type")));
        }
        let mut after = kinds.into_iter();
        let transformer = match after.next() {
            Some((Kind::Transformer, sub, _)) if sub.is_empty() => TransformerConfig::read(files, task)?,
            Some((Kind::Transformer, sub, field)) => {
                return Err(Error::config_in(
                    &modules_path,
                    field,
                    format!("the Transformer module must be the folder itself, not `{sub}`"),
                ))
            }
            _ => {
                return Err(Error::config_in(
                    &modules_path,
                    "[0].type",
                    "the first module must be a Transformer",
                ))
            }
        };
        Ok(Some(Self { transformer, after: after.collect(), path: modules_path }))
    }
}

impl SentenceTransformers {
    /// The folder's modules, or `None` when it has no `modules.json`. Dense weights are loaded
    /// in f32 on `device`; `hidden_size` is what the Transformer module gives the pooling.
    /// `pooling_override`, when given, replaces the Pooling module's modes, as TEI's `--pooling` overrides
    /// `1_Pooling/config.json`; the modules after it then read vectors of that pooling's size.
    pub fn read(
        files: &ModelFiles,
        hidden_size: usize,
        device: &Device,
        pooling_override: Option<crate::pipelines::options::Pooling>,
    ) -> Result<Option<Self>> {
        let Some(ModuleList { transformer, after, path: modules_path }) =
            ModuleList::read(files, Task::FeatureExtraction)?
        else {
            return Ok(None);
        };
        let mut iter = after.into_iter();
        let mut pooling = match iter.next() {
            Some((Kind::Pooling, sub, _)) => Pooling::read(&files.sub(&sub), hidden_size)?,
            Some((Kind::SpladePooling, _, field)) => {
                return Err(Error::config_in(
                    &modules_path,
                    field,
                    "a SpladePooling module makes sparse embeddings: load the folder with SparseEncoder \
                     (roformer-serve: --pooling splade)",
                ))
            }
            Some((_, _, field)) => {
                return Err(Error::config_in(
                    &modules_path,
                    field,
                    "a Pooling module must follow the Transformer",
                ))
            }
            None => {
                return Err(Error::config_in(
                    &modules_path,
                    "",
                    "no Pooling module: the folder gives token embeddings, not sentence embeddings",
                ))
            }
        };
        if let Some(chosen) = pooling_override {
            pooling.modes = vec![match chosen {
                crate::pipelines::options::Pooling::Cls => Mode::Cls,
                crate::pipelines::options::Pooling::Mean => Mode::Mean,
                crate::pipelines::options::Pooling::Pooler => {
                    return Err(Error::option(
                        "pooling",
                        "pooling `pooler` is junnyu's pooler, for checkpoints without modules.json: a \
                         sentence-transformers folder takes `cls` or `mean` in place of its Pooling module",
                    ))
                }
            }];
        }
        let mut dim = pooling.dim(hidden_size);
        let mut modules = Vec::new();
        for (kind, sub, field) in iter {
            let module = match kind {
                Kind::Dense => {
                    let dense = Dense::read(&files.sub(&sub), dim, device)?;
                    dim = dense.out_features;
                    Module::Dense(dense)
                }
                Kind::Normalize => Module::Normalize(Normalize),
                Kind::Transformer | Kind::Pooling | Kind::SpladePooling => {
                    return Err(Error::config_in(
                        &modules_path,
                        field,
                        "only Dense and Normalize may follow the Pooling",
                    ))
                }
            };
            modules.push(module);
        }

        let config_path = files.path("config_sentence_transformers.json");
        let config =
            files.read_json_object_if_exists("config_sentence_transformers.json")?.unwrap_or(Value::Null);
        let (prompts, default_prompt_name) = read_prompts(&config, &config_path)?;
        let truncate_dim = positive(&config, &config_path, "truncate_dim")?;
        Ok(Some(Self {
            transformer,
            pooling,
            modules,
            prompts,
            default_prompt_name,
            truncate_dim,
            config_path,
        }))
    }

    /// The prompt to put before texts: `prompt` as given, else the prompt named `name`, else the
    /// folder's default prompt.
    pub fn prompt(&self, prompt: Option<&str>, name: Option<&str>) -> Result<Option<String>> {
        match (prompt, name) {
            (Some(_), Some(_)) => Err(Error::option(
                "prompt",
                "give a prompt or a prompt name, not both (with_prompt, with_prompt_name)",
            )),
            (Some(prompt), None) => Ok(Some(prompt.to_string())),
            (None, Some(name)) => named_prompt(&self.prompts, &self.config_path, name).map(Some),
            (None, None) => Ok(self.default_prompt_name.as_ref().and_then(|n| self.prompts.get(n)).cloned()),
        }
    }

    /// The length of the embeddings before any truncate_dim.
    pub fn dim(&self, hidden_size: usize) -> usize {
        self.modules.iter().fold(self.pooling.dim(hidden_size), |dim, m| m.out_dim(dim))
    }
}

/// The prompts of config_sentence_transformers.json (`config`, read from `config_path`) by name,
/// and the name of the default one.
fn read_prompts(config: &Value, config_path: &Path) -> Result<(BTreeMap<String, String>, Option<String>)> {
    let mut prompts = BTreeMap::new();
    if let Some(map) = config.get("prompts").filter(|p| !p.is_null()) {
        let map = map
            .as_object()
            .ok_or_else(|| Error::config_in(config_path, "prompts", "expected an object of prompt texts"))?;
        for (name, text) in map {
            let text = text.as_str().ok_or_else(|| {
                Error::config_in(config_path, format!("prompts.{name}"), "expected a string")
            })?;
            prompts.insert(name.clone(), text.to_string());
        }
    }
    let default_prompt_name = match config.get("default_prompt_name") {
        None | Some(Value::Null) => None,
        Some(Value::String(name)) if prompts.contains_key(name) => Some(name.clone()),
        Some(other) => {
            return Err(Error::config_in(
                config_path,
                "default_prompt_name",
                format!("{other} is not one of the prompts ({})", names(&prompts)),
            ))
        }
    };
    Ok((prompts, default_prompt_name))
}

/// The Transformer module's config of a sentence-transformers CrossEncoder folder, whose
/// `modules.json` lists that module alone; `None` without `modules.json`.
pub(super) fn cross_encoder_transformer(files: &ModelFiles) -> Result<Option<TransformerConfig>> {
    let Some(ModuleList { transformer, after, path }) =
        ModuleList::read(files, Task::SequenceClassification)?
    else {
        return Ok(None);
    };
    match after.first() {
        Some((_, _, field)) => {
            Err(Error::config_in(&path, field, "a CrossEncoder folder has no module after its Transformer"))
        }
        None => Ok(Some(transformer)),
    }
}

/// A sentence-transformers SparseEncoder folder: the masked-LM Transformer module, then
/// SpladePooling.
#[derive(Debug, Clone)]
pub(super) struct SparseFolder {
    pub transformer: TransformerConfig,
    pub pooling: SpladePooling,
}

impl SparseFolder {
    /// The folder's modules, or `None` when it has no `modules.json`.
    pub fn read(files: &ModelFiles) -> Result<Option<Self>> {
        let Some(ModuleList { transformer, after, path }) = ModuleList::read(files, Task::FillMask)? else {
            return Ok(None);
        };
        let pooling = match after.as_slice() {
            [(Kind::SpladePooling, sub, _)] => SpladePooling::read(&files.sub(sub))?,
            [] => {
                return Err(Error::config_in(
                    &path,
                    "",
                    "no SpladePooling module: the folder gives token embeddings, not sparse embeddings",
                ))
            }
            [(Kind::SpladePooling, _, _), (_, _, field), ..] => {
                return Err(Error::config_in(&path, field, "nothing may follow the SpladePooling module"))
            }
            [(_, _, field), ..] => return Err(Error::config_in(
                &path,
                field,
                "a SparseEncoder folder has a SpladePooling module here (a SentenceEncoder reads the others)",
            )),
        };
        // SparseEncoder puts no prompt before texts: a folder whose default prompt is not empty
        // would be encoded otherwise than sentence-transformers encodes it.
        let config_path = files.path("config_sentence_transformers.json");
        let config =
            files.read_json_object_if_exists("config_sentence_transformers.json")?.unwrap_or(Value::Null);
        let (prompts, default_prompt_name) = read_prompts(&config, &config_path)?;
        if let Some(name) = default_prompt_name.filter(|name| !prompts[name].is_empty()) {
            return Err(Error::Unsupported(format!(
                "{}: the default prompt `{name}` ({:?}): SparseEncoder puts no prompt before texts",
                config_path.display(),
                prompts[&name]
            )));
        }
        Ok(Some(Self { transformer, pooling }))
    }
}

/// The prompt of `prompts` called `name`; `config_path` (config_sentence_transformers.json) is
/// named when there is none.
pub(super) fn named_prompt(
    prompts: &BTreeMap<String, String>,
    config_path: &Path,
    name: &str,
) -> Result<String> {
    prompts.get(name).cloned().ok_or_else(|| Error::UnknownPrompt {
        name: name.to_string(),
        known: prompts.keys().cloned().collect(),
        path: config_path.to_path_buf(),
    })
}

fn names(prompts: &BTreeMap<String, String>) -> String {
    if prompts.is_empty() {
        "no prompts".into()
    } else {
        let names: Vec<String> = prompts.keys().map(|n| format!("`{n}`")).collect();
        format!("the prompts {}", names.join(", "))
    }
}

/// A boolean field of a module's config: `default` when absent or null.
fn flag(config: &Value, path: &Path, field: &str, default: bool) -> Result<bool> {
    Ok(optional_bool(config, field, path)?.unwrap_or(default))
}

/// A count of a config (max_seq_length, truncate_dim): `None` when absent or null, an error for
/// anything but a positive integer.
fn positive(config: &Value, path: &Path, field: &str) -> Result<Option<usize>> {
    match config.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(value) => value
            .as_u64()
            .filter(|&n| n > 0)
            .map(|n| Some(n as usize))
            .ok_or_else(|| Error::config_in(path, field, format!("{value} is not a positive integer"))),
    }
}

/// What the Transformer module's config (sentence_bert_config.json, or the files older releases
/// named after the architecture) sets.
#[derive(Debug, Clone, Copy)]
pub(super) struct TransformerConfig {
    /// When unset, sentence-transformers 6 leaves the length to the tokenizer's model_max_length.
    max_seq_length: Option<usize>,
    /// Texts are lowercased before the tokenizer's own normalizer.
    do_lower_case: bool,
}

/// The Transformer module's task in sentence-transformers 6 (`transformer_task`), which the
/// reader of a folder expects: the one output it reads, under the names that task gives it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Task {
    /// Token embeddings for a Pooling module: a SentenceEncoder folder.
    FeatureExtraction,
    /// Masked-LM logits for SpladePooling: a SparseEncoder folder.
    FillMask,
    /// A classifier's logits: a CrossEncoder folder.
    SequenceClassification,
}

impl Task {
    /// The task's name, and sentence-transformers' defaults of `modality_config`'s text output
    /// and of `module_output_name` for it.
    fn names(self) -> (&'static str, &'static str, &'static str) {
        match self {
            Task::FeatureExtraction => ("feature-extraction", "last_hidden_state", "token_embeddings"),
            Task::FillMask => ("fill-mask", "logits", "token_embeddings"),
            Task::SequenceClassification => ("sequence-classification", "logits", "scores"),
        }
    }

    /// Refuses a Transformer config that asks for another task, other outputs, or per-call
    /// processing this crate does not run; older releases set none of these fields.
    fn check(self, config: &Value, path: &Path) -> Result<()> {
        let (task, method_output, module_output) = self.names();
        let set = |field: &str| config.get(field).filter(|v| !v.is_null());
        if let Some(value) = set("transformer_task").filter(|v| v.as_str() != Some(task)) {
            let reader = match value.as_str() {
                Some("feature-extraction") => "SentenceEncoder",
                Some("fill-mask") => "SparseEncoder (roformer-serve: --pooling splade)",
                Some("sequence-classification") => "Reranker",
                _ => {
                    return Err(Error::config_in(
                        path,
                        "transformer_task",
                        format!("{value} is not supported"),
                    ))
                }
            };
            return Err(Error::config_in(
                path,
                "transformer_task",
                format!("{value}: load the folder with {reader} (this reader needs `{task}`)"),
            ));
        }
        let modality =
            serde_json::json!({"text": {"method": "forward", "method_output_name": method_output}});
        if let Some(value) = set("modality_config").filter(|v| **v != modality) {
            return Err(Error::config_in(
                path,
                "modality_config",
                format!("{value} is not supported (only {modality})"),
            ));
        }
        if let Some(value) = set("module_output_name").filter(|v| v.as_str() != Some(module_output)) {
            return Err(Error::config_in(
                path,
                "module_output_name",
                format!("{value} is not supported (only `{module_output}`)"),
            ));
        }
        if let Some(value) = set("processing_kwargs").filter(|v| v.as_object().is_none_or(|o| !o.is_empty()))
        {
            return Err(Error::config_in(
                path,
                "processing_kwargs",
                format!("{value}: per-call processing is not supported"),
            ));
        }
        for field in ["query_length", "document_length", "query_expansion"] {
            if let Some(value) = set(field) {
                return Err(Error::config_in(
                    path,
                    field,
                    format!("{value}: multi-vector settings are not supported"),
                ));
            }
        }
        Ok(())
    }
}

impl TransformerConfig {
    fn read(files: &ModelFiles, task: Task) -> Result<Self> {
        for name in TRANSFORMER_CONFIG_FILES {
            let path = files.path(name);
            let Some(config) = files.read_json_object_if_exists(name)? else { continue };
            task.check(&config, &path)?;
            let max_seq_length = positive(&config, &path, "max_seq_length")?;
            let do_lower_case = flag(&config, &path, "do_lower_case", false)?;
            return Ok(Self { max_seq_length, do_lower_case });
        }
        Ok(Self { max_seq_length: None, do_lower_case: false })
    }

    /// Sets the pipeline's tokenizer as the module does: lowercasing first, and truncating at
    /// max_seq_length unless the caller chose a max length.
    pub fn apply<M>(&self, pipeline: &mut Pipeline<M>) -> Result<()> {
        if self.do_lower_case {
            pipeline.tokenizer.lowercase_first()?;
        }
        if let (Some(max_seq_length), None) = (self.max_seq_length, pipeline.options.max_length) {
            pipeline.tokenizer.set_truncation(Some(Truncation::LongestFirst), Some(max_seq_length))?;
            pipeline.max_length = max_seq_length;
        }
        Ok(())
    }
}

/// A pooling mode of sentence-transformers' Pooling module.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Mode {
    Cls,
    Max,
    Mean,
    MeanSqrtLen,
    WeightedMean,
    LastToken,
}

impl Mode {
    /// The names of `pooling_mode`, and the `pooling_mode_*` flags of older configs, in the order
    /// older releases concatenate them.
    const NAMES: [(&'static str, &'static str, Mode); 6] = [
        ("cls", "pooling_mode_cls_token", Mode::Cls),
        ("max", "pooling_mode_max_tokens", Mode::Max),
        ("mean", "pooling_mode_mean_tokens", Mode::Mean),
        ("mean_sqrt_len_tokens", "pooling_mode_mean_sqrt_len_tokens", Mode::MeanSqrtLen),
        ("weightedmean", "pooling_mode_weightedmean_tokens", Mode::WeightedMean),
        ("lasttoken", "pooling_mode_lasttoken", Mode::LastToken),
    ];
}

/// sentence-transformers' Pooling module: one vector per mode from a sequence's token states,
/// concatenated.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Pooling {
    pub modes: Vec<Mode>,
    /// When false, the prompt's tokens ([CLS] included) are left out of the pooling.
    pub include_prompt: bool,
}

impl Pooling {
    fn read(module: &ModelFiles, hidden_size: usize) -> Result<Self> {
        let path = &module.path("config.json");
        let config = module
            .read_json_object_if_exists("config.json")?
            .ok_or_else(|| Error::config_in(path, "", "missing: the Pooling module's config"))?;
        let mode_error = |field: &str, value: &Value| {
            let known: Vec<&str> = Mode::NAMES.iter().map(|(n, _, _)| *n).collect();
            Error::config_in(path, field, format!("{value} is not a pooling mode ({})", known.join(", ")))
        };
        let by_name = |field: &str, value: &Value| {
            value
                .as_str()
                .and_then(|s| Mode::NAMES.iter().find(|(n, _, _)| *n == s))
                .map(|(_, _, m)| *m)
                .ok_or_else(|| mode_error(field, value))
        };
        let modes = match config.get("pooling_mode") {
            Some(Value::Array(list)) if !list.is_empty() => list
                .iter()
                .enumerate()
                .map(|(i, v)| by_name(&format!("pooling_mode[{i}]"), v))
                .collect::<Result<Vec<_>>>()?,
            Some(value @ (Value::String(_) | Value::Array(_))) => vec![by_name("pooling_mode", value)?],
            Some(value) => return Err(mode_error("pooling_mode", value)),
            None => {
                let mut flagged = Vec::new();
                for (_, field, mode) in Mode::NAMES {
                    if flag(&config, path, field, false)? {
                        flagged.push(mode);
                    }
                }
                if flagged.is_empty() {
                    vec![Mode::Mean]
                } else {
                    flagged
                }
            }
        };
        for field in ["embedding_dimension", "word_embedding_dimension"] {
            if let Some(value) = config.get(field) {
                if value.as_u64() != Some(hidden_size as u64) {
                    return Err(Error::config_in(
                        path,
                        field,
                        format!("{value}, but the transformer's hidden_size is {hidden_size}"),
                    ));
                }
            }
        }
        let include_prompt = flag(&config, path, "include_prompt", true)?;
        Ok(Self { modes, include_prompt })
    }

    pub fn dim(&self, hidden_size: usize) -> usize {
        self.modes.len() * hidden_size
    }

    /// One sequence's vector from its token states `xs` (tokens, hidden), in f32, leaving out
    /// the first `skip` tokens (the prompt) as sentence-transformers masks them.
    pub fn pool(&self, xs: &Tensor, skip: usize) -> Result<Tensor> {
        let (len, hidden) = xs.dims2()?;
        let start = if self.include_prompt { 0 } else { skip.min(len) };
        let kept = len - start;
        let device = xs.device();
        let zeros = || Tensor::zeros(hidden, DType::F32, device);
        let valid = xs.narrow(0, start, kept)?;
        let mut parts = Vec::with_capacity(self.modes.len());
        for mode in &self.modes {
            let part = match mode {
                // The first token the mask keeps: token 0 when it keeps none, as argmax gives.
                Mode::Cls => xs.get(if kept > 0 { start } else { 0 })?,
                Mode::Max if kept == 0 => Tensor::full(f32::NEG_INFINITY, hidden, device)?,
                Mode::Max => valid.max(0)?,
                Mode::Mean | Mode::MeanSqrtLen if kept == 0 => zeros()?,
                Mode::Mean => (valid.sum(0)? / kept as f64)?,
                Mode::MeanSqrtLen => (valid.sum(0)? / (kept as f64).sqrt())?,
                Mode::WeightedMean if kept == 0 => zeros()?,
                Mode::WeightedMean => {
                    // Weights are positions from 1, the prompt's tokens keeping theirs.
                    let weights: Vec<f32> = (start + 1..=len).map(|w| w as f32).collect();
                    let total: f32 = weights.iter().sum();
                    let weights = Tensor::from_vec(weights, (kept, 1), device)?;
                    (valid.broadcast_mul(&weights)?.sum(0)? / total as f64)?
                }
                Mode::LastToken if kept == 0 => zeros()?,
                Mode::LastToken => xs.get(len - 1)?,
            };
            parts.push(part);
        }
        Ok(Tensor::cat(&parts, 0)?)
    }

    /// The [`crate::Pooling`] that names this pooling, as far as one does.
    pub fn as_public(&self) -> crate::pipelines::options::Pooling {
        if self.modes == [Mode::Cls] {
            crate::pipelines::options::Pooling::Cls
        } else {
            crate::pipelines::options::Pooling::Mean
        }
    }
}

/// sentence-transformers' Dense module: `activation(x Wᵀ + b)`, plus `x` (or `x Rᵀ`) with
/// `use_residual`.
#[derive(Debug, Clone)]
pub(super) struct Dense {
    linear: Linear,
    residual: Option<Residual>,
    activation: Activation,
    out_features: usize,
}

#[derive(Debug, Clone)]
enum Residual {
    Identity,
    Projected(Linear),
}

impl Dense {
    fn read(module: &ModelFiles, in_dim: usize, device: &Device) -> Result<Self> {
        let path = module.path("config.json");
        let config = module
            .read_json_object_if_exists("config.json")?
            .ok_or_else(|| Error::config_in(&path, "", "missing: the Dense module's config"))?;
        let size = |field: &str| {
            config
                .get(field)
                .and_then(Value::as_u64)
                .map(|n| n as usize)
                .ok_or_else(|| Error::config_in(&path, field, "missing, or not a size"))
        };
        let (in_features, out_features) = (size("in_features")?, size("out_features")?);
        if in_features != in_dim {
            return Err(Error::config_in(
                &path,
                "in_features",
                format!("{in_features}, but the module before gives vectors of {in_dim}"),
            ));
        }
        let bias = flag(&config, &path, "bias", true)?;
        let use_residual = flag(&config, &path, "use_residual", false)?;
        for field in ["module_input_name", "module_output_name"] {
            match config.get(field) {
                None | Some(Value::Null) => {}
                Some(Value::String(name)) if name == "sentence_embedding" => {}
                Some(other) => {
                    return Err(Error::config_in(
                        &path,
                        field,
                        format!("{other}: only \"sentence_embedding\" is supported"),
                    ))
                }
            }
        }
        // sentence-transformers' Dense defaults to tanh when the config names none.
        let activation = match config.get("activation_function") {
            None => Activation::Tanh,
            Some(Value::String(name)) => torch_activation(name).ok_or_else(|| {
                Error::config_in(
                    &path,
                    "activation_function",
                    format!("`{name}` is not supported (torch.nn Tanh, Identity, ReLU, GELU or SiLU)"),
                )
            })?,
            Some(other) => {
                return Err(Error::config_in(
                    &path,
                    "activation_function",
                    format!("{other} is not the class name of a torch.nn activation"),
                ))
            }
        };
        let weights = Checkpoint::from_files(module)?;
        let tensor = |name: &str, shape: &[usize]| -> Result<Tensor> {
            let t = weights.tensor(name)?;
            if t.dims() != shape {
                return Err(Error::ShapeMismatch {
                    path: weights.path().to_path_buf(),
                    tensor: name.into(),
                    expected: shape.to_vec(),
                    found: t.dims().to_vec(),
                });
            }
            Ok(t.to_dtype(DType::F32)?.to_device(device)?)
        };
        let engine = Engine::Candle { trainable: false };
        let weight = tensor("linear.weight", &[out_features, in_features])?;
        let bias = if bias { Some(tensor("linear.bias", &[out_features])?) } else { None };
        let linear = Linear::new(weight, bias, engine)?;
        let residual = match (use_residual, in_features == out_features) {
            (false, _) => None,
            (true, true) => Some(Residual::Identity),
            (true, false) => Some(Residual::Projected(Linear::new(
                tensor("residual.weight", &[out_features, in_features])?,
                None,
                engine,
            )?)),
        };
        Ok(Self { linear, residual, activation, out_features })
    }

    fn forward(&self, xs: &Tensor) -> Result<Tensor> {
        let ys = self.linear.forward_act(xs, self.activation)?;
        Ok(match &self.residual {
            None => ys,
            Some(Residual::Identity) => (ys + xs)?,
            Some(Residual::Projected(linear)) => (ys + linear.forward_act(xs, Activation::Linear)?)?,
        })
    }
}

/// The activation of a `torch.nn` class name, as sentence-transformers saves it.
fn torch_activation(name: &str) -> Option<Activation> {
    let class = name.strip_prefix("torch.")?.rsplit('.').next()?;
    Some(match class {
        "Tanh" => Activation::Tanh,
        "Identity" => Activation::Linear,
        "ReLU" => Activation::Relu,
        "GELU" => Activation::Gelu,
        "SiLU" => Activation::Silu,
        _ => return None,
    })
}

/// sentence-transformers' Normalize module, and the unit length of [`crate::SentenceEncoder`]:
/// each row divided by its L2 norm, clamped away from zero as torch's `F.normalize`.
#[derive(Debug, Clone, Copy)]
pub(super) struct Normalize;

impl Normalize {
    pub fn forward(&self, xs: &Tensor) -> Result<Tensor> {
        let norm = xs.sqr()?.sum_keepdim(1)?.sqrt()?.clamp(1e-12, f64::INFINITY)?;
        Ok(xs.broadcast_div(&norm)?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn poolings_leave_out_the_prompt_and_keep_positions() {
        let xs = Tensor::new(&[[1f32, 0.], [3., 4.], [5., -2.], [0., 8.]], &Device::Cpu).unwrap();
        let pool = |modes: Vec<Mode>, include_prompt: bool, skip: usize| {
            Pooling { modes, include_prompt }.pool(&xs, skip).unwrap().to_vec1::<f32>().unwrap()
        };
        assert_eq!(pool(vec![Mode::Cls, Mode::LastToken], true, 2), [1., 0., 0., 8.]);
        assert_eq!(pool(vec![Mode::Cls, Mode::Max], false, 2), [5., -2., 5., 8.]);
        assert_eq!(pool(vec![Mode::Mean], false, 2), [2.5, 3.]);
        assert_eq!(pool(vec![Mode::MeanSqrtLen], true, 0), [4.5, 5.]);
        // Positions 3 and 4 weigh 3 and 4.
        let weighted = pool(vec![Mode::WeightedMean], false, 2);
        assert!(
            (weighted[0] - 15. / 7.).abs() < 1e-6 && (weighted[1] - 26. / 7.).abs() < 1e-6,
            "{weighted:?}"
        );
        assert_eq!(pool(vec![Mode::Mean, Mode::LastToken], false, 9), [0., 0., 0., 0.]);
        assert_eq!(pool(vec![Mode::Cls], false, 9), [1., 0.]);
    }

    #[test]
    fn torch_activations_by_class_name() {
        assert_eq!(torch_activation("torch.nn.modules.activation.Tanh"), Some(Activation::Tanh));
        assert_eq!(torch_activation("torch.nn.modules.linear.Identity"), Some(Activation::Linear));
        assert_eq!(torch_activation("torch.nn.modules.activation.Sigmoid"), None);
        assert_eq!(torch_activation("my.module.Tanh"), None);
    }
}
