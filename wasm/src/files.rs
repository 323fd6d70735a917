//! A model folder from JavaScript: a plain object of `Uint8Array`s, or files fetched from a base
//! URL, as a `roformer::ModelFiles` in memory.

use js_sys::{Object, Promise, Uint8Array};
use wasm_bindgen::prelude::*;
use wasm_bindgen::JsCast;
use wasm_bindgen_futures::JsFuture;

use roformer::{ModelFiles, PipelineOptions};

use crate::js_error;
use crate::options::Options;

#[wasm_bindgen]
extern "C" {
    /// The global `fetch`, of a window or a worker alike.
    #[wasm_bindgen(js_name = fetch)]
    fn fetch_url(url: &str) -> Promise;
}

/// `{ "config.json": Uint8Array, ... }` as a folder, with the load `options` read.
pub(crate) fn from_object(
    files: &Object,
    options: Option<Object>,
) -> Result<(ModelFiles, PipelineOptions), JsError> {
    let options = Options::read(options)?;
    Ok((object_files(files, &options.name)?, options.pipeline))
}

/// The folder at `base_url`, fetched file by file, with the load `options` read.
pub(crate) async fn from_url(
    base_url: &str,
    options: Option<Object>,
) -> Result<(ModelFiles, PipelineOptions), JsError> {
    let options = Options::read(options)?;
    Ok((fetched_files(base_url, options.on_progress.as_ref()).await?, options.pipeline))
}

/// `{ "config.json": Uint8Array, ... }` as a folder named `name`.
fn object_files(files: &Object, name: &str) -> Result<ModelFiles, JsError> {
    let entries = Object::entries(files)
        .iter()
        .map(|entry| {
            let entry = js_sys::Array::from(&entry);
            let path = entry.get(0).as_string().unwrap_or_default();
            let value = entry.get(1);
            let bytes = if let Some(array) = value.dyn_ref::<Uint8Array>() {
                array.to_vec()
            } else if let Some(buffer) = value.dyn_ref::<js_sys::ArrayBuffer>() {
                Uint8Array::new(buffer).to_vec()
            } else {
                return Err(JsError::new(&format!("files[{path:?}] is not a Uint8Array or ArrayBuffer")));
            };
            Ok((path, bytes))
        })
        .collect::<Result<Vec<_>, _>>()?;
    ModelFiles::from_memory(name, entries).map_err(js_error)
}

/// The folder at `base_url`, fetched file by file; a 404 is a file the folder lacks.
/// `on_progress(path, bytes)` hears of each file fetched.
async fn fetched_files(
    base_url: &str,
    on_progress: Option<&js_sys::Function>,
) -> Result<ModelFiles, JsError> {
    let base = base_url.trim_end_matches('/').to_string();
    ModelFiles::from_fetch(base.clone(), |name| {
        let url = format!("{base}/{name}");
        async move {
            let body = get(&url).await.map_err(|message| failed(&url, message))?;
            if let (Some(report), Some(bytes)) = (on_progress, &body) {
                // A throwing callback must not stop the load: its error is the page's own.
                let _ = report.call2(&JsValue::NULL, &name.into(), &(bytes.len() as f64).into());
            }
            Ok(body)
        }
    })
    .await
    .map_err(js_error)
}

fn failed(url: &str, message: String) -> roformer::Error {
    roformer::Error::Io { path: url.into(), source: std::io::Error::other(message) }
}

/// The body of `url`; `None` on a 404.
async fn get(url: &str) -> Result<Option<Vec<u8>>, String> {
    let describe = |e: JsValue| {
        e.dyn_ref::<js_sys::Error>().map(|e| String::from(e.message())).unwrap_or_else(|| format!("{e:?}"))
    };
    let response = JsFuture::from(fetch_url(url)).await.map_err(describe)?;
    let response: web_sys::Response =
        response.dyn_into().map_err(|_| "fetch gave no Response".to_string())?;
    if response.status() == 404 {
        return Ok(None);
    }
    if !response.ok() {
        return Err(format!("HTTP {} {}", response.status(), response.status_text()));
    }
    let body = JsFuture::from(response.array_buffer().map_err(describe)?).await.map_err(describe)?;
    Ok(Some(Uint8Array::new(&body).to_vec()))
}
