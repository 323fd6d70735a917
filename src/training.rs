//! Fine-tuning sequence classification on Candle's autograd: AdamW with warmup and linear decay,
//! dropout in training only, gradient clipping, seeded shuffling, length-bucketed batches, and
//! saving in the Hugging Face layout.
//!
//! ```no_run
//! # fn main() -> roformer::Result<()> {
//! use roformer::training::{Example, Trainer};
//! # let (config, train): (roformer::Config, Vec<Example>) = unimplemented!();
//! let mut trainer = Trainer::builder(config).epochs(3).learning_rate(5e-5).build(train.len())?;
//! for _ in 0..3 {
//!     for batch in trainer.batches(&train) {
//!         trainer.train_step(&train, &batch)?;
//!     }
//! }
//! # Ok(())
//! # }
//! ```

use std::collections::BTreeMap;
use std::path::Path;

use candle_core::{DType, Device, Tensor, Var, D};
use candle_nn::{AdamW, Optimizer, ParamsAdamW, VarBuilder, VarMap};

pub use crate::loading::tokenizer::wordpiece::train_wordpiece;

use crate::error::{Error, Result};
use crate::loading::checkpoint::Checkpoint;
use crate::loading::config::{Config, ProblemType};
use crate::loading::layout::SAFETENSORS;
use crate::loading::tokenizer::{Encoded, Tokenizer};
use crate::model::batching::{run_by_length, Batch};
use crate::model::heads::RoFormerForSequenceClassification;
use crate::model::layers::{DropoutRng, SplitMix64};

/// The target of one example.
#[derive(Debug, Clone, PartialEq)]
pub enum Target {
    /// Single-label classification: the class id.
    Class(usize),
    /// Regression: the value.
    Value(f32),
    /// Multi-label classification: the ids of every label that applies.
    Labels(Vec<usize>),
}

/// One training or evaluation example, already tokenized.
#[derive(Debug, Clone)]
pub struct Example {
    /// The tokenized input.
    pub encoding: Encoded,
    /// What the model should predict.
    pub target: Target,
}

/// Builds a [`Trainer`]; the defaults are transformers' Trainer's where it has them.
#[derive(Debug, Clone)]
#[must_use]
pub struct TrainerBuilder {
    config: Config,
    init: Option<Checkpoint>,
    epochs: usize,
    batch_size: usize,
    learning_rate: f64,
    warmup_ratio: f64,
    weight_decay: f64,
    max_grad_norm: f64,
    seed: u64,
    pad_id: u32,
    device: Device,
}

impl TrainerBuilder {
    /// Starts from these weights (a pretrained encoder, say; its head may be absent) instead of
    /// random init.
    pub fn init_from(mut self, checkpoint: &Checkpoint) -> Self {
        self.init = Some(checkpoint.clone());
        self
    }

    /// 3 by default.
    pub fn epochs(mut self, epochs: usize) -> Self {
        self.epochs = epochs;
        self
    }

    /// 32 by default.
    pub fn batch_size(mut self, batch_size: usize) -> Self {
        self.batch_size = batch_size;
        self
    }

    /// The peak learning rate, 5e-5 by default.
    pub fn learning_rate(mut self, learning_rate: f64) -> Self {
        self.learning_rate = learning_rate;
        self
    }

    /// Fraction of all steps spent warming the learning rate up from 0 (0.06).
    pub fn warmup_ratio(mut self, warmup_ratio: f64) -> Self {
        self.warmup_ratio = warmup_ratio;
        self
    }

    /// AdamW's weight decay, not applied to biases and norms (0.01).
    pub fn weight_decay(mut self, weight_decay: f64) -> Self {
        self.weight_decay = weight_decay;
        self
    }

    /// Gradients are scaled down together past this global norm (1.0); 0 turns clipping off.
    pub fn max_grad_norm(mut self, max_grad_norm: f64) -> Self {
        self.max_grad_norm = max_grad_norm;
        self
    }

    /// Seeds shuffling and dropout (42).
    pub fn seed(mut self, seed: u64) -> Self {
        self.seed = seed;
        self
    }

    /// The id batches are padded with (0, BERT's `[PAD]`).
    pub fn pad_id(mut self, pad_id: u32) -> Self {
        self.pad_id = pad_id;
        self
    }

    /// Trains on `device` (CPU by default).
    pub fn device(mut self, device: &Device) -> Self {
        self.device = device.clone();
        self
    }

    /// The trainer, with its learning-rate schedule planned for `examples_per_epoch` examples.
    pub fn build(self, examples_per_epoch: usize) -> Result<Trainer> {
        let config = self.config;
        config.validate()?;
        // Each option is named alone: an infinite learning rate or a NaN would train weights into
        // NaN and save them without a word.
        let (lr, warmup, decay) = (self.learning_rate, self.warmup_ratio, self.weight_decay);
        if self.epochs == 0 {
            return Err(Error::at_least_one("epochs"));
        }
        if self.batch_size == 0 {
            return Err(Error::at_least_one("batch_size"));
        }
        if !(lr > 0.0 && lr.is_finite()) {
            return Err(Error::option(
                "learning_rate",
                format!("learning_rate {lr} must be positive and finite"),
            ));
        }
        if !(0.0..1.0).contains(&warmup) {
            return Err(Error::option("warmup_ratio", format!("warmup_ratio {warmup} must be in [0, 1)")));
        }
        if !(decay >= 0.0 && decay.is_finite()) {
            let message = format!("weight_decay {decay} must be a finite number, 0 or more");
            return Err(Error::option("weight_decay", message));
        }
        if self.max_grad_norm.is_nan() {
            return Err(Error::option(
                "max_grad_norm",
                "max_grad_norm NaN is not a norm (0 turns clipping off)",
            ));
        }
        let device = self.device;
        let varmap = VarMap::new();
        let vb = VarBuilder::from_varmap(&varmap, DType::F32, &device);
        let model = RoFormerForSequenceClassification::load(vb, &config)?;
        {
            let vars = varmap.data().lock().map_err(|_| Error::Input("variable map poisoned".into()))?;
            // Candle's CPU generator cannot be seeded, so random init is drawn here, in name
            // order, from the trainer's own generator: the same seed gives the same run.
            let mut rng = SplitMix64::new(self.seed ^ 0x1A17);
            let mut names: Vec<&String> = vars.keys().collect();
            names.sort();
            for name in names {
                let var = &vars[name];
                let init = self.init.as_ref().map(|c| c.find(name)).transpose()?.flatten();
                let value = match init {
                    Some(t) if t.dims() != var.dims() => {
                        return Err(Error::ShapeMismatch {
                            path: self.init.as_ref().map(|c| c.path().to_path_buf()).unwrap_or_default(),
                            tensor: name.clone(),
                            expected: var.dims().to_vec(),
                            found: t.dims().to_vec(),
                        });
                    }
                    Some(t) => t.to_dtype(DType::F32)?,
                    None => initial_value(name, var.shape(), config.initializer_range, &mut rng)?,
                };
                var.set(&value.to_device(&device)?)?;
            }
        }
        let params =
            ParamsAdamW { lr: self.learning_rate, weight_decay: self.weight_decay, ..Default::default() };
        let (decay, no_decay) = optimizers(&varmap, params)?;
        let total_steps = self.epochs * examples_per_epoch.div_ceil(self.batch_size);
        Ok(Trainer {
            model,
            config,
            varmap,
            decay,
            no_decay,
            dropout: DropoutRng::new(self.seed),
            rng: SplitMix64::new(self.seed),
            step: 0,
            total_steps,
            peak_learning_rate: self.learning_rate,
            warmup_ratio: self.warmup_ratio,
            max_grad_norm: self.max_grad_norm,
            batch_size: self.batch_size,
            device,
            pad_id: self.pad_id,
        })
    }
}

/// A sequence classifier whose weights are trainable variables.
pub struct Trainer {
    model: RoFormerForSequenceClassification,
    config: Config,
    varmap: VarMap,
    decay: AdamW,
    no_decay: AdamW,
    dropout: DropoutRng,
    rng: SplitMix64,
    step: usize,
    total_steps: usize,
    peak_learning_rate: f64,
    warmup_ratio: f64,
    max_grad_norm: f64,
    batch_size: usize,
    device: Device,
    pad_id: u32,
}

impl Trainer {
    /// A builder for a classifier of `config`, initialised as transformers initialises one.
    pub fn builder(config: Config) -> TrainerBuilder {
        TrainerBuilder {
            config,
            init: None,
            epochs: 3,
            batch_size: 32,
            learning_rate: 5e-5,
            warmup_ratio: 0.06,
            weight_decay: 0.01,
            max_grad_norm: 1.0,
            seed: 42,
            pad_id: 0,
            device: Device::Cpu,
        }
    }

    /// The model being trained; its forward is differentiable.
    pub fn model(&self) -> &RoFormerForSequenceClassification {
        &self.model
    }

    /// The configuration being trained.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// Steps taken so far.
    pub fn step(&self) -> usize {
        self.step
    }

    /// The learning rate of the next step: linear warmup to the peak, then linear decay to 0.
    pub fn learning_rate(&self) -> f64 {
        learning_rate_at(self.step, self.total_steps, self.warmup_ratio, self.peak_learning_rate)
    }

    /// Batches of similar length, in a seeded random order.
    pub fn batches(&mut self, examples: &[Example]) -> Vec<Vec<usize>> {
        let bs = self.batch_size;
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

    /// One optimisation step on the examples at indices `batch`; returns the loss before the step.
    pub fn train_step(&mut self, examples: &[Example], batch: &[usize]) -> Result<f32> {
        if let Some(&bad) = batch.iter().find(|&&i| i >= examples.len()) {
            return Err(Error::Input(format!("batch index {bad} is past the {} examples", examples.len())));
        }
        let encodings: Vec<&Encoded> = batch.iter().map(|&i| &examples[i].encoding).collect();
        let inputs = Batch::new(&encodings, self.pad_id, &self.device, false)?;
        let targets: Vec<&Target> = batch.iter().map(|&i| &examples[i].target).collect();
        let targets = self.targets(&targets)?;
        let logits = self.model.run(&inputs, Some(&self.dropout))?;
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
        run_by_length(&encodings, batch_size, self.pad_id, &self.device, false, |batch, _| {
            Ok(self.model.run(batch, None)?.detach().to_vec2::<f32>()?)
        })
    }

    /// The targets of a batch as the loss takes them.
    fn targets(&self, targets: &[&Target]) -> Result<Tensor> {
        let n = self.config.num_labels();
        let class = |c: usize| {
            if c < n {
                Ok(c)
            } else {
                Err(Error::Input(format!("label id {c} is out of range for a model with {n} labels")))
            }
        };
        let wrong =
            |t: &Target, want: &str| Error::Input(format!("a {want} head needs other targets than {t:?}"));
        let dev = &self.device;
        Ok(match self.config.problem_type() {
            ProblemType::SingleLabelClassification => {
                let t = targets
                    .iter()
                    .map(|t| match t {
                        Target::Class(c) => class(*c).map(|c| c as u32),
                        other => Err(wrong(other, "single-label")),
                    })
                    .collect::<Result<Vec<u32>>>()?;
                Tensor::new(t, dev)?
            }
            ProblemType::Regression => {
                let t = targets
                    .iter()
                    .map(|t| match t {
                        Target::Value(v) => Ok(*v),
                        other => Err(wrong(other, "regression")),
                    })
                    .collect::<Result<Vec<f32>>>()?;
                Tensor::new(t, dev)?
            }
            ProblemType::MultiLabelClassification => {
                let mut t = vec![0f32; targets.len() * n];
                for (row, target) in targets.iter().enumerate() {
                    let ids: &[usize] = match target {
                        Target::Labels(ids) => ids,
                        Target::Class(c) => std::slice::from_ref(c),
                        other => return Err(wrong(other, "multi-label")),
                    };
                    for &id in ids {
                        t[row * n + class(id)?] = 1.0;
                    }
                }
                Tensor::from_vec(t, (targets.len(), n), dev)?
            }
        })
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
        if self.max_grad_norm <= 0.0 {
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
        if norm > self.max_grad_norm {
            let scale = self.max_grad_norm / (norm + 1e-6);
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
        let weights = dir.join(SAFETENSORS);
        self.varmap.save(&weights).map_err(|e| Error::Checkpoint {
            path: weights.clone(),
            message: "cannot write the weights".into(),
            source: Some(Box::new(e)),
        })?;
        tokenizer.save(dir)
    }
}

/// Linear warmup over `warmup_ratio` of the steps to `peak`, then linear decay to 0 at the last.
fn learning_rate_at(step: usize, total_steps: usize, warmup_ratio: f64, peak: f64) -> f64 {
    let total = total_steps.max(1) as f64;
    let warmup = (warmup_ratio * total).round().max(1.0);
    let step = step as f64;
    let factor = if step < warmup {
        (step + 1.0) / warmup
    } else {
        ((total - step) / (total - warmup).max(1.0)).max(0.0)
    };
    peak * factor
}

/// transformers' init of a parameter by its name: zero biases, unit norm weights, and
/// normal(0, initializer_range) for every other weight.
fn initial_value(name: &str, shape: &candle_core::Shape, std: f64, rng: &mut SplitMix64) -> Result<Tensor> {
    let n = shape.elem_count();
    let values: Vec<f32> = if name.ends_with("bias") || name.ends_with("beta") {
        vec![0.0; n]
    } else if name.contains("LayerNorm") {
        vec![1.0; n]
    } else {
        (0..n).map(|_| (rng.next_normal() * std) as f32).collect()
    };
    Ok(Tensor::from_vec(values, shape, &Device::Cpu)?)
}

/// AdamW for weights, and AdamW without weight decay for biases and norms, as transformers does.
fn optimizers(varmap: &VarMap, params: ParamsAdamW) -> Result<(AdamW, AdamW)> {
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
    Ok((
        AdamW::new(decay, params.clone())?,
        AdamW::new(no_decay, ParamsAdamW { weight_decay: 0.0, ..params })?,
    ))
}

#[cfg(test)]
mod tests {
    use super::learning_rate_at;

    #[test]
    fn schedule_warms_up_then_decays_to_zero() {
        // 100 steps, 10 of warmup.
        let rates: Vec<f64> = (0..100).map(|s| learning_rate_at(s, 100, 0.1, 1.0)).collect();
        assert!((rates[0] - 0.1).abs() < 1e-12, "step 0 of a 10-step warmup");
        assert!((rates[9] - 1.0).abs() < 1e-12, "the peak at the end of warmup");
        assert!(rates.windows(2).take(9).all(|w| w[1] > w[0]));
        assert!(rates.windows(2).skip(10).all(|w| w[1] < w[0]));
        assert!((rates[99] - 1.0 / 90.0).abs() < 1e-12, "the last step before 0");
        assert_eq!(learning_rate_at(100, 100, 0.1, 1.0), 0.0);
        // No warmup still starts at the peak rather than 0.
        assert_eq!(learning_rate_at(0, 10, 0.0, 2.0), 2.0);
    }
}
