//! A model folder fetched file by file through the caller's own asynchronous fetch (a browser's
//! `fetch`, say), asking for the files `file_plan` names, as the Hub client
//! (`crate::loading::hub`) does.

use std::future::Future;
use std::path::PathBuf;

use crate::error::{Error, Result};
use crate::loading::file_plan::FilePlan;
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
        let mut plan = FilePlan::new();
        while let Some(ask) = plan.next() {
            let file = ask.file().to_string();
            let Some(bytes) = fetch(file.clone()).await? else {
                match plan.missing(&ask) {
                    Some(gap) => return Err(missing(gap.file(), &gap.to_string())),
                    None => continue,
                }
            };
            plan.found(&ask, &root.join(&file), || contents(&bytes, &file))?;
            files.push((file, bytes));
        }
        ModelFiles::from_memory(root, files)
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::future::Future;
    use std::task::{Context, Poll, Waker};

    use super::*;

    /// `from_fetch` over a server holding `folder`, whose every answer is ready at once.
    fn load(folder: &[(&str, &str)]) -> Result<ModelFiles> {
        let folder: BTreeMap<String, Vec<u8>> =
            folder.iter().map(|(name, body)| (name.to_string(), body.as_bytes().to_vec())).collect();
        let fetch = |name: String| std::future::ready(Ok(folder.get(&name).cloned()));
        let mut load = std::pin::pin!(ModelFiles::from_fetch("remote", fetch));
        match load.as_mut().poll(&mut Context::from_waker(Waker::noop())) {
            Poll::Ready(files) => files,
            Poll::Pending => panic!("every fetch was ready"),
        }
    }

    #[test]
    fn a_folder_the_server_lacks_a_needed_file_of_is_an_error_naming_it() {
        let index = r#"{"weight_map": {"a": "model-1.safetensors", "b": "model-2.safetensors"}}"#;
        let cases: [(&[(&str, &str)], &str); 3] = [
            (&[("model.safetensors", "")], "remote/config.json: not found"),
            (
                &[("config.json", "{}"), ("vocab.txt", "")],
                "remote/model.safetensors: no model.safetensors, shard index, pytorch_model.bin or its index",
            ),
            (
                &[
                    ("config.json", "{}"),
                    ("model.safetensors.index.json", index),
                    ("model-1.safetensors", ""),
                ],
                "remote/model-2.safetensors: listed in model.safetensors.index.json but not found",
            ),
        ];
        for (folder, expected) in cases {
            let err = load(folder).expect_err("an incomplete folder");
            // The path is the error's, what is wrong its source's (the I/O error a fetch would give).
            let said = format!(
                "{err}: {}",
                std::error::Error::source(&err).map(ToString::to_string).unwrap_or_default()
            );
            assert_eq!(said, expected);
        }
        let files = load(&[
            ("config.json", "{}"),
            ("model.safetensors.index.json", index),
            ("model-1.safetensors", ""),
            ("model-2.safetensors", ""),
        ])
        .unwrap();
        assert!(files.contains("model-2.safetensors"));
    }
}
