//! A model folder from JavaScript: a plain object of `Uint8Array`s, or files fetched from a base
//! URL, as a `roformer::ModelFiles` in memory.

use std::sync::Arc;

use js_sys::{Object, Promise, Uint8Array};
use wasm_bindgen::prelude::*;
use wasm_bindgen::JsCast;
use wasm_bindgen_futures::JsFuture;

use roformer::{FileBytes, ModelFiles, PipelineOptions, RangedBytes};

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
    let fetched = fetch_object(base_url, options.on_progress.as_ref()).await?;
    Ok((object_files(&fetched, base_url.trim_end_matches('/'))?, options.pipeline))
}

/// `{ "config.json": Uint8Array, ... }` as a folder named `name`. The weight files stay where
/// the page holds them, and are read tensor by tensor as the model loads; the small files are
/// copied in.
fn object_files(files: &Object, name: &str) -> Result<ModelFiles, JsError> {
    let entries = Object::entries(files)
        .iter()
        .map(|entry| {
            let entry = js_sys::Array::from(&entry);
            let path = entry.get(0).as_string().unwrap_or_default();
            let value = entry.get(1);
            let array = if let Some(array) = value.dyn_ref::<Uint8Array>() {
                array.clone()
            } else if value.is_instance_of::<js_sys::ArrayBuffer>()
                || value.is_instance_of::<js_sys::SharedArrayBuffer>()
            {
                Uint8Array::new(&value)
            } else {
                return Err(JsError::new(&format!(
                    "files[{path:?}] is not a Uint8Array, ArrayBuffer or SharedArrayBuffer"
                )));
            };
            let bytes = if is_weight_file(&path) { JsBytes::borrowed(array) } else { array.to_vec().into() };
            Ok((path, bytes))
        })
        .collect::<Result<Vec<_>, _>>()?;
    ModelFiles::from_memory(name, entries).map_err(js_error)
}

/// The files that are most of a model's size: left outside WebAssembly memory. Only those at
/// the folder's top, which a loaded pipeline lets go (`ModelFiles::without_weights`); a module's
/// small weights (`2_Dense/model.safetensors`) are copied in, as the pipeline may read them later.
fn is_weight_file(path: &str) -> bool {
    !path.contains('/') && path.ends_with(".safetensors")
}

/// A file's bytes in a JavaScript `Uint8Array`, read into WebAssembly memory one range at a
/// time: a model's weights are never copied in whole, so the module's memory (which never
/// shrinks) holds what the model keeps, not the file as well.
struct JsBytes(Uint8Array);

// SAFETY: this crate is built for wasm32-unknown-unknown without the atomics feature: one
// thread, so a `Uint8Array` is never sent to, or shared with, another thread. (A threaded
// build would fail the `cfg` below rather than share a JavaScript value.)
#[cfg(not(target_feature = "atomics"))]
unsafe impl Send for JsBytes {}
// SAFETY: as for `Send`.
#[cfg(not(target_feature = "atomics"))]
unsafe impl Sync for JsBytes {}

impl JsBytes {
    fn borrowed(array: Uint8Array) -> FileBytes {
        FileBytes::Ranged(Arc::new(JsBytes(array)))
    }
}

impl RangedBytes for JsBytes {
    fn len(&self) -> u64 {
        self.0.length().into()
    }

    fn read_at(&self, offset: u64, buf: &mut [u8]) -> std::io::Result<()> {
        let end = offset.checked_add(buf.len() as u64).filter(|&end| end <= self.len());
        let (Some(end), Ok(start)) = (end, u32::try_from(offset)) else {
            return Err(std::io::Error::new(
                std::io::ErrorKind::UnexpectedEof,
                format!("{} bytes from offset {offset} run past the end ({} bytes)", buf.len(), self.len()),
            ));
        };
        // `end` fits: it is at most the array's u32 length.
        self.0.subarray(start, end as u32).copy_to(buf);
        Ok(())
    }
}

/// The folder at `base_url`, fetched file by file (a 404 is a file the folder lacks), as an
/// object from each path to its bytes, left in JavaScript's memory: what `fromFiles` takes.
/// `on_progress(path, bytes)` hears of each file fetched. The crate's `ModelFiles::from_fetch`
/// decides which files to ask for, in which order.
pub(crate) async fn fetch_object(
    base_url: &str,
    on_progress: Option<&js_sys::Function>,
) -> Result<Object, JsError> {
    let base = base_url.trim_end_matches('/').to_string();
    let object = Object::new();
    ModelFiles::from_fetch(base.clone(), |name| {
        let (url, object) = (format!("{base}/{name}"), object.clone());
        async move {
            let body = get(&url).await.map_err(|message| failed(&url, message))?;
            let Some(array) = body else { return Ok(None) };
            if let Some(report) = on_progress {
                // A throwing callback must not stop the load: its error is the page's own.
                let _ = report.call2(&JsValue::NULL, &name.as_str().into(), &array.length().into());
            }
            js_sys::Reflect::set(&object, &name.as_str().into(), &array)
                .map_err(|_| failed(&url, "cannot keep the fetched bytes".into()))?;
            // Read for the shard index and modules.json; the other files are read by the load.
            Ok(Some(JsBytes::borrowed(array)))
        }
    })
    .await
    .map_err(js_error)?;
    Ok(object)
}

fn failed(url: &str, message: String) -> roformer::Error {
    roformer::Error::Io { path: url.into(), source: std::io::Error::other(message) }
}

/// The body of `url`, left in JavaScript's memory; `None` on a 404.
async fn get(url: &str) -> Result<Option<Uint8Array>, String> {
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
    Ok(Some(Uint8Array::new(&body)))
}
