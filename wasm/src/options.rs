//! The `options` object of `fromFiles` and `fromUrl`, read into the crate's `PipelineOptions`.

use js_sys::{Object, Reflect};
use wasm_bindgen::prelude::*;
use wasm_bindgen::JsCast;

use roformer::{PipelineOptions, Pooling, Quantization};

/// What an `options` object may hold; any other key is refused, so a typo is not silently ignored.
const KEYS: [&str; 9] = [
    "name",
    "quantize",
    "maxLength",
    "batchSize",
    "pooling",
    "normalize",
    "prompt",
    "promptName",
    "onProgress",
];

/// Load options: `{ quantize: "int8", maxLength: 128, batchSize: 32, pooling: "mean",
/// normalize: true, prompt: "query: ", promptName: "query", name: "my-model",
/// onProgress: (path, bytes) => {} }`, all optional; `onProgress` serves `fromUrl`.
pub(crate) struct Options {
    /// The folder's name in error messages.
    pub(crate) name: String,
    pub(crate) pipeline: PipelineOptions,
    /// Called with each file's path and size as `fromUrl` fetches it.
    pub(crate) on_progress: Option<js_sys::Function>,
}

impl Options {
    pub(crate) fn read(options: Option<Object>) -> Result<Self, JsError> {
        let mut read = Self { name: "model".into(), pipeline: PipelineOptions::default(), on_progress: None };
        let Some(object) = options else { return Ok(read) };
        for key in Object::keys(&object).iter() {
            let key = key.as_string().unwrap_or_default();
            if !KEYS.contains(&key.as_str()) {
                return Err(JsError::new(&format!(
                    "options.{key}: unknown option (known: {})",
                    KEYS.join(", ")
                )));
            }
        }
        let get =
            |key: &str| Reflect::get(&object, &key.into()).ok().filter(|v| !v.is_undefined() && !v.is_null());
        let text = |key: &str| -> Result<Option<String>, JsError> {
            get(key)
                .map(|v| {
                    v.as_string().ok_or_else(|| JsError::new(&format!("options.{key} must be a string")))
                })
                .transpose()
        };
        let count = |key: &str| -> Result<Option<usize>, JsError> {
            get(key)
                .map(|v| match v.as_f64() {
                    Some(n) if n >= 1.0 && n.fract() == 0.0 && n <= u32::MAX as f64 => Ok(n as usize),
                    _ => Err(JsError::new(&format!("options.{key} must be a whole number of at least 1"))),
                })
                .transpose()
        };
        let bad = |key: &str, e: roformer::Error| JsError::new(&format!("options.{key}: {e}"));
        let mut p = read.pipeline;
        if let Some(name) = text("name")? {
            read.name = name;
        }
        if let Some(q) = text("quantize")? {
            p = p.with_quantization(q.parse::<Quantization>().map_err(|e| bad("quantize", e))?);
        }
        if let Some(n) = count("maxLength")? {
            p = p.with_max_length(n);
        }
        if let Some(n) = count("batchSize")? {
            p = p.with_batch_size(n);
        }
        if let Some(pooling) = text("pooling")? {
            p = p.with_pooling(pooling.parse::<Pooling>().map_err(|e| bad("pooling", e))?);
        }
        if let Some(v) = get("normalize") {
            p = p.with_normalize(
                v.as_bool().ok_or_else(|| JsError::new("options.normalize must be a boolean"))?,
            );
        }
        if let Some(prompt) = text("prompt")? {
            p = p.with_prompt(prompt);
        }
        if let Some(name) = text("promptName")? {
            p = p.with_prompt_name(name);
        }
        if let Some(f) = get("onProgress") {
            read.on_progress =
                Some(f.dyn_into().map_err(|_| JsError::new("options.onProgress must be a function"))?);
        }
        read.pipeline = p;
        Ok(read)
    }
}
