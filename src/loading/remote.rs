//! A model folder fetched file by file through the caller's own asynchronous fetch (a browser's
//! `fetch`, say), asking for the same files, in the same order, as the Hub client
//! (`crate::loading::hub`) downloads.

use std::future::Future;
use std::path::PathBuf;

use crate::error::{Error, Result};
use crate::loading::layout::{
    is_shard_index, module_folders, shard_names, MODULE_FILES, OPTIONAL_FILES, TRANSFORMER_CONFIG_FILES,
    WEIGHT_FILES,
};
use crate::loading::model_files::{FileBytes, ModelFiles};

impl ModelFiles {
    /// A model folder in memory, fetched file by file with `fetch`: given a path inside the folder
    /// (`"config.json"`, `"1_Pooling/config.json"`), it returns the bytes (a `Vec<u8>`, or any
    /// [`FileBytes`]), `None` when the folder has no such file (HTTP 404), or an error. `name` stands for the folder in error messages.
    ///
    /// It asks for `config.json`, then the weights (the first of `model.safetensors`, its shard
    /// index with every shard, `pytorch_model.bin` and its index), then the tokenizer and
    /// sentence-transformers files and, where there is a `modules.json`, the Transformer module's
    /// settings (the first of `sentence_bert_config.json` and the older names) and the files of
    /// each module it names.
    ///
    /// ```
    /// # #[cfg(feature = "bundled-sst2")]
    /// # fn main() -> roformer::Result<()> {
    /// use std::future::Future;
    /// use std::task::{Context, Poll, Waker};
    ///
    /// // Any async client works; here the "server" is the built-in model, and each fetch is ready
    /// // at once, so one poll finishes the load.
    /// let server = roformer::ModelFiles::bundled_sst2()?;
    /// let fetch = |name: String| {
    ///     let found = server.contains(&name).then(|| server.read(&name).map(|b| b.into_owned()));
    ///     std::future::ready(found.transpose())
    /// };
    /// let mut load = std::pin::pin!(roformer::ModelFiles::from_fetch("sst2", fetch));
    /// let Poll::Ready(files) = load.as_mut().poll(&mut Context::from_waker(Waker::noop())) else {
    ///     unreachable!("every fetch was ready")
    /// };
    /// let files = files?;
    /// assert!(files.contains("model.safetensors") && files.contains("vocab.txt"));
    /// # Ok(())
    /// # }
    /// # #[cfg(not(feature = "bundled-sst2"))]
    /// # fn main() {}
    /// ```
    pub async fn from_fetch<F, Fut, B>(name: impl Into<PathBuf>, mut fetch: F) -> Result<Self>
    where
        F: FnMut(String) -> Fut,
        Fut: Future<Output = Result<Option<B>>>,
        B: Into<FileBytes>,
    {
        let root = name.into();
        // Each body as `FileBytes`, whatever the caller's fetch gives.
        let mut fetch = move |name: String| {
            let fetched = fetch(name);
            async move { fetched.await.map(|body| body.map(Into::into)) }
        };
        // The index and modules.json are read here; the rest only when the model loads.
        let contents =
            |bytes: &FileBytes, file: &str| bytes.contents().map_err(|e| Error::io(root.join(file), e));
        let mut files: Vec<(String, FileBytes)> = Vec::new();
        let missing = |file: &str, what: &str| {
            Error::io(root.join(file), std::io::Error::new(std::io::ErrorKind::NotFound, what.to_string()))
        };
        let config = fetch("config.json".into()).await?.ok_or_else(|| missing("config.json", "not found"))?;
        files.push(("config.json".into(), config));
        let mut weights = None;
        for file in WEIGHT_FILES {
            if let Some(bytes) = fetch(file.into()).await? {
                weights = Some((file, bytes));
                break;
            }
        }
        let (file, bytes) = weights.ok_or_else(|| {
            missing(WEIGHT_FILES[0], "no model.safetensors, shard index, pytorch_model.bin or its index")
        })?;
        let shards = if is_shard_index(file) {
            shard_names(&contents(&bytes, file)?, &root.join(file))?
        } else {
            Vec::new()
        };
        files.push((file.into(), bytes));
        for shard in shards {
            let bytes = fetch(shard.clone())
                .await?
                .ok_or_else(|| missing(&shard, "listed in the shard index but not found"))?;
            files.push((shard, bytes));
        }
        let mut modules = None;
        for file in OPTIONAL_FILES {
            if let Some(bytes) = fetch(file.into()).await? {
                if file == "modules.json" {
                    modules = Some(module_folders(&contents(&bytes, file)?, &root.join(file))?);
                }
                files.push((file.into(), bytes));
            }
        }
        if let Some(modules) = modules {
            for file in TRANSFORMER_CONFIG_FILES {
                if let Some(bytes) = fetch(file.into()).await? {
                    files.push((file.into(), bytes));
                    break;
                }
            }
            for module in modules {
                for file in MODULE_FILES {
                    let path = format!("{module}/{file}");
                    if let Some(bytes) = fetch(path.clone()).await? {
                        files.push((path, bytes));
                    }
                }
            }
        }
        ModelFiles::from_memory(root, files)
    }
}
