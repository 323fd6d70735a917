//! The models under transformers' pipelines (`pipeline("text-classification")` and the others in
//! the package's `pipelines.py`), and RoFormer-Sim's `Paraphraser`. Each gives plain tuples and
//! arrays; the package shapes them into the dicts transformers returns.

use numpy::ndarray::Array2;
use numpy::{IntoPyArray, PyArray2};
use pyo3::prelude::*;
use roformer::{
    AggregationStrategy, Encoded, GenerationOptions, QuestionAnswererOptions, Sampling,
    TokenClassifierOptions,
};

use crate::batches::{by_length, call_tokenizer, check_positions, in_order, tokenize};
use crate::errors::{value_error, OrRaise};
use crate::inputs::{at_least_one, texts};
use crate::load::Load;

/// Sequence classification (and regression), one text or one pair per input.
#[pyclass(frozen, module = "roformer_rs._native")]
pub struct TextClassifier {
    inner: roformer::TextClassifier,
}

#[pymethods]
impl TextClassifier {
    /// `model` None is the SST-2 model built into the wheel.
    #[new]
    #[pyo3(signature = (model, load))]
    fn new(py: Python<'_>, model: Option<&str>, load: &Load) -> PyResult<Self> {
        let inner = load.load(py, |o| match model {
            Some(m) => roformer::TextClassifier::from_pretrained_with(m, o),
            None => roformer::TextClassifier::bundled_with(o),
        })?;
        Ok(Self { inner })
    }

    /// [n, labels] float32 logits, in input order. `seconds[i]`, when given and not empty, is the
    /// second text of input i: transformers' pipeline reads an empty second text as none.
    /// `max_length` cuts inputs there for this call (longest first); `truncation=false` runs them
    /// whole, up to the model's positions.
    #[pyo3(signature = (firsts, seconds=None, batch_size=32, max_length=None, truncation=true))]
    fn logits<'py>(
        &self,
        py: Python<'py>,
        firsts: &Bound<'py, PyAny>,
        seconds: Option<Vec<Option<String>>>,
        batch_size: usize,
        max_length: Option<usize>,
        truncation: bool,
    ) -> PyResult<Bound<'py, PyArray2<f32>>> {
        let firsts = texts(firsts, "inputs")?;
        let tokenizer = call_tokenizer(self.inner.tokenizer(), truncation, max_length)?;
        let tokenizer = tokenizer.as_ref();
        let encodings = match seconds {
            None => tokenize(py, || tokenizer.encode_batch(&firsts))?,
            Some(seconds) if seconds.len() == firsts.len() => tokenize(py, || {
                firsts
                    .iter()
                    .zip(&seconds)
                    .map(|(a, b)| match b.as_deref() {
                        Some(b) if !b.is_empty() => tokenizer.encode_pair(a, b),
                        _ => tokenizer.encode(a),
                    })
                    .collect::<roformer::Result<Vec<Encoded>>>()
            })?,
            Some(seconds) => {
                return Err(value_error(format!(
                    "{} second texts for {} inputs",
                    seconds.len(),
                    firsts.len()
                )))
            }
        };
        if !truncation || max_length.is_some() {
            check_positions(self.inner.config(), &encodings)?;
        }
        let labels = self.inner.config().num_labels();
        let rows = by_length(py, encodings, batch_size, None, |batch| {
            Ok(self.inner.classify_tokenized(batch)?.into_iter().map(|c| c.logits).collect())
        })?;
        let flat: Vec<f32> = rows.into_iter().flatten().collect();
        let array = Array2::from_shape_vec((flat.len() / labels.max(1), labels), flat)
            .map_err(|e| value_error(format!("the head's logits: {e}")))?;
        Ok(array.into_pyarray(py))
    }

    /// The label of each class, by id (id2label, else LABEL_i).
    #[getter]
    fn labels(&self) -> Vec<String> {
        let config = self.inner.config();
        (0..config.num_labels()).map(|i| config.label(i)).collect()
    }

    /// config.json's problem_type (regression, single_label_classification or
    /// multi_label_classification), `None` where it names none: transformers' pipeline then
    /// decides by the labels.
    #[getter]
    fn problem_type(&self) -> Option<&'static str> {
        self.inner.config().problem_type.map(|p| match p {
            roformer::ProblemType::Regression => "regression",
            roformer::ProblemType::MultiLabelClassification => "multi_label_classification",
            roformer::ProblemType::SingleLabelClassification => "single_label_classification",
        })
    }
}

/// (entity or group, score, word, start, end, token index) of one entity.
type EntityRow = (String, f32, String, usize, usize, Option<usize>);

/// Token classification (NER).
#[pyclass(frozen, module = "roformer_rs._native")]
pub struct TokenClassifier {
    inner: roformer::TokenClassifier,
}

#[pymethods]
impl TokenClassifier {
    #[new]
    fn new(py: Python<'_>, model: &str, load: &Load) -> PyResult<Self> {
        let inner = load.load(py, |o| roformer::TokenClassifier::from_pretrained_with(model, o))?;
        Ok(Self { inner })
    }

    /// The entities of each text, in input order. `max_length` cuts inputs (or windows) there
    /// for this call; `truncation=false` runs them whole; `stride` runs long inputs in windows
    /// that share `stride` tokens, as transformers' `stride`.
    #[pyo3(signature = (texts, aggregation_strategy="none", ignore_labels=None, batch_size=32, max_length=None,
                        truncation=true, stride=None))]
    #[allow(clippy::too_many_arguments)]
    fn classify(
        &self,
        py: Python<'_>,
        texts: &Bound<'_, PyAny>,
        aggregation_strategy: &str,
        ignore_labels: Option<Vec<String>>,
        batch_size: usize,
        max_length: Option<usize>,
        truncation: bool,
        stride: Option<usize>,
    ) -> PyResult<Vec<Vec<EntityRow>>> {
        let texts = self::texts(texts, "inputs")?;
        let strategy: AggregationStrategy = aggregation_strategy.parse().or_raise()?;
        let mut options =
            TokenClassifierOptions::default().with_aggregation_strategy(strategy).with_truncation(truncation);
        if let Some(labels) = ignore_labels {
            options = options.with_ignore_labels(labels);
        }
        if let Some(n) = max_length {
            options = options.with_max_length(at_least_one(n, "max_length")?);
        }
        if let Some(stride) = stride {
            options = options.with_stride(stride);
        }
        in_order(py, &texts, batch_size, |batch| {
            Ok(self
                .inner
                .classify_with(batch, &options)?
                .into_iter()
                .map(|entities| {
                    entities
                        .into_iter()
                        .map(|e| (e.entity, e.score, e.word, e.start, e.end, e.index))
                        .collect()
                })
                .collect())
        })
    }
}

/// (answer, score, start, end) of one answer.
type AnswerRow = (String, f32, usize, usize);

/// Extractive question answering, as transformers 4's pipeline.
#[pyclass(frozen, module = "roformer_rs._native")]
pub struct QuestionAnswerer {
    inner: roformer::QuestionAnswerer,
}

#[pymethods]
impl QuestionAnswerer {
    #[new]
    fn new(py: Python<'_>, model: &str, load: &Load) -> PyResult<Self> {
        let inner = load.load(py, |o| roformer::QuestionAnswerer::from_pretrained_with(model, o))?;
        Ok(Self { inner })
    }

    /// The `top_k` best answers of each (question, context), in input order.
    #[pyo3(signature = (questions, contexts, top_k=1, max_answer_len=15, max_seq_len=None, doc_stride=None,
                        handle_impossible_answer=false, align_to_words=true, batch_size=32))]
    #[allow(clippy::too_many_arguments)]
    fn answer(
        &self,
        py: Python<'_>,
        questions: &Bound<'_, PyAny>,
        contexts: &Bound<'_, PyAny>,
        top_k: usize,
        max_answer_len: usize,
        max_seq_len: Option<usize>,
        doc_stride: Option<usize>,
        handle_impossible_answer: bool,
        align_to_words: bool,
        batch_size: usize,
    ) -> PyResult<Vec<Vec<AnswerRow>>> {
        let questions = texts(questions, "question")?;
        let contexts = texts(contexts, "context")?;
        if questions.len() != contexts.len() {
            return Err(value_error(format!(
                "{} questions for {} contexts",
                questions.len(),
                contexts.len()
            )));
        }
        let mut options = QuestionAnswererOptions::default()
            .with_top_k(top_k)
            .with_max_answer_len(max_answer_len)
            .with_handle_impossible_answer(handle_impossible_answer)
            .with_align_to_words(align_to_words);
        if let Some(n) = max_seq_len {
            options = options.with_max_seq_len(n);
        }
        if let Some(n) = doc_stride {
            options = options.with_doc_stride(n);
        }
        options.validate().or_raise()?;
        let pairs: Vec<(String, String)> = questions.into_iter().zip(contexts).collect();
        in_order(py, &pairs, batch_size, |batch| {
            Ok(self
                .inner
                .answer_with(batch, &options)?
                .into_iter()
                .map(|answers| answers.into_iter().map(|a| (a.answer, a.score, a.start, a.end)).collect())
                .collect())
        })
    }
}

/// (token id, token, score, sequence) of one candidate for a mask.
type CandidateRow = (u32, String, f32, String);

/// Masked-token prediction.
#[pyclass(frozen, module = "roformer_rs._native")]
pub struct FillMask {
    inner: roformer::FillMask,
}

#[pymethods]
impl FillMask {
    #[new]
    fn new(py: Python<'_>, model: &str, load: &Load) -> PyResult<Self> {
        let inner = load.load(py, |o| roformer::FillMask::from_pretrained_with(model, o))?;
        Ok(Self { inner })
    }

    /// For each text, for each mask in order, the `top_k` candidates, each with the sequence that
    /// candidate makes (the text's tokens with that mask filled, as transformers decodes it:
    /// special tokens left out where the text has one mask). `max_length` cuts inputs there for
    /// this call; `truncation=false` runs them whole. A text with no mask left is an error.
    #[pyo3(signature = (texts, top_k=5, batch_size=32, max_length=None, truncation=true))]
    fn fill(
        &self,
        py: Python<'_>,
        texts: &Bound<'_, PyAny>,
        top_k: usize,
        batch_size: usize,
        max_length: Option<usize>,
        truncation: bool,
    ) -> PyResult<Vec<Vec<Vec<CandidateRow>>>> {
        let texts = self::texts(texts, "inputs")?;
        let tokenizer = call_tokenizer(self.inner.tokenizer(), truncation, max_length)?;
        let tokenizer = tokenizer.as_ref();
        let mask = tokenizer.mask_token();
        let mask_id = tokenizer.token_id(mask).or_raise()?;
        let encodings = tokenize(py, || tokenizer.encode_batch(&texts))?;
        if !truncation || max_length.is_some() {
            check_positions(self.inner.config(), &encodings)?;
        }
        if let Some(i) = encodings.iter().position(|e| !e.input_ids.contains(&mask_id)) {
            return Err(value_error(format!(
                "inputs[{i}] has no mask token ({mask}) in its {} tokens",
                encodings[i].len()
            )));
        }
        in_order(py, &encodings, batch_size, |batch| {
            let filled = self.inner.fill_tokenized(batch, top_k)?;
            batch
                .iter()
                .zip(filled)
                .map(|(encoded, masks)| {
                    let ids = &encoded.input_ids;
                    let positions: Vec<usize> = (0..ids.len()).filter(|&p| ids[p] == mask_id).collect();
                    let single = positions.len() == 1;
                    positions
                        .iter()
                        .zip(masks)
                        .map(|(&position, candidates)| {
                            candidates
                                .into_iter()
                                .map(|c| {
                                    let mut filled = ids.to_vec();
                                    filled[position] = c.token_id;
                                    let sequence = tokenizer.decode(&filled, single)?;
                                    let token = tokenizer.decode(&[c.token_id], false)?;
                                    Ok((c.token_id, token, c.score, sequence))
                                })
                                .collect()
                        })
                        .collect()
                })
                .collect()
        })
    }

    /// The mask token, `[MASK]`.
    #[getter]
    fn mask_token(&self) -> String {
        self.inner.tokenizer().mask_token().to_string()
    }
}

/// Similar sentences from a RoFormer-Sim checkpoint.
#[pyclass(frozen, module = "roformer_rs._native")]
pub struct Paraphraser {
    inner: roformer::Paraphraser,
}

#[pymethods]
impl Paraphraser {
    #[new]
    fn new(py: Python<'_>, model: &str, load: &Load) -> PyResult<Self> {
        let inner = load.load(py, |o| roformer::Paraphraser::from_pretrained_with(model, o))?;
        Ok(Self { inner })
    }

    /// The `num_return` most similar of `num_samples` sampled sentences, best first, as
    /// (text, similarity); `greedy` makes one deterministic candidate.
    #[pyo3(signature = (text, num_samples=32, num_return=None, top_p=0.95, top_k=None, temperature=1.0, seed=0,
                        max_new_tokens=32, greedy=false))]
    #[allow(clippy::too_many_arguments)]
    fn paraphrase(
        &self,
        py: Python<'_>,
        text: &str,
        num_samples: usize,
        num_return: Option<usize>,
        top_p: f32,
        top_k: Option<usize>,
        temperature: f32,
        seed: u64,
        max_new_tokens: usize,
        greedy: bool,
    ) -> PyResult<Vec<(String, f32)>> {
        let (sampling, num_samples, num_return) = if greedy {
            (Sampling::Greedy, 1, num_return.unwrap_or(1))
        } else {
            (Sampling::Sample { temperature, top_k, top_p }, num_samples, num_return.unwrap_or(8))
        };
        let generation = GenerationOptions::default()
            .with_sampling(sampling)
            .with_num_samples(at_least_one(num_samples, "num_samples")?)
            .with_seed(seed)
            .with_max_new_tokens(max_new_tokens);
        let found = py.detach(|| self.inner.paraphrase(text, &generation, num_return)).or_raise()?;
        Ok(found.into_iter().map(|p| (p.text, p.similarity)).collect())
    }
}
