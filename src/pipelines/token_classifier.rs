//! Named entities (token classification), as transformers' `TokenClassificationPipeline` gives them.

use std::path::Path;
use std::str::FromStr;

use candle_core::DType;
use tokenizers::Encoding;

use super::core::{shared_accessors, Pipeline};
use super::options::PipelineOptions;
use crate::error::{Error, Result};
use crate::loading::tokenizer::{Encoded, Truncation};
use crate::model::heads::RoFormerForTokenClassification;
use crate::runtime::scores::{argmax, softmax};

/// How tokens become entities, as transformers' `aggregation_strategy` names them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum AggregationStrategy {
    /// Every token on its own, with its label (`B-PER`) and index.
    #[default]
    None,
    /// Adjacent tokens of the same tag grouped (`PER`), a new group at each `B-`.
    Simple,
    /// As `Simple`, each word taking the label of its first token.
    First,
    /// As `Simple`, each word taking the label of its tokens' mean scores.
    Average,
    /// As `Simple`, each word taking the label of its most confident token.
    Max,
}

impl FromStr for AggregationStrategy {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self> {
        Ok(match s.to_ascii_lowercase().as_str() {
            "none" => Self::None,
            "simple" => Self::Simple,
            "first" => Self::First,
            "average" => Self::Average,
            "max" => Self::Max,
            _ => {
                return Err(Error::option(
                    "aggregation_strategy",
                    format!("unknown aggregation strategy `{s}` (none, simple, first, average or max)"),
                ))
            }
        })
    }
}

/// What [`TokenClassifier::classify_with`] returns. Start from `default()` and chain `with_*`:
///
/// ```
/// use roformer::{AggregationStrategy, TokenClassifierOptions};
/// let options = TokenClassifierOptions::default().with_aggregation_strategy(AggregationStrategy::Simple);
/// assert_eq!(options.ignore_labels, ["O"]);
/// ```
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct TokenClassifierOptions {
    /// Tokens one by one (the default), or grouped into entities.
    pub aggregation_strategy: AggregationStrategy,
    /// Entities with these labels (or groups) are left out: `["O"]` by default.
    pub ignore_labels: Vec<String>,
    /// Inputs are cut to this many tokens (special tokens included) in place of the pipeline's
    /// max_length, and with `stride` it is the length of each window; `None`: the pipeline's.
    pub max_length: Option<usize>,
    /// `false` runs each input whole (no cut, `max_length` unused): one longer than the model's
    /// max_position_embeddings is then an error naming it, where transformers fails in its
    /// position table. `true` by default.
    pub truncation: bool,
    /// Long inputs run in windows of max_length tokens, consecutive windows sharing `stride`
    /// tokens, and the entities of overlapping windows merged, as transformers' `stride` does
    /// (which needs an aggregation strategy other than `None`). `None` by default: one window.
    pub stride: Option<usize>,
}

impl Default for TokenClassifierOptions {
    fn default() -> Self {
        Self {
            aggregation_strategy: AggregationStrategy::None,
            ignore_labels: vec!["O".into()],
            max_length: None,
            truncation: true,
            stride: None,
        }
    }
}

impl TokenClassifierOptions {
    /// How tokens become entities.
    pub fn with_aggregation_strategy(mut self, strategy: AggregationStrategy) -> Self {
        self.aggregation_strategy = strategy;
        self
    }

    /// The labels (or groups) left out of the results.
    pub fn with_ignore_labels<S: Into<String>>(mut self, labels: impl IntoIterator<Item = S>) -> Self {
        self.ignore_labels = labels.into_iter().map(Into::into).collect();
        self
    }

    /// Cuts inputs (or windows, with a stride) to `max_length` tokens, in place of the
    /// pipeline's max_length.
    pub fn with_max_length(mut self, max_length: usize) -> Self {
        self.max_length = Some(max_length);
        self
    }

    /// `false` runs each input whole, up to the model's max_position_embeddings.
    pub fn with_truncation(mut self, truncation: bool) -> Self {
        self.truncation = truncation;
        self
    }

    /// Runs long inputs in overlapping windows that share `stride` tokens.
    pub fn with_stride(mut self, stride: usize) -> Self {
        self.stride = Some(stride);
        self
    }
}

/// One entity, or one token with [`AggregationStrategy::None`].
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct Entity {
    /// The label (`B-PER`) with `None`; else the group without its `B-`/`I-` (`PER`), which
    /// transformers names `entity_group`.
    pub entity: String,
    /// The label's softmax probability; the mean over the group's tokens or words when grouped.
    pub score: f32,
    /// The text as the tokenizer gives it back: the token itself with `None` (`##ing`), else the
    /// decoded tokens (lowercased by an uncased vocabulary); an unknown token is the input's text.
    pub word: String,
    /// Character offset of the first character in the input.
    pub start: usize,
    /// Character offset past the last character.
    pub end: usize,
    /// The token's position in the encoding (`[CLS]` is 0); with `None` only.
    pub index: Option<usize>,
}

/// Token classification (NER), from a checkpoint whose config names its labels (`id2label`).
///
/// ```no_run
/// # fn main() -> roformer::Result<()> {
/// use roformer::{AggregationStrategy, TokenClassifier, TokenClassifierOptions};
/// let ner = TokenClassifier::from_pretrained("path/to/ner-checkpoint")?;
/// let options = TokenClassifierOptions::default().with_aggregation_strategy(AggregationStrategy::Simple);
/// for e in &ner.classify_with(&["John lives in Berlin"], &options)?[0] {
///     println!("{} {:.3} {} {}..{}", e.entity, e.score, e.word, e.start, e.end);
/// }
/// # Ok(())
/// # }
/// ```
#[derive(Debug)]
pub struct TokenClassifier {
    pipeline: Pipeline<RoFormerForTokenClassification>,
}

/// A token as `gather_pre_entities` sees it.
struct Token {
    word: String,
    scores: Vec<f32>,
    start: usize,
    end: usize,
    index: usize,
    is_subword: bool,
}

/// A token or word with its chosen label, before grouping.
struct Labelled {
    label: usize,
    score: f32,
    word: String,
    start: usize,
    end: usize,
    index: usize,
}

impl TokenClassifier {
    /// Loads a token-classification checkpoint from a folder or a Hub id, with default options.
    pub fn from_pretrained(model: impl AsRef<Path>) -> Result<Self> {
        Self::from_pretrained_with(model, PipelineOptions::default())
    }

    /// Loads a token-classification checkpoint from a folder or a Hub id. Its config must name the
    /// labels (`id2label`): entities named `LABEL_3` mean nothing, and `O` could not be left out.
    pub fn from_pretrained_with(model: impl AsRef<Path>, options: PipelineOptions) -> Result<Self> {
        let pipeline: Pipeline<RoFormerForTokenClassification> = Pipeline::load(model.as_ref(), options)?;
        if pipeline.config.id2label.is_none() {
            return Err(Error::config_in(
                &pipeline.files.path("config.json"),
                "id2label",
                "a token classifier needs the names of its labels (B-PER, I-PER, O, ...)",
            ));
        }
        Ok(Self { pipeline })
    }

    /// The entities of each text, in input order, with default options (each token on its own,
    /// `O` left out).
    pub fn classify<S: AsRef<str>>(&self, texts: &[S]) -> Result<Vec<Vec<Entity>>> {
        self.classify_with(texts, &TokenClassifierOptions::default())
    }

    /// The entities of each text, in input order.
    pub fn classify_with<S: AsRef<str>>(
        &self,
        texts: &[S],
        options: &TokenClassifierOptions,
    ) -> Result<Vec<Vec<Entity>>> {
        let pipeline = &self.pipeline;
        let texts: Vec<&str> = texts.iter().map(AsRef::as_ref).collect();
        // Each encoding (a whole text, or one window of it) with the index of its text.
        let (owners, encodings): (Vec<usize>, Vec<Encoding>) = match options.stride {
            None => {
                let cut;
                let tokenizer = match (options.truncation, options.max_length) {
                    (true, None) => &pipeline.tokenizer,
                    (truncation, max_length) => {
                        let mut tokenizer = pipeline.tokenizer.clone();
                        let strategy = truncation.then_some(Truncation::LongestFirst);
                        tokenizer.set_truncation(strategy, max_length.or(Some(pipeline.max_length)))?;
                        cut = tokenizer;
                        &cut
                    }
                };
                let encodings = tokenizer.encodings(&texts, None)?;
                if !options.truncation {
                    check_positions(&pipeline.config, encodings.iter().map(Encoding::len))?;
                }
                encodings.into_iter().enumerate().unzip()
            }
            Some(stride) => {
                if options.aggregation_strategy == AggregationStrategy::None {
                    return Err(Error::option(
                        "stride",
                        "a stride merges the entities of overlapping windows, which needs an aggregation \
                         strategy other than none (simple, first, average or max), as in transformers",
                    ));
                }
                if !options.truncation {
                    return Err(Error::option(
                        "stride",
                        "a stride cuts inputs into windows: truncation must be on",
                    ));
                }
                let max_length = options.max_length.unwrap_or(pipeline.max_length);
                let mut windows = Vec::new();
                for (i, text) in texts.iter().enumerate() {
                    for window in pipeline.tokenizer.encode_text_windows(text, max_length, stride)? {
                        windows.push((i, window));
                    }
                }
                windows.into_iter().unzip()
            }
        };
        let encoded: Vec<Encoded> = encodings.iter().map(Encoded::from_encoding).collect();
        let scores = pipeline.run(&encoded, |batch, encodings| {
            let logits = pipeline.model.run(batch)?.to_dtype(DType::F32)?;
            let rows = encodings
                .iter()
                .enumerate()
                .map(|(b, e)| {
                    let rows = batch.tokens(&logits, b, e.len())?.to_vec2::<f32>()?;
                    Ok(rows.iter().map(|row| softmax(row)).collect())
                })
                .collect::<Result<Vec<_>>>()?;
            Ok(rows)
        })?;
        let mut entities: Vec<Vec<Entity>> = vec![Vec::new(); texts.len()];
        let mut windows = vec![0usize; texts.len()];
        for ((&i, encoding), scores) in owners.iter().zip(&encodings).zip(scores) {
            entities[i].extend(self.entities(texts[i], encoding, scores, options)?);
            windows[i] += 1;
        }
        Ok(entities
            .into_iter()
            .zip(windows)
            .map(|(found, windows)| if windows > 1 { merge_overlapping(found) } else { found })
            .collect())
    }

    /// transformers' `postprocess` for one text of one chunk.
    fn entities(
        &self,
        text: &str,
        encoding: &Encoding,
        scores: Vec<Vec<f32>>,
        options: &TokenClassifierOptions,
    ) -> Result<Vec<Entity>> {
        let tokens = self.tokens(text, encoding, scores);
        let config = &self.pipeline.config;
        let strategy = options.aggregation_strategy;
        let labelled: Vec<Labelled> = match strategy {
            AggregationStrategy::None | AggregationStrategy::Simple => tokens
                .into_iter()
                .map(|t| {
                    let label = argmax(&t.scores);
                    Labelled {
                        label,
                        score: t.scores[label],
                        word: t.word,
                        start: t.start,
                        end: t.end,
                        index: t.index,
                    }
                })
                .collect(),
            _ => self.words(tokens, strategy)?,
        };
        let entities = if strategy == AggregationStrategy::None {
            labelled
                .into_iter()
                .map(|l| Entity {
                    entity: config.label(l.label),
                    score: l.score,
                    word: l.word,
                    start: l.start,
                    end: l.end,
                    index: Some(l.index),
                })
                .collect()
        } else {
            self.group(labelled)?
        };
        Ok(entities.into_iter().filter(|e| !options.ignore_labels.contains(&e.entity)).collect())
    }

    /// `gather_pre_entities`: the tokens that are not special, each with its text and whether it
    /// continues a word (its text is longer than the input's: a `##` piece).
    fn tokens(&self, text: &str, encoding: &Encoding, scores: Vec<Vec<f32>>) -> Vec<Token> {
        let chars: Vec<usize> = text.char_indices().map(|(i, _)| i).chain([text.len()]).collect();
        let unk = self.pipeline.tokenizer.unk_id();
        let special = encoding.get_special_tokens_mask();
        let mut tokens = Vec::new();
        for (index, scores) in scores.into_iter().enumerate() {
            if special.get(index).is_none_or(|&s| s != 0) {
                continue;
            }
            let (start, end) = encoding.get_offsets()[index];
            let reference = &text[chars[start.min(chars.len() - 1)]..chars[end.min(chars.len() - 1)]];
            let mut word = encoding.get_tokens()[index].clone();
            let mut is_subword = word.chars().count() != reference.chars().count();
            if Some(encoding.get_ids()[index]) == unk {
                word = reference.to_string();
                is_subword = false;
            }
            tokens.push(Token { word, scores, start, end, index, is_subword });
        }
        tokens
    }

    /// `aggregate_words`: each word (a token and the subword tokens after it) labelled as
    /// `strategy` says, its text decoded from its tokens.
    fn words(&self, tokens: Vec<Token>, strategy: AggregationStrategy) -> Result<Vec<Labelled>> {
        let mut groups: Vec<Vec<Token>> = Vec::new();
        for token in tokens {
            match groups.last_mut() {
                Some(group) if token.is_subword => group.push(token),
                _ => groups.push(vec![token]),
            }
        }
        groups
            .into_iter()
            .map(|group| {
                let scores: Vec<f32> = match strategy {
                    AggregationStrategy::Max => {
                        let max = |xs: &[f32]| xs.iter().copied().fold(f32::NEG_INFINITY, f32::max);
                        let best = group.iter().map(|t| max(&t.scores)).enumerate().fold(
                            (0, f32::NEG_INFINITY),
                            |best, (i, m)| if m > best.1 { (i, m) } else { best },
                        );
                        group[best.0].scores.clone()
                    }
                    AggregationStrategy::Average => (0..group[0].scores.len())
                        .map(|label| nanmean(group.iter().map(|t| t.scores[label])))
                        .collect(),
                    _ => group[0].scores.clone(),
                };
                let label = argmax(&scores);
                let (start, end, index) = (group[0].start, group[group.len() - 1].end, group[0].index);
                let word =
                    self.pipeline.tokenizer.tokens_to_string(group.into_iter().map(|t| t.word).collect())?;
                Ok(Labelled { label, score: scores[label], word, start, end, index })
            })
            .collect()
    }

    /// `group_entities`: adjacent tokens or words of the same tag form one entity, unless the
    /// next one begins (`B-`) another.
    fn group(&self, labelled: Vec<Labelled>) -> Result<Vec<Entity>> {
        let config = &self.pipeline.config;
        let mut groups: Vec<Vec<Labelled>> = Vec::new();
        for l in labelled {
            let (bi, tag) = split_tag(config.label(l.label));
            match groups.last_mut() {
                Some(group)
                    if bi != "B" && tag == split_tag(config.label(group[group.len() - 1].label)).1 =>
                {
                    group.push(l)
                }
                _ => groups.push(vec![l]),
            }
        }
        groups
            .into_iter()
            .map(|group| {
                let label = config.label(group[0].label);
                let entity = label.split_once('-').map_or(label.as_str(), |(_, tag)| tag).to_string();
                let score = nanmean(group.iter().map(|l| l.score));
                let (start, end) = (group[0].start, group[group.len() - 1].end);
                let word =
                    self.pipeline.tokenizer.tokens_to_string(group.into_iter().map(|l| l.word).collect())?;
                Ok(Entity { entity, score, word, start, end, index: None })
            })
            .collect()
    }
}

/// `aggregate_overlapping_entities`: of entities that overlap (by start, in order of start), the
/// longest, and of equally long ones the higher score.
fn merge_overlapping(mut entities: Vec<Entity>) -> Vec<Entity> {
    entities.sort_by_key(|e| e.start);
    let mut merged = Vec::with_capacity(entities.len());
    let Some(mut previous) = entities.first().cloned() else { return merged };
    // As transformers, from the first entity on (compared with itself, it stays).
    for entity in entities {
        if previous.start <= entity.start && entity.start < previous.end {
            let (length, previous_length) = (entity.end - entity.start, previous.end - previous.start);
            if length > previous_length || (length == previous_length && entity.score > previous.score) {
                previous = entity;
            }
        } else {
            merged.push(std::mem::replace(&mut previous, entity));
        }
    }
    merged.push(previous);
    merged
}

/// An input run whole must fit the model's positions (max_position_embeddings), unless its config
/// scales RoPE past them.
fn check_positions(
    config: &crate::loading::config::Config,
    lengths: impl Iterator<Item = usize>,
) -> Result<()> {
    if !matches!(config.rope_scaling(), Ok(None)) {
        return Ok(());
    }
    let limit = config.max_position_embeddings;
    for (i, n) in lengths.enumerate() {
        if n > limit {
            return Err(Error::Input(format!(
                "inputs[{i}] has {n} tokens, more than the {limit} positions of the model \
                 (max_position_embeddings): truncate it"
            )));
        }
    }
    Ok(())
}

/// `get_tag`: `B-PER` is ("B", "PER"), `I-PER` ("I", "PER"), and a label without either prefix
/// continues ("I", label).
fn split_tag(label: String) -> (&'static str, String) {
    match label.split_at_checked(2) {
        Some(("B-", tag)) => ("B", tag.to_string()),
        Some(("I-", tag)) => ("I", tag.to_string()),
        _ => ("I", label),
    }
}

/// The mean of the values that are not NaN (NaN when all are), as numpy's `nanmean`.
fn nanmean(xs: impl Iterator<Item = f32>) -> f32 {
    let (sum, n) = xs.filter(|x| !x.is_nan()).fold((0.0f64, 0usize), |(s, n), x| (s + f64::from(x), n + 1));
    if n == 0 {
        f32::NAN
    } else {
        (sum / n as f64) as f32
    }
}

shared_accessors!(TokenClassifier, RoFormerForTokenClassification, pipeline);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strategies_parse_by_transformers_names_and_tags_split_as_get_tag_does() {
        assert_eq!("average".parse::<AggregationStrategy>().unwrap(), AggregationStrategy::Average);
        assert_eq!("MAX".parse::<AggregationStrategy>().unwrap(), AggregationStrategy::Max);
        let err = "longest".parse::<AggregationStrategy>().unwrap_err().to_string();
        assert!(err.contains("`longest`") && err.contains("simple"), "{err}");
        assert_eq!(split_tag("B-PER".into()), ("B", "PER".to_string()));
        assert_eq!(split_tag("I-LOC".into()), ("I", "LOC".to_string()));
        assert_eq!(split_tag("MISC".into()), ("I", "MISC".to_string()));
        assert_eq!(argmax(&[0.2, 0.4, 0.4]), 1);
        assert_eq!(nanmean([1.0, f32::NAN, 3.0].into_iter()), 2.0);
    }

    #[test]
    fn overlapping_windows_keep_the_longer_entity_then_the_higher_score() {
        let e = |start, end, score| Entity {
            entity: "PER".into(),
            score,
            word: String::new(),
            start,
            end,
            index: None,
        };
        let spans = |found: Vec<Entity>| found.iter().map(|e| (e.start, e.end, e.score)).collect::<Vec<_>>();
        // From two windows: (5, 9) is found in both, once with a higher score; (10, 20) beats (12, 15).
        let found =
            vec![e(0, 4, 0.9), e(5, 9, 0.5), e(12, 15, 0.7), e(5, 9, 0.6), e(10, 20, 0.4), e(30, 34, 0.8)];
        assert_eq!(spans(merge_overlapping(found)), [(0, 4, 0.9), (5, 9, 0.6), (10, 20, 0.4), (30, 34, 0.8)]);
        assert!(merge_overlapping(Vec::new()).is_empty());
    }
}
