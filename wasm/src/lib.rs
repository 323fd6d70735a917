//! RoFormer in the browser: [`SentenceEncoder`] and [`TextClassifier`] for JavaScript, built by
//! `scripts/build/build_wasm.sh` into an ES module (`target/wasm-pkg/roformer_wasm.js`).
//!
//! A model comes from a plain object of its folder's files (`fromFiles`), or from a base URL
//! (`fromUrl`), and is read exactly as the crate reads the folder on disk. Every failure is a
//! thrown `Error` whose message names the file, tensor or field at fault.

mod files;
mod options;

use js_sys::{Array, Float32Array, Object, Reflect};
use wasm_bindgen::prelude::*;

/// Turns a panic into a thrown `Error` with the panic's message, instead of the bare
/// `unreachable` trap a page would otherwise see.
#[wasm_bindgen(start)]
fn start() {
    std::panic::set_hook(Box::new(|info| {
        wasm_bindgen::throw_val(js_sys::Error::new(&format!("roformer panicked: {info}")).into())
    }));
}

/// A thrown `Error` carrying the crate's message, the causes under it included.
fn js_error(error: roformer::Error) -> JsError {
    let mut message = error.to_string();
    let mut source = std::error::Error::source(&error);
    while let Some(cause) = source {
        let text = cause.to_string();
        if !message.contains(&text) {
            message = format!("{message}: {text}");
        }
        source = cause.source();
    }
    JsError::new(&message)
}

/// Fetches the model folder at `baseUrl` file by file, as `fromUrl` does, into an object from
/// each path to its bytes (`Uint8Array`), for `fromFiles`: a page (or a pool of workers) fetches
/// a folder once and loads it more than once. `options`: `onProgress(path, bytes)`, as `fromUrl`.
#[wasm_bindgen(js_name = fetchFiles)]
pub async fn fetch_files(base_url: String, options: Option<Object>) -> Result<Object, JsError> {
    let options = options::Options::read(options)?;
    files::fetch_object(&base_url, options.on_progress.as_ref()).await
}

/// Sentence embeddings: a plain RoFormer checkpoint or a sentence-transformers folder (modules,
/// pooling, prompts), as `roformer::SentenceEncoder` reads it.
#[wasm_bindgen]
pub struct SentenceEncoder {
    inner: roformer::SentenceEncoder,
}

#[wasm_bindgen]
impl SentenceEncoder {
    /// Loads from `files`, an object from each path inside the model folder (`"config.json"`,
    /// `"1_Pooling/config.json"`) to its bytes (`Uint8Array`). `options`: see `Options`.
    #[wasm_bindgen(js_name = fromFiles)]
    pub fn from_files(files: &Object, options: Option<Object>) -> Result<SentenceEncoder, JsError> {
        let (files, options) = files::from_object(files, options)?;
        roformer::SentenceEncoder::from_files(&files, options).map(|inner| Self { inner }).map_err(js_error)
    }

    /// Fetches the folder's files from `baseUrl` (a static folder, or a Hub repo's
    /// `https://huggingface.co/{id}/resolve/main/`), then loads as `fromFiles`. An
    /// `onProgress(path, bytes)` function in `options` hears of each file fetched.
    #[wasm_bindgen(js_name = fromUrl)]
    pub async fn from_url(base_url: String, options: Option<Object>) -> Result<SentenceEncoder, JsError> {
        let (files, options) = files::from_url(&base_url, options).await?;
        roformer::SentenceEncoder::from_files(&files, options).map(|inner| Self { inner }).map_err(js_error)
    }

    /// One `Float32Array` per text, in order. `prompt` names one of the folder's prompts
    /// (`promptNames`); without it, the prompt the encoder was loaded with.
    pub fn encode(&self, texts: Vec<String>, prompt: Option<String>) -> Result<Array, JsError> {
        let prompt = match &prompt {
            Some(name) => roformer::Prompt::Named(name),
            None => roformer::Prompt::Default,
        };
        let embeddings = self.inner.encode_with(&texts, prompt).map_err(js_error)?;
        Ok(embeddings.iter().map(|e| Float32Array::from(e.as_slice())).collect())
    }

    /// The prompts of the folder's config_sentence_transformers.json, by name.
    #[wasm_bindgen(getter, js_name = promptNames)]
    pub fn prompt_names(&self) -> Vec<String> {
        self.inner.prompt_names().into_iter().map(str::to_string).collect()
    }

    /// The embedding size.
    #[wasm_bindgen(getter)]
    pub fn dim(&self) -> usize {
        self.inner.dim()
    }
}

/// A sequence classifier (`RoFormerForSequenceClassification`), as `roformer::TextClassifier`.
#[wasm_bindgen]
pub struct TextClassifier {
    inner: roformer::TextClassifier,
}

#[wasm_bindgen]
impl TextClassifier {
    /// Loads from `files`, as `SentenceEncoder.fromFiles`.
    #[wasm_bindgen(js_name = fromFiles)]
    pub fn from_files(files: &Object, options: Option<Object>) -> Result<TextClassifier, JsError> {
        let (files, options) = files::from_object(files, options)?;
        roformer::TextClassifier::from_files(&files, options).map(|inner| Self { inner }).map_err(js_error)
    }

    /// Fetches the folder's files from `baseUrl`, then loads as `fromFiles`.
    #[wasm_bindgen(js_name = fromUrl)]
    pub async fn from_url(base_url: String, options: Option<Object>) -> Result<TextClassifier, JsError> {
        let (files, options) = files::from_url(&base_url, options).await?;
        roformer::TextClassifier::from_files(&files, options).map(|inner| Self { inner }).map_err(js_error)
    }

    /// `{label, score}` per text, in order.
    pub fn classify(&self, texts: Vec<String>) -> Result<Array, JsError> {
        predictions(self.inner.classify(&texts))
    }

    /// `{label, score}` per `[text, textPair]`, in order.
    #[wasm_bindgen(js_name = classifyPairs)]
    pub fn classify_pairs(&self, pairs: JsValue) -> Result<Array, JsError> {
        // Checked before any JavaScript runs on them: a JavaScript exception (iterating null)
        // would unwind through this call and leave the object borrowed for good.
        if !Array::is_array(&pairs) {
            return Err(JsError::new("pairs must be an array of [text, textPair] arrays"));
        }
        let pairs = Array::from(&pairs)
            .iter()
            .enumerate()
            .map(|(i, pair)| {
                let pair = Array::is_array(&pair).then(|| Array::from(&pair));
                match pair.map(|p| (p.length(), p.get(0).as_string(), p.get(1).as_string())) {
                    Some((2, Some(a), Some(b))) => Ok((a, b)),
                    _ => Err(JsError::new(&format!(
                        "pairs[{i}] is not a [text, textPair] array of two strings"
                    ))),
                }
            })
            .collect::<Result<Vec<_>, _>>()?;
        predictions(self.inner.classify_pairs(&pairs))
    }

    /// The encoder under this classifier, sharing its weights: embeddings (mean pooling) of
    /// the same checkpoint without loading it twice.
    #[wasm_bindgen(js_name = sentenceEncoder)]
    pub fn sentence_encoder(&self) -> Result<SentenceEncoder, JsError> {
        roformer::SentenceEncoder::from_classifier(&self.inner)
            .map(|inner| SentenceEncoder { inner })
            .map_err(js_error)
    }

    /// The class names, by id (`id2label`).
    #[wasm_bindgen(getter)]
    pub fn labels(&self) -> Vec<String> {
        let config = self.inner.config();
        (0..config.num_labels()).map(|i| config.label(i)).collect()
    }
}

fn predictions(result: roformer::Result<Vec<roformer::Classification>>) -> Result<Array, JsError> {
    result
        .map_err(js_error)?
        .into_iter()
        .map(|c| {
            let row = Object::new();
            Reflect::set(&row, &"label".into(), &c.label.into())?;
            Reflect::set(&row, &"score".into(), &c.score.into())?;
            Ok(JsValue::from(row))
        })
        .collect::<Result<Array, JsValue>>()
        .map_err(|e| JsError::new(&format!("cannot build a result object: {e:?}")))
}
