//! Fine-tuning sequence classification on Candle's autograd: AdamW with warmup and linear decay,
//! dropout in training only, gradient clipping, seeded shuffling, length-bucketed batches, and
//! saving in the Hugging Face layout.

use std::collections::BTreeMap;
use std::path::Path;

use candle_core::{DType, Device, Tensor, Var, D};
use candle_nn::{AdamW, Optimizer, ParamsAdamW, VarBuilder, VarMap};

use crate::config::{Config, ProblemType};
use crate::error::{Error, Result};
use crate::heads::RoFormerForSequenceClassification;
use crate::loading::Checkpoint;
use crate::model::Inputs;
use crate::nn::SplitMix64;
use crate::pipelines::{batch_tensors, run_by_length};
use crate::tokenizer::{Encoded, Tokenizer};

/// The target of one example.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Target {
    Class(usize),
    /// Regression value, or (multi-label) unused.
    Value(f32),
    /// Multi-label: one bit per label.
    Labels(u64),
}

/// One training or evaluation example, already tokenized.
#[derive(Debug, Clone)]
pub struct Example {
    pub encoding: Encoded,
    pub target: Target,
}

/// Optimisation settings, with the defaults of transformers' Trainer where it has them.
#[derive(Debug, Clone)]
pub struct TrainingOptions {
    pub epochs: usize,
    pub batch_size: usize,
    pub learning_rate: f64,
    /// Fraction of all steps spent warming the learning rate up from 0.
    pub warmup_ratio: f64,
    pub weight_decay: f64,
    pub max_grad_norm: f64,
    pub seed: u64,
}

impl Default for TrainingOptions {
    fn default() -> Self {
        Self {
            epochs: 3,
            batch_size: 32,
            learning_rate: 5e-5,
            warmup_ratio: 0.06,
            weight_decay: 0.01,
            max_grad_norm: 1.0,
            seed: 42,
        }
    }
}

/// A sequence classifier whose weights are trainable variables.
pub struct Trainer {
    pub model: RoFormerForSequenceClassification,
    pub config: Config,
    varmap: VarMap,
    decay: AdamW,
    no_decay: AdamW,
    options: TrainingOptions,
    rng: SplitMix64,
    step: usize,
    total_steps: usize,
    device: Device,
    pad_id: u32,
}

impl Trainer {
    /// A classifier for `config`, initialised as transformers initialises one, with the weights
    /// `init` holds copied over (a pretrained encoder, say; its head may be absent).
    pub fn new(
        config: Config,
        init: Option<&Checkpoint>,
        options: TrainingOptions,
        pad_id: u32,
        device: &Device,
    ) -> Result<Self> {
        config.validate()?;
        let varmap = VarMap::new();
        let vb = VarBuilder::from_varmap(&varmap, DType::F32, device);
        let model = RoFormerForSequenceClassification::load(vb, &config)?;
        if let Some(checkpoint) = init {
            let vars = varmap.data().lock().map_err(|_| Error::Input("variable map poisoned".into()))?;
            for (name, var) in vars.iter() {
                if let Some(t) = checkpoint.find(name)? {
                    if t.dims() != var.dims() {
                        return Err(Error::ShapeMismatch {
                            path: checkpoint.path().to_path_buf(),
                            tensor: name.clone(),
                            expected: var.dims().to_vec(),
                            found: t.dims().to_vec(),
                        });
                    }
                    var.set(&t.to_dtype(DType::F32)?.to_device(device)?)?;
                }
            }
        }
        let (decay, no_decay) = optimizers(&varmap, &options)?;
        crate::nn::seed_dropout(options.seed);
        let rng = SplitMix64::new(options.seed);
        Ok(Self {
            model,
            config,
            varmap,
            decay,
            no_decay,
            options,
            rng,
            step: 0,
            total_steps: 0,
            device: device.clone(),
            pad_id,
        })
    }

    /// Plans the learning-rate schedule for `examples_per_epoch` examples a epoch.
    pub fn plan(&mut self, examples_per_epoch: usize) {
        self.total_steps = self.options.epochs * examples_per_epoch.div_ceil(self.options.batch_size.max(1));
    }

    /// Linear warmup to the peak rate, then linear decay to 0 at the last step.
    pub fn learning_rate(&self) -> f64 {
        let total = self.total_steps.max(1) as f64;
        let warmup = (self.options.warmup_ratio * total).round().max(1.0);
        let step = self.step as f64;
        let factor = if step < warmup {
            (step + 1.0) / warmup
        } else {
            ((total - step) / (total - warmup).max(1.0)).max(0.0)
        };
        self.options.learning_rate * factor
    }

    /// Batches of similar length, in a seeded random order.
    pub fn batches(&mut self, examples: &[Example]) -> Vec<Vec<usize>> {
        let bs = self.options.batch_size.max(1);
        let mut order: Vec<usize> = (0..examples.len()).collect();
        self.rng.shuffle(&mut order);
        let mut batches = Vec::new();
        // Sorting within windows of 50 batches keeps padding low and the order still random.
        for window in order.chunks_mut(bs * 50) {
            window.sort_by_key(|&i| examples[i].encoding.len());
            batches.extend(window.chunks(bs).map(<[usize]>::to_vec));
        }
        self.rng.shuffle(&mut batches);
        batches
    }

    /// One optimisation step on `batch`; returns the loss before the step.
    pub fn train_step(&mut self, examples: &[Example], batch: &[usize]) -> Result<f32> {
        let (inputs, targets) = self.tensors(examples, batch)?;
        let inputs_ref =
            Inputs { input_ids: &inputs.0, token_type_ids: Some(&inputs.1), attention_mask: Some(&inputs.2) };
        let logits = self.model.forward_t(inputs_ref, true)?;
        let loss = self.loss(&logits, &targets)?;
        let mut grads = loss.backward()?;
        self.clip(&mut grads)?;
        let lr = self.learning_rate();
        self.decay.set_learning_rate(lr);
        self.no_decay.set_learning_rate(lr);
        self.decay.step(&grads)?;
        self.no_decay.step(&grads)?;
        self.step += 1;
        Ok(loss.to_scalar::<f32>()?)
    }

    /// Logits of examples in eval mode (no dropout), in input order.
    pub fn predict(&self, examples: &[Example], batch_size: usize) -> Result<Vec<Vec<f32>>> {
        let encodings: Vec<&Encoded> = examples.iter().map(|e| &e.encoding).collect();
        run_by_length(&encodings, batch_size, self.pad_id, &self.device, |inputs, _| {
            Ok(self.model.forward_t(inputs, false)?.detach().to_vec2::<f32>()?)
        })
    }

    fn tensors(&self, examples: &[Example], batch: &[usize]) -> Result<((Tensor, Tensor, Tensor), Tensor)> {
        let encodings: Vec<&Encoded> = batch.iter().map(|&i| &examples[i].encoding).collect();
        let inputs = batch_tensors(&encodings, self.pad_id, &self.device)?;
        let dev = &self.device;
        let targets = match self.config.problem_type() {
            ProblemType::SingleLabelClassification => {
                let t: Vec<u32> =
                    batch.iter().map(|&i| class_of(examples[i].target)).collect::<Result<_>>()?;
                Tensor::new(t, dev)?
            }
            ProblemType::Regression => {
                let t: Vec<f32> =
                    batch.iter().map(|&i| value_of(examples[i].target)).collect::<Result<_>>()?;
                Tensor::new(t, dev)?
            }
            ProblemType::MultiLabelClassification => {
                let n = self.config.num_labels();
                let t: Vec<f32> = batch
                    .iter()
                    .flat_map(|&i| {
                        let bits = match examples[i].target {
                            Target::Labels(b) => b,
                            Target::Class(c) => 1 << c,
                            Target::Value(_) => 0,
                        };
                        (0..n).map(move |k| ((bits >> k) & 1) as f32)
                    })
                    .collect();
                Tensor::from_vec(t, (batch.len(), n), dev)?
            }
        };
        Ok((inputs, targets))
    }

    /// The loss transformers uses for the problem type: cross-entropy, MSE or BCE with logits.
    pub fn loss(&self, logits: &Tensor, targets: &Tensor) -> Result<Tensor> {
        Ok(match self.config.problem_type() {
            ProblemType::SingleLabelClassification => candle_nn::loss::cross_entropy(logits, targets)?,
            ProblemType::Regression => candle_nn::loss::mse(&logits.squeeze(D::Minus1)?, targets)?,
            ProblemType::MultiLabelClassification => {
                candle_nn::loss::binary_cross_entropy_with_logit(logits, targets)?
            }
        })
    }

    /// Scales all gradients down together when their global norm exceeds max_grad_norm.
    fn clip(&self, grads: &mut candle_core::backprop::GradStore) -> Result<()> {
        if self.options.max_grad_norm <= 0.0 {
            return Ok(());
        }
        let vars = self.varmap.all_vars();
        let mut sum = 0.0f64;
        for var in &vars {
            if let Some(g) = grads.get(var) {
                sum += g.sqr()?.sum_all()?.to_scalar::<f32>()? as f64;
            }
        }
        let norm = sum.sqrt();
        if norm > self.options.max_grad_norm {
            let scale = self.options.max_grad_norm / (norm + 1e-6);
            for var in &vars {
                if let Some(g) = grads.remove(var) {
                    grads.insert(var, (g * scale)?);
                }
            }
        }
        Ok(())
    }

    /// The trainable variables by name (transformers' parameter names).
    pub fn variables(&self) -> BTreeMap<String, Var> {
        self.varmap
            .data()
            .lock()
            .map(|m| m.iter().map(|(k, v)| (k.clone(), v.clone())).collect())
            .unwrap_or_default()
    }

    /// Writes config.json (with architectures, id2label, label2id), model.safetensors and the
    /// tokenizer files: a folder that this crate and transformers both load.
    pub fn save(&self, dir: impl AsRef<Path>, tokenizer: &Tokenizer) -> Result<()> {
        let dir = dir.as_ref();
        std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
        let mut config = self.config.clone();
        config.architectures = Some(vec!["RoFormerForSequenceClassification".into()]);
        let n = config.num_labels();
        let id2label: BTreeMap<usize, String> = (0..n).map(|i| (i, config.label(i))).collect();
        config.label2id = Some(id2label.iter().map(|(i, l)| (l.clone(), *i)).collect());
        config.id2label = Some(id2label);
        config.num_labels = None;
        config.extra.insert("model_type".into(), "roformer".into());
        let path = dir.join("config.json");
        std::fs::write(&path, config.to_json()).map_err(|e| Error::io(&path, e))?;
        let weights = dir.join("model.safetensors");
        self.varmap
            .save(&weights)
            .map_err(|e| Error::Checkpoint { path: weights.clone(), message: e.to_string() })?;
        tokenizer.save(dir)
    }
}

fn class_of(t: Target) -> Result<u32> {
    match t {
        Target::Class(c) => Ok(c as u32),
        other => Err(Error::Input(format!("a single-label classifier needs class targets, got {other:?}"))),
    }
}

fn value_of(t: Target) -> Result<f32> {
    match t {
        Target::Value(v) => Ok(v),
        other => Err(Error::Input(format!("a regression head needs value targets, got {other:?}"))),
    }
}

/// AdamW for weights, and AdamW without weight decay for biases and norms, as transformers does.
fn optimizers(varmap: &VarMap, options: &TrainingOptions) -> Result<(AdamW, AdamW)> {
    let vars = varmap.data().lock().map_err(|_| Error::Input("variable map poisoned".into()))?;
    let (mut decay, mut no_decay) = (Vec::new(), Vec::new());
    let mut names: Vec<&String> = vars.keys().collect();
    names.sort();
    for name in names {
        let var = vars[name].clone();
        if name.ends_with(".bias") || name.contains("LayerNorm") {
            no_decay.push(var);
        } else {
            decay.push(var);
        }
    }
    let params =
        ParamsAdamW { lr: options.learning_rate, weight_decay: options.weight_decay, ..Default::default() };
    Ok((
        AdamW::new(decay, params.clone())?,
        AdamW::new(no_decay, ParamsAdamW { weight_decay: 0.0, ..params })?,
    ))
}
