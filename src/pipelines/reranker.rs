//! Reranking with a cross-encoder, as sentence-transformers' `CrossEncoder` does.

use std::path::Path;

use serde_json::Value;

use super::core::shared_accessors;
use super::options::PipelineOptions;
use super::sentence_transformers::cross_encoder_transformer;
use super::text_classifier::{Classification, TextClassifier};
use crate::error::{Error, Result};
use crate::loading::model_files::ModelFiles;
use crate::loading::tokenizer::Encoded;
use crate::model::heads::RoFormerForSequenceClassification;
use crate::runtime::scores::{sigmoid, top_k};

/// A cross-encoder: a sequence-classification checkpoint with one label, scoring how well a text
/// answers a query. Pairs are encoded query first, as sentence-transformers' `CrossEncoder`
/// encodes them, and scores are the sigmoid of the logit (the folder's `activation_fn` in
/// `config_sentence_transformers.json` decides, as in `CrossEncoder.predict`); the `_raw`
/// methods give the logits.
///
/// ```no_run
/// # fn main() -> roformer::Result<()> {
/// let reranker = roformer::Reranker::from_pretrained("models/my-cross-encoder")?;
/// for hit in reranker.rank("a good movie", &["a great film", "the cat sat on the mat"])? {
///     println!("{} {:.3}", hit.index, hit.score);
/// }
/// # Ok(())
/// # }
/// ```
#[derive(Debug)]
pub struct Reranker {
    classifier: TextClassifier,
    sigmoid: bool,
}

/// One text of [`Reranker::rank`]: its place in the input and its score.
#[derive(Debug, Clone, Copy, PartialEq)]
#[non_exhaustive]
pub struct Ranked {
    /// Index of the text in the input.
    pub index: usize,
    /// Its score against the query.
    pub score: f32,
}

impl Reranker {
    /// Loads a cross-encoder from a folder or a Hub id, with default options.
    pub fn from_pretrained(model: impl AsRef<Path>) -> Result<Self> {
        Self::from_pretrained_with(model, PipelineOptions::default())
    }

    /// Loads a cross-encoder from a folder or a Hub id.
    pub fn from_pretrained_with(model: impl AsRef<Path>, options: PipelineOptions) -> Result<Self> {
        Self::from_classifier(TextClassifier::from_pretrained_with(model, options)?)
    }

    /// The cross-encoder of a loaded classifier, which must have one label. A
    /// sentence-transformers CrossEncoder folder's `max_seq_length` and `do_lower_case`
    /// (sentence_bert_config.json) then apply to the classifier's tokenizer, as in `CrossEncoder`.
    pub fn from_classifier(mut classifier: TextClassifier) -> Result<Self> {
        let labels = classifier.config().num_labels();
        if labels != 1 {
            return Err(Error::config_in(
                &classifier.path().join("config.json"),
                "num_labels",
                format!(
                    "a reranker scores with one label, and this checkpoint has {labels}: use TextClassifier::classify_pairs for it"
                ),
            ));
        }
        if let Some(transformer) = cross_encoder_transformer(&classifier.pipeline.files)? {
            transformer.apply(&mut classifier.pipeline)?;
        }
        let sigmoid = sigmoid_by_default(&classifier.pipeline.files)?;
        Ok(Self { classifier, sigmoid })
    }

    /// One score per (query, text) pair, in input order: the sigmoid of the logit unless the folder
    /// says otherwise.
    pub fn predict<Q: AsRef<str>, T: AsRef<str>>(&self, pairs: &[(Q, T)]) -> Result<Vec<f32>> {
        Ok(self.scores(self.predict_raw(pairs)?))
    }

    /// One logit per (query, text) pair, in input order. The pairs are encoded together, as
    /// CrossEncoder encodes them, so that an empty text still makes a pair (`[CLS] query [SEP]
    /// [SEP]`), where [`TextClassifier::classify_pairs`] follows transformers' pipeline.
    pub fn predict_raw<Q: AsRef<str>, T: AsRef<str>>(&self, pairs: &[(Q, T)]) -> Result<Vec<f32>> {
        let encodings = self.classifier.tokenizer().encode_pair_batch(pairs)?;
        self.predict_raw_tokenized(&encodings)
    }

    /// Every text with its [`Reranker::predict`] score against `query`, highest first; texts of
    /// equal score keep their input order.
    pub fn rank<S: AsRef<str>>(&self, query: &str, texts: &[S]) -> Result<Vec<Ranked>> {
        Ok(ranked(self.predict(&pairs(query, texts))?))
    }

    /// Every text with its logit against `query`, highest first; texts of equal logit keep their
    /// input order.
    pub fn rank_raw<S: AsRef<str>>(&self, query: &str, texts: &[S]) -> Result<Vec<Ranked>> {
        Ok(ranked(self.predict_raw(&pairs(query, texts))?))
    }

    /// The classifier underneath.
    pub fn classifier(&self) -> &TextClassifier {
        &self.classifier
    }
}

/// Entry points for pairs the caller has already tokenized (a server that tokenizes each input
/// once to validate and count it): the same scores as the text entry points.
impl Reranker {
    /// One score per encoded (query, text) pair, in input order, encoded by
    /// [`Reranker::tokenizer`] query first (`encode_pair_batch`): the scores
    /// [`Reranker::predict`] gives for the pairs as text.
    pub fn predict_tokenized(&self, encodings: &[Encoded]) -> Result<Vec<f32>> {
        Ok(self.scores(self.predict_raw_tokenized(encodings)?))
    }

    /// One logit per encoded (query, text) pair, in input order, as
    /// [`Reranker::predict_tokenized`] takes them: the logits [`Reranker::predict_raw`] gives.
    pub fn predict_raw_tokenized(&self, encodings: &[Encoded]) -> Result<Vec<f32>> {
        Ok(first_logits(self.classifier.classify_tokenized(encodings)?))
    }

    /// The scores of logits: their sigmoid unless the folder says otherwise.
    fn scores(&self, logits: Vec<f32>) -> Vec<f32> {
        if self.sigmoid {
            logits.into_iter().map(sigmoid).collect()
        } else {
            logits
        }
    }
}

fn pairs<'a, S: AsRef<str>>(query: &'a str, texts: &'a [S]) -> Vec<(&'a str, &'a str)> {
    texts.iter().map(|t| (query, t.as_ref())).collect()
}

/// Highest first; ties keep input order (NaN last).
fn ranked(scores: Vec<f32>) -> Vec<Ranked> {
    top_k(&scores, scores.len()).into_iter().map(|(index, score)| Ranked { index, score }).collect()
}

/// A cross-encoder's one logit per prediction.
fn first_logits(predictions: Vec<Classification>) -> Vec<f32> {
    predictions.into_iter().map(|p| p.logits.first().copied().unwrap_or(f32::NAN)).collect()
}

/// Whether `CrossEncoder.predict` applies a sigmoid for this folder: its `activation_fn` in
/// config_sentence_transformers.json (or the `sbert_ce_default_activation_function` of
/// config.json, from before sentence-transformers 4), sigmoid when neither is set.
fn sigmoid_by_default(files: &ModelFiles) -> Result<bool> {
    let sources = [
        ("config_sentence_transformers.json", "activation_fn"),
        ("config.json", "sbert_ce_default_activation_function"),
    ];
    for (file, field) in sources {
        let path = files.path(file);
        let Some(json) = files.read_json_if_exists(file)? else { continue };
        match json.get(field) {
            None | Some(Value::Null) => continue,
            Some(Value::String(name)) if name.ends_with(".Sigmoid") => return Ok(true),
            Some(Value::String(name)) if name.ends_with(".Identity") => return Ok(false),
            Some(other) => {
                return Err(Error::config_in(
                    &path,
                    field,
                    format!("{other} is not supported (torch.nn.Sigmoid or torch.nn.Identity)"),
                ))
            }
        }
    }
    Ok(true)
}

shared_accessors!(Reranker, RoFormerForSequenceClassification, classifier.pipeline);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranking_is_highest_first_stable_for_ties_and_puts_nan_last() {
        let order: Vec<usize> =
            ranked(vec![0.5, f32::NAN, 0.9, 0.5, -1.0]).into_iter().map(|r| r.index).collect();
        assert_eq!(order, [2, 0, 3, 4, 1]);
    }
}
