//! sentence-transformers' three models: `SentenceEncoder` (dense embeddings), `CrossEncoder`
//! (pair scores) and `SparseEncoder` (SPLADE). Each returns numpy arrays made from the vectors the
//! library gives, without copying them again on the way to Python.

use numpy::ndarray::{Array1, Array2};
use numpy::{IntoPyArray, PyArray1, PyArray2};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};
use roformer::Prompt;

use crate::batches::{by_length, call_tokenizer, check_positions, tokenize};
use crate::errors::{value_error, OrRaise};
use crate::inputs::{pairs, texts};
use crate::load::Load;

/// Rows of equal length as one [n, dim] array.
fn matrix(py: Python<'_>, rows: Vec<Vec<f32>>, dim: usize) -> PyResult<Bound<'_, PyArray2<f32>>> {
    let n = rows.len();
    let mut flat = Vec::with_capacity(n * dim);
    for row in rows {
        if row.len() != dim {
            return Err(value_error(format!("an embedding has {} values, not {dim}", row.len())));
        }
        flat.extend(row);
    }
    let array = Array2::from_shape_vec((n, dim), flat).map_err(|e| value_error(e.to_string()))?;
    Ok(array.into_pyarray(py))
}

/// A sentence encoder: any RoFormer checkpoint, or a sentence-transformers folder.
#[pyclass(frozen, module = "roformer_rs._native")]
pub struct SentenceEncoder {
    inner: roformer::SentenceEncoder,
}

#[pymethods]
impl SentenceEncoder {
    /// `pooling` (cls, mean or pooler) and `normalize` replace the checkpoint's own, as TEI's
    /// `--pooling` does; `None` leaves them to it.
    #[new]
    #[pyo3(signature = (model, load, pooling=None, normalize=None))]
    fn new(
        py: Python<'_>,
        model: &str,
        load: &Load,
        pooling: Option<&str>,
        normalize: Option<bool>,
    ) -> PyResult<Self> {
        let pooling = pooling.map(str::parse::<roformer::Pooling>).transpose().or_raise()?;
        let inner = load.load(py, |mut options| {
            if let Some(pooling) = pooling {
                options = options.with_pooling(pooling);
            }
            if let Some(normalize) = normalize {
                options = options.with_normalize(normalize);
            }
            roformer::SentenceEncoder::from_pretrained_with(model, options)
        })?;
        Ok(Self { inner })
    }

    /// [n, dim] float32 embeddings, in input order, each text after `prompt`; `None` is the
    /// folder's default prompt (if any). The package turns prompt names into their text.
    #[pyo3(signature = (texts, prompt=None, batch_size=32, progress=None))]
    fn encode<'py>(
        &self,
        py: Python<'py>,
        texts: &Bound<'py, PyAny>,
        prompt: Option<&str>,
        batch_size: usize,
        progress: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyArray2<f32>>> {
        let texts = self::texts(texts, "sentences")?;
        let prompt = prompt.map_or(Prompt::Default, Prompt::Text);
        let encoder = &self.inner;
        let encodings = tokenize(py, || {
            let before = encoder.prompt_text(prompt)?;
            if before.is_empty() {
                encoder.tokenizer().encode_batch(&texts)
            } else {
                let prompted: Vec<String> = texts.iter().map(|t| format!("{before}{t}")).collect();
                encoder.tokenizer().encode_batch(&prompted)
            }
        })?;
        let rows = by_length(py, encodings, batch_size, progress, |batch| {
            encoder.encode_tokenized_with(batch, prompt)
        })?;
        matrix(py, rows, encoder.dim())
    }

    /// One [tokens, hidden] float32 array per text: the last hidden states of its tokens, special
    /// tokens included (no prompt). `max_length` cuts texts there for this call;
    /// `truncation=false` runs them whole, up to the model's positions.
    #[pyo3(signature = (texts, batch_size=32, progress=None, max_length=None, truncation=true))]
    fn token_embeddings<'py>(
        &self,
        py: Python<'py>,
        texts: &Bound<'py, PyAny>,
        batch_size: usize,
        progress: Option<&Bound<'py, PyAny>>,
        max_length: Option<usize>,
        truncation: bool,
    ) -> PyResult<Vec<Bound<'py, PyArray2<f32>>>> {
        let texts = self::texts(texts, "sentences")?;
        let encoder = &self.inner;
        let tokenizer = call_tokenizer(encoder.tokenizer(), truncation, max_length)?;
        let tokenizer = tokenizer.as_ref();
        let encodings = tokenize(py, || tokenizer.encode_batch(&texts))?;
        if !truncation || max_length.is_some() {
            check_positions(encoder.config(), &encodings)?;
        }
        let hidden = encoder.config().hidden_size;
        let rows = by_length(py, encodings, batch_size, progress, |batch| {
            encoder.token_embeddings_tokenized(batch)
        })?;
        rows.into_iter().map(|tokens| matrix(py, tokens, hidden)).collect()
    }

    /// The length of each embedding.
    #[getter]
    fn dim(&self) -> usize {
        self.inner.dim()
    }

    /// Inputs are cut to this many tokens, special tokens included.
    #[getter]
    fn max_seq_length(&self) -> usize {
        self.inner.max_length()
    }

    /// The folder's prompts by name (config_sentence_transformers.json); empty for another checkpoint.
    #[getter]
    fn prompts<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let prompts = PyDict::new(py);
        for name in self.inner.prompt_names() {
            prompts.set_item(name, self.inner.prompt_text(Prompt::Named(name)).or_raise()?)?;
        }
        Ok(prompts)
    }

    /// The text put before each input when no prompt is asked for (empty for none).
    #[getter]
    fn default_prompt(&self) -> PyResult<String> {
        self.inner.prompt_text(Prompt::Default).or_raise()
    }

    /// Whether embeddings come out at unit length.
    #[getter]
    fn normalize(&self) -> bool {
        self.inner.normalize()
    }

    /// cls, mean or pooler.
    #[getter]
    fn pooling(&self) -> &'static str {
        match self.inner.pooling() {
            roformer::Pooling::Cls => "cls",
            roformer::Pooling::Mean => "mean",
            roformer::Pooling::Pooler => "pooler",
        }
    }

    /// The folder the model was loaded from (a Hub id's snapshot in the cache).
    #[getter]
    fn path(&self) -> String {
        self.inner.path().to_string_lossy().into_owned()
    }
}

/// A cross-encoder: a sequence-classification checkpoint with one label.
#[pyclass(frozen, module = "roformer_rs._native")]
pub struct CrossEncoder {
    inner: roformer::Reranker,
}

#[pymethods]
impl CrossEncoder {
    #[new]
    fn new(py: Python<'_>, model: &str, load: &Load) -> PyResult<Self> {
        let inner = load.load(py, |o| roformer::Reranker::from_pretrained_with(model, o))?;
        Ok(Self { inner })
    }

    /// One score per (query, text) pair, in input order: the folder's activation (the sigmoid by
    /// default) of the logit, or the logit with `raw`.
    #[pyo3(signature = (pairs, batch_size=32, progress=None, raw=false))]
    fn predict<'py>(
        &self,
        py: Python<'py>,
        pairs: &Bound<'py, PyAny>,
        batch_size: usize,
        progress: Option<&Bound<'py, PyAny>>,
        raw: bool,
    ) -> PyResult<Bound<'py, PyArray1<f32>>> {
        let pairs = self::pairs(pairs, "sentences")?;
        let reranker = &self.inner;
        let encodings = tokenize(py, || reranker.classifier().tokenizer().encode_pair_batch(&pairs))?;
        let scores = by_length(py, encodings, batch_size, progress, |batch| {
            if raw {
                reranker.predict_raw_tokenized(batch)
            } else {
                reranker.predict_tokenized(batch)
            }
        })?;
        Ok(Array1::from_vec(scores).into_pyarray(py))
    }

    /// Inputs are cut to this many tokens, special tokens included.
    #[getter]
    fn max_length(&self) -> usize {
        self.inner.classifier().max_length()
    }

    /// The folder the model was loaded from.
    #[getter]
    fn path(&self) -> String {
        self.inner.classifier().path().to_string_lossy().into_owned()
    }
}

/// SPLADE embeddings from a masked-LM checkpoint or a sentence-transformers SparseEncoder folder.
#[pyclass(frozen, module = "roformer_rs._native")]
pub struct SparseEncoder {
    inner: roformer::SparseEncoder,
}

#[pymethods]
impl SparseEncoder {
    #[new]
    fn new(py: Python<'_>, model: &str, load: &Load) -> PyResult<Self> {
        let inner = load.load(py, |o| roformer::SparseEncoder::from_pretrained_with(model, o))?;
        Ok(Self { inner })
    }

    /// The embeddings in compressed sparse row form: (data, indices, indptr), float32, int32 and
    /// int64, for `scipy.sparse.csr_array((data, indices, indptr), shape=(n, dim))`.
    #[pyo3(signature = (texts, batch_size=32, progress=None))]
    #[allow(clippy::type_complexity)]
    fn encode<'py>(
        &self,
        py: Python<'py>,
        texts: &Bound<'py, PyAny>,
        batch_size: usize,
        progress: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<(Bound<'py, PyArray1<f32>>, Bound<'py, PyArray1<i32>>, Bound<'py, PyArray1<i64>>)> {
        let texts = self::texts(texts, "sentences")?;
        let encoder = &self.inner;
        let encodings = tokenize(py, || encoder.tokenizer().encode_batch(&texts))?;
        let rows = by_length(py, encodings, batch_size, progress, |batch| encoder.encode_tokenized(batch))?;
        let mut indptr = Vec::with_capacity(rows.len() + 1);
        indptr.push(0i64);
        let (mut data, mut indices) = (Vec::new(), Vec::new());
        for row in rows {
            data.extend_from_slice(&row.values);
            // Vocabulary ids fit in i32: no vocabulary has two billion entries.
            indices.extend(row.indices.iter().map(|&i| i as i32));
            indptr.push(data.len() as i64);
        }
        Ok((data.into_pyarray(py), indices.into_pyarray(py), indptr.into_pyarray(py)))
    }

    /// The vocabulary size: each embedding's length.
    #[getter]
    fn dim(&self) -> usize {
        self.inner.dim()
    }

    /// Inputs are cut to this many tokens, special tokens included.
    #[getter]
    fn max_seq_length(&self) -> usize {
        self.inner.max_length()
    }

    /// The token of each id (`None` past the vocabulary).
    fn tokens<'py>(&self, py: Python<'py>, ids: Vec<u32>) -> PyResult<Bound<'py, PyList>> {
        let tokenizer = self.inner.tokenizer();
        PyList::new(py, ids.into_iter().map(|id| tokenizer.id_to_token(id)))
    }
}
