//! Extractive question answering, as transformers' `QuestionAnsweringPipeline` (4.x) answers.

use std::path::Path;

use candle_core::DType;
use tokenizers::Encoding;

use super::core::{shared_accessors, Pipeline};
use super::options::PipelineOptions;
use crate::error::{Error, Result};
use crate::loading::tokenizer::Encoded;
use crate::model::heads::RoFormerForQuestionAnswering;
use crate::runtime::scores::softmax;

/// What [`QuestionAnswerer::answer_with`] returns, with transformers' defaults. Start from
/// `default()` and chain `with_*`:
///
/// ```
/// use roformer::QuestionAnswererOptions;
/// let options = QuestionAnswererOptions::default().with_top_k(3).with_max_answer_len(10);
/// assert_eq!((options.top_k, options.doc_stride), (3, None));
/// ```
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct QuestionAnswererOptions {
    /// Answers per question, best first (1); fewer when the context has fewer.
    pub top_k: usize,
    /// The longest answer, in tokens (15).
    pub max_answer_len: usize,
    /// Tokens per window, question and special tokens included; `None` means the pipeline's
    /// max_length, at most 384.
    pub max_seq_len: Option<usize>,
    /// Tokens of the context that consecutive windows share; `None` means half of max_seq_len,
    /// at most 128.
    pub doc_stride: Option<usize>,
    /// Whether "no answer" (the empty answer at 0..0, scored by `[CLS]`) competes (false).
    pub handle_impossible_answer: bool,
    /// Whether answers widen to whole words (true).
    pub align_to_words: bool,
}

impl Default for QuestionAnswererOptions {
    fn default() -> Self {
        Self {
            top_k: 1,
            max_answer_len: 15,
            max_seq_len: None,
            doc_stride: None,
            handle_impossible_answer: false,
            align_to_words: true,
        }
    }
}

impl QuestionAnswererOptions {
    /// Answers per question.
    pub fn with_top_k(mut self, top_k: usize) -> Self {
        self.top_k = top_k;
        self
    }

    /// The longest answer, in tokens.
    pub fn with_max_answer_len(mut self, max_answer_len: usize) -> Self {
        self.max_answer_len = max_answer_len;
        self
    }

    /// Tokens per window, question and special tokens included.
    pub fn with_max_seq_len(mut self, max_seq_len: usize) -> Self {
        self.max_seq_len = Some(max_seq_len);
        self
    }

    /// Context tokens that consecutive windows share.
    pub fn with_doc_stride(mut self, doc_stride: usize) -> Self {
        self.doc_stride = Some(doc_stride);
        self
    }

    /// Whether the empty answer competes.
    pub fn with_handle_impossible_answer(mut self, handle: bool) -> Self {
        self.handle_impossible_answer = handle;
        self
    }

    /// Whether answers widen to whole words.
    pub fn with_align_to_words(mut self, align: bool) -> Self {
        self.align_to_words = align;
        self
    }

    /// What [`QuestionAnswerer::answer_with`] would refuse in these options alone, whatever the model
    /// (whose max length sets the windows' defaults): so that a program can check its flags
    /// before it loads one.
    pub fn validate(&self) -> Result<()> {
        if self.top_k == 0 {
            return Err(Error::at_least_one("top_k"));
        }
        if self.max_answer_len == 0 {
            return Err(Error::at_least_one("max_answer_len"));
        }
        if let (Some(max_seq_len), Some(doc_stride)) = (self.max_seq_len, self.doc_stride) {
            if doc_stride > max_seq_len {
                return Err(doc_stride_error(doc_stride, max_seq_len));
            }
        }
        Ok(())
    }
}

fn doc_stride_error(doc_stride: usize, max_seq_len: usize) -> Error {
    Error::option(
        "doc_stride",
        format!("doc_stride ({doc_stride}) is larger than max_seq_len ({max_seq_len})"),
    )
}

/// One answer: a span of the context.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct Answer {
    /// The context's text from `start` to `end`; empty for "no answer".
    pub answer: String,
    /// The probability of the span (start times end), summed over the spans of the same text
    /// (ignoring case) found in the windows.
    pub score: f32,
    /// Character offset of the answer in the context.
    pub start: usize,
    /// Character offset past its end.
    pub end: usize,
}

/// Extractive question answering: the best spans of a context for a question.
///
/// ```no_run
/// # fn main() -> roformer::Result<()> {
/// let qa = roformer::QuestionAnswerer::from_pretrained("path/to/qa-checkpoint")?;
/// let answers = qa.answer(&[("who lives here ?", "John lives here.")])?;
/// println!("{} {:.3} {}..{}", answers[0][0].answer, answers[0][0].score, answers[0][0].start, answers[0][0].end);
/// # Ok(())
/// # }
/// ```
#[derive(Debug)]
pub struct QuestionAnswerer {
    pipeline: Pipeline<RoFormerForQuestionAnswering>,
}

impl QuestionAnswerer {
    /// Loads a question-answering checkpoint from a folder or a Hub id, with default options.
    pub fn from_pretrained(model: impl AsRef<Path>) -> Result<Self> {
        Self::from_pretrained_with(model, PipelineOptions::default())
    }

    /// Loads a question-answering checkpoint from a folder or a Hub id.
    pub fn from_pretrained_with(model: impl AsRef<Path>, options: PipelineOptions) -> Result<Self> {
        Ok(Self { pipeline: Pipeline::load(model.as_ref(), options)? })
    }

    /// The best answer to each (question, context), in input order, with default options.
    pub fn answer<Q: AsRef<str>, C: AsRef<str>>(&self, pairs: &[(Q, C)]) -> Result<Vec<Vec<Answer>>> {
        self.answer_with(pairs, &QuestionAnswererOptions::default())
    }

    /// The `top_k` best answers to each (question, context), best first, in input order. An empty
    /// question or context is an error, as in transformers.
    pub fn answer_with<Q: AsRef<str>, C: AsRef<str>>(
        &self,
        pairs: &[(Q, C)],
        options: &QuestionAnswererOptions,
    ) -> Result<Vec<Vec<Answer>>> {
        let pipeline = &self.pipeline;
        let (max_seq_len, doc_stride) = self.windowing(options)?;
        // Every window of every pair, batched together; `owners[w]` is the pair of window w.
        let mut windows: Vec<Encoding> = Vec::new();
        let mut owners: Vec<usize> = Vec::new();
        for (i, (question, context)) in pairs.iter().enumerate() {
            let (question, context) = (question.as_ref(), context.as_ref());
            for (name, text) in [("question", question), ("context", context)] {
                if text.trim().is_empty() {
                    return Err(Error::Input(format!("pair {i}: the {name} is empty")));
                }
            }
            let encodings = pipeline.tokenizer.encode_windows(question, context, max_seq_len, doc_stride)?;
            owners.extend(std::iter::repeat_n(i, encodings.len()));
            windows.extend(encodings);
        }
        let encoded: Vec<Encoded> = windows.iter().map(Encoded::from_encoding).collect();
        let logits = pipeline.run(&encoded, |batch, encodings| {
            let logits = pipeline.model.run(batch)?.to_dtype(DType::F32)?;
            encodings
                .iter()
                .enumerate()
                .map(|(b, e)| Ok(batch.tokens(&logits, b, e.len())?.to_vec2::<f32>()?))
                .collect()
        })?;
        let cls = pipeline.tokenizer.token_id(&pipeline.tokenizer.special_tokens().cls)?;
        let mut results = Vec::with_capacity(pairs.len());
        let mut next = 0;
        for (i, (_, context)) in pairs.iter().enumerate() {
            let count = owners[next..].iter().take_while(|&&o| o == i).count();
            let spans = (next..next + count).map(|w| (&windows[w], &logits[w]));
            results.push(answers(context.as_ref(), spans, cls, options));
            next += count;
        }
        Ok(results)
    }

    /// The window length and stride, checked as the pipeline checks them.
    fn windowing(&self, options: &QuestionAnswererOptions) -> Result<(usize, usize)> {
        options.validate()?;
        let max_seq_len = options.max_seq_len.unwrap_or(self.pipeline.max_length.min(384));
        let doc_stride = options.doc_stride.unwrap_or((max_seq_len / 2).min(128));
        if doc_stride > max_seq_len {
            return Err(doc_stride_error(doc_stride, max_seq_len));
        }
        Ok((max_seq_len, doc_stride))
    }
}

/// transformers' `postprocess` over the windows of one context: in each window, the best spans of
/// context tokens (`select_starts_ends`, `decode_spans`), widened to words and merged by text.
fn answers<'a>(
    context: &str,
    windows: impl Iterator<Item = (&'a Encoding, &'a Vec<Vec<f32>>)>,
    cls: u32,
    options: &QuestionAnswererOptions,
) -> Vec<Answer> {
    let chars: Vec<usize> = context.char_indices().map(|(i, _)| i).chain([context.len()]).collect();
    // Candidates get lost when widening makes spans equal, so more are taken than asked for.
    let pre_top_k = if options.align_to_words { options.top_k * 2 + 10 } else { options.top_k };
    let mut min_null_score = 1_000_000f64;
    // (text, score, start, end) in the order found; scores add up in f64 as Python's floats do.
    let mut found: Vec<(String, f64, usize, usize)> = Vec::new();
    for (encoding, logits) in windows {
        let sequences = encoding.get_sequence_ids();
        let ids = encoding.get_ids();
        // `p_mask`: the context may hold the answer, and `[CLS]` stays in the softmax.
        let allowed: Vec<bool> = (0..ids.len()).map(|t| sequences[t] == Some(1) || ids[t] == cls).collect();
        let probabilities = |column: usize| {
            let masked: Vec<f32> =
                logits.iter().zip(&allowed).map(|(l, &ok)| if ok { l[column] } else { -10000.0 }).collect();
            softmax(&masked)
        };
        let (mut start, mut end) = (probabilities(0), probabilities(1));
        if options.handle_impossible_answer {
            min_null_score = min_null_score.min(f64::from(start[0] * end[0]));
        }
        start[0] = 0.0;
        end[0] = 0.0;
        // Spans of score 0 are those the model cannot give (outside the context, the wrong way
        // round, too long): transformers lists them only when too few others exist.
        let mut spans: Vec<(usize, usize, f32)> = Vec::new();
        for s in (0..ids.len()).filter(|&s| allowed[s] && start[s] > 0.0) {
            for e in s..ids.len().min(s + options.max_answer_len) {
                let score = start[s] * end[e];
                if allowed[e] && score > 0.0 {
                    spans.push((s, e, score));
                }
            }
        }
        spans.sort_by(|a, b| b.2.total_cmp(&a.2));
        spans.truncate(pre_top_k);
        for (s, e, score) in spans {
            let (first, last) = span_chars(encoding, s, e, options.align_to_words);
            let text = &context[chars[first]..chars[last]];
            match found.iter_mut().find(|a| a.0.to_lowercase() == text.to_lowercase()) {
                Some(a) => a.1 += f64::from(score),
                None => found.push((text.to_string(), f64::from(score), first, last)),
            }
        }
    }
    if options.handle_impossible_answer {
        found.push((String::new(), min_null_score, 0, 0));
    }
    // A stable sort: equal scores keep the order found, as Python's `sorted`.
    found.sort_by(|a, b| b.1.total_cmp(&a.1));
    found
        .into_iter()
        .take(options.top_k)
        .map(|(answer, score, start, end)| Answer { answer, score: score as f32, start, end })
        .collect()
}

/// The characters of tokens `s..=e` of the context, widened to the words they are part of
/// (`get_indices`: `token_to_word`, then `word_to_chars` within the window).
fn span_chars(encoding: &Encoding, s: usize, e: usize, align_to_words: bool) -> (usize, usize) {
    let offsets = encoding.get_offsets();
    if !align_to_words {
        return (offsets[s].0, offsets[e].1);
    }
    let words = encoding.get_word_ids();
    let sequences = encoding.get_sequence_ids();
    let word_tokens = |t: usize| {
        let of_word = |u: &usize| sequences[*u] == Some(1) && words[*u].is_some() && words[*u] == words[t];
        let first = (0..words.len()).find(of_word);
        let last = (0..words.len()).rev().find(of_word);
        first.zip(last)
    };
    match (word_tokens(s), word_tokens(e)) {
        (Some((first, _)), Some((_, last))) => (offsets[first].0, offsets[last].1),
        _ => (offsets[s].0, offsets[e].1),
    }
}

shared_accessors!(QuestionAnswerer, RoFormerForQuestionAnswering, pipeline);
