//! Sequence classification of texts and pairs.

use std::path::Path;

use candle_core::DType;

use super::core::{shared_accessors, Pipeline};
use super::options::PipelineOptions;
use crate::error::Result;
use crate::loading::config::{Config, ProblemType};
use crate::loading::model_files::ModelFiles;
use crate::loading::tokenizer::Encoded;
use crate::model::heads::RoFormerForSequenceClassification;
use crate::runtime::scores::{argmax, sigmoid, softmax};

/// Sequence classification: single sentences or pairs; single-label, multi-label or regression,
/// as the checkpoint's config says.
///
/// ```no_run
/// # fn main() -> roformer::Result<()> {
/// let classifier = roformer::TextClassifier::from_pretrained("models/roformer-sst2")?;
/// for p in classifier.classify(&["a gorgeous , witty movie .", "not good at all"])? {
///     println!("{} {:.3}", p.label, p.score);
/// }
/// # Ok(())
/// # }
/// ```
#[derive(Debug)]
pub struct TextClassifier {
    pub(super) pipeline: Pipeline<RoFormerForSequenceClassification>,
}

/// One prediction of a sequence classifier.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct Classification {
    /// Name of the best class (id2label), or the value as text for regression.
    pub label: String,
    /// Index of the best class (0 for regression).
    pub label_id: usize,
    /// Probability of the best class; the predicted value for regression.
    pub score: f32,
    /// Softmax probabilities (single-label), sigmoid probabilities (multi-label), or the
    /// regression outputs.
    pub scores: Vec<f32>,
    /// The raw outputs of the head.
    pub logits: Vec<f32>,
    /// Whether the input was truncated to max_length.
    pub truncated: bool,
}

impl Classification {
    /// The prediction for one row of logits: softmax (single-label), sigmoid (multi-label) or the
    /// value (regression), and the best class with its label from id2label.
    pub fn from_logits(config: &Config, logits: Vec<f32>, truncated: bool) -> Self {
        let problem = config.problem_type();
        if problem == ProblemType::Regression {
            let value = logits.first().copied().unwrap_or(f32::NAN);
            let scores = logits.clone();
            return Classification {
                label: format!("{value}"),
                label_id: 0,
                score: value,
                scores,
                logits,
                truncated,
            };
        }
        let scores: Vec<f32> = if problem == ProblemType::MultiLabelClassification {
            logits.iter().copied().map(sigmoid).collect()
        } else {
            softmax(&logits)
        };
        // A NaN logit never wins silently over real numbers; ties go to the first label.
        let best = argmax(&scores);
        Classification {
            label: config.label(best),
            label_id: best,
            score: scores.get(best).copied().unwrap_or(f32::NAN),
            scores,
            logits,
            truncated,
        }
    }
}

impl TextClassifier {
    /// Loads a sequence-classification checkpoint from a folder or a Hub id, with default options.
    pub fn from_pretrained(model: impl AsRef<Path>) -> Result<Self> {
        Self::from_pretrained_with(model, PipelineOptions::default())
    }

    /// Loads a sequence-classification checkpoint from a folder or a Hub id.
    pub fn from_pretrained_with(model: impl AsRef<Path>, options: PipelineOptions) -> Result<Self> {
        Ok(Self { pipeline: Pipeline::load(model.as_ref(), options)? })
    }

    /// Loads a sequence-classification checkpoint from a model folder on disk or in memory (no
    /// Hub), as [`TextClassifier::from_pretrained_with`] loads it from a folder.
    pub fn from_files(files: &ModelFiles, options: PipelineOptions) -> Result<Self> {
        Ok(Self { pipeline: Pipeline::from_files(files, options)? })
    }

    /// The SST-2 sentiment classifier built into the crate (labels `negative` and `positive`),
    /// with default options: no file, no network.
    ///
    /// ```
    /// # fn main() -> roformer::Result<()> {
    /// let classifier = roformer::TextClassifier::bundled()?;
    /// let predictions = classifier.classify(&["a gorgeous , witty movie .", "not good at all"])?;
    /// assert_eq!((predictions[0].label.as_str(), predictions[1].label.as_str()), ("positive", "negative"));
    /// # Ok(())
    /// # }
    /// ```
    #[cfg(feature = "bundled-sst2")]
    #[cfg_attr(docsrs, doc(cfg(feature = "bundled-sst2")))]
    pub fn bundled() -> Result<Self> {
        Self::bundled_with(PipelineOptions::default())
    }

    /// The built-in SST-2 classifier, with `options` (device, dtype, quantization, threads, ...).
    #[cfg(feature = "bundled-sst2")]
    #[cfg_attr(docsrs, doc(cfg(feature = "bundled-sst2")))]
    pub fn bundled_with(options: PipelineOptions) -> Result<Self> {
        Self::from_files(&ModelFiles::bundled_sst2()?, options)
    }

    /// One prediction per text, in input order; an empty slice gives an empty result.
    pub fn classify<S: AsRef<str>>(&self, texts: &[S]) -> Result<Vec<Classification>> {
        let encodings = self.pipeline.tokenizer.encode_batch(texts)?;
        self.classify_tokenized(&encodings)
    }

    /// One prediction per pair of texts (segments A and B), in input order. A pair whose second
    /// text is empty is classified as its first text alone, as transformers' text-classification
    /// pipeline does (it tokenizes each input alone, and to Python an empty string is no pair).
    pub fn classify_pairs<A: AsRef<str>, B: AsRef<str>>(
        &self,
        pairs: &[(A, B)],
    ) -> Result<Vec<Classification>> {
        let encodings = self.pipeline.tokenizer.encode_each_pair(pairs)?;
        self.classify_tokenized(&encodings)
    }

    /// One prediction per encoding from [`Pipeline::tokenizer`], in input order.
    pub fn classify_tokenized(&self, encodings: &[Encoded]) -> Result<Vec<Classification>> {
        let pipeline = &self.pipeline;
        pipeline.run(encodings, |batch, encodings| {
            let logits = pipeline.model.run(batch, None)?.to_dtype(DType::F32)?.to_vec2::<f32>()?;
            Ok(logits
                .into_iter()
                .zip(encodings)
                .map(|(logits, e)| Classification::from_logits(&pipeline.config, logits, e.truncated))
                .collect())
        })
    }

    /// Single-label, multi-label or regression.
    pub fn problem_type(&self) -> ProblemType {
        self.pipeline.config.problem_type()
    }
}

shared_accessors!(TextClassifier, RoFormerForSequenceClassification, pipeline);

#[cfg(test)]
mod tests {
    use super::*;

    fn config(json: &str) -> Config {
        Config::from_json(json).unwrap()
    }

    #[test]
    fn logits_become_predictions_as_the_problem_type_says() {
        let single = config(r#"{"id2label": {"0": "neg", "1": "pos"}}"#);
        let p = Classification::from_logits(&single, vec![0.0, (3.0f32).ln()], true);
        assert_eq!((p.label.as_str(), p.label_id, p.truncated), ("pos", 1, true));
        assert!((p.scores[0] - 0.25).abs() < 1e-6 && (p.score - 0.75).abs() < 1e-6);

        let multi = config(r#"{"num_labels": 3, "problem_type": "multi_label_classification"}"#);
        let p = Classification::from_logits(&multi, vec![0.0, 2.0, -2.0], false);
        assert_eq!(p.label, "LABEL_1");
        assert!((p.scores[0] - 0.5).abs() < 1e-6, "sigmoid, not softmax: {:?}", p.scores);
        assert!((p.scores.iter().sum::<f32>() - 1.5).abs() < 1e-6);

        let regression = config(r#"{"num_labels": 1}"#);
        let p = Classification::from_logits(&regression, vec![3.5], false);
        assert_eq!((p.label.as_str(), p.score, p.label_id), ("3.5", 3.5, 0));

        // A NaN logit never wins over real numbers.
        let p = Classification::from_logits(&single, vec![f32::NAN, 1.0], false);
        assert!(p.scores.iter().all(|s| s.is_nan()), "softmax over a NaN is NaN everywhere");
        let p = Classification::from_logits(&multi, vec![f32::NAN, 1.0, 0.0], false);
        assert_eq!(p.label_id, 1);
    }
}
