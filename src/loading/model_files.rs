//! The files of one model folder, read from disk or held in memory. The loaders read a folder
//! only through this type, so a model built into the binary, or handed over as bytes, loads
//! exactly as the same folder on disk would, with errors naming the same files.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::Value;

use crate::error::{Error, Result};
use crate::loading::json::parse_json;
use crate::loading::layout::validate_relative;

/// A model folder: `config.json`, the weights and the tokenizer files, on disk or in memory.
///
/// ```
/// # fn main() -> roformer::Result<()> {
/// let files = roformer::ModelFiles::from_memory(
///     "my-model",
///     [("config.json", br#"{"vocab_size": 10}"#.to_vec()), ("vocab.txt", b"[PAD]\n[UNK]\n".to_vec())],
/// )?;
/// assert!(files.contains("vocab.txt"));
/// assert!(!files.contains("model.safetensors"));
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct ModelFiles {
    /// The folder on disk, or the name an in-memory folder's errors are reported under.
    root: PathBuf,
    /// In-memory files by their path inside the folder (`/`-separated); `None` reads from disk.
    memory: Option<Arc<BTreeMap<String, Cow<'static, [u8]>>>>,
    /// For a subfolder of an in-memory folder: its path inside it, with a trailing `/`.
    prefix: String,
}

impl std::fmt::Debug for ModelFiles {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.memory {
            None => f.debug_tuple("ModelFiles::Dir").field(&self.root).finish(),
            Some(files) => f
                .debug_struct("ModelFiles::Memory")
                .field("name", &self.root)
                .field(
                    "files",
                    &files.keys().filter_map(|k| k.strip_prefix(&self.prefix)).collect::<Vec<_>>(),
                )
                .finish(),
        }
    }
}

impl ModelFiles {
    /// The folder `dir` on disk.
    pub fn from_dir(dir: impl Into<PathBuf>) -> Self {
        Self { root: dir.into(), memory: None, prefix: String::new() }
    }

    /// A folder held in memory: each file's path inside the folder (`"config.json"`,
    /// `"1_Pooling/config.json"`) with its bytes. `name` stands for the folder in error messages.
    /// A path that is absolute, empty, or climbs out with `..` is refused.
    pub fn from_memory<P, B>(
        name: impl Into<PathBuf>,
        files: impl IntoIterator<Item = (P, B)>,
    ) -> Result<Self>
    where
        P: AsRef<str>,
        B: Into<Cow<'static, [u8]>>,
    {
        let root = name.into();
        let mut map = BTreeMap::new();
        for (path, bytes) in files {
            let path = path.as_ref().trim_start_matches("./");
            validate_relative(path).map_err(|message| Error::Io {
                path: root.join(path),
                source: std::io::Error::new(std::io::ErrorKind::InvalidInput, message),
            })?;
            map.insert(path.to_string(), bytes.into());
        }
        Ok(Self { root, memory: Some(Arc::new(map)), prefix: String::new() })
    }

    /// The subfolder `folder` (a sentence-transformers module's, say), sharing the same files.
    pub(crate) fn sub(&self, folder: &str) -> Self {
        let folder = folder.trim_end_matches('/');
        let prefix =
            if folder.is_empty() { self.prefix.clone() } else { format!("{}{folder}/", self.prefix) };
        Self { root: self.root.join(folder), memory: self.memory.clone(), prefix }
    }

    /// The folder on disk, or the name of an in-memory folder.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Whether the folder lives on disk (and so can be handed to code that reads paths).
    pub fn is_on_disk(&self) -> bool {
        self.memory.is_none()
    }

    /// Where `name` is (on disk) or is reported as (in memory).
    pub fn path(&self, name: &str) -> PathBuf {
        self.root.join(name)
    }

    /// Whether the folder has the file `name`.
    pub fn contains(&self, name: &str) -> bool {
        match &self.memory {
            None => self.root.join(name).is_file(),
            Some(files) => files.contains_key(&format!("{}{name}", self.prefix)),
        }
    }

    /// The bytes of `name`; a missing file is an [`Error::Io`] naming it.
    pub fn read(&self, name: &str) -> Result<Cow<'static, [u8]>> {
        let path = self.root.join(name);
        match &self.memory {
            None => std::fs::read(&path).map(Cow::Owned).map_err(|e| Error::io(path, e)),
            Some(files) => files.get(&format!("{}{name}", self.prefix)).cloned().ok_or_else(|| {
                Error::io(
                    path,
                    std::io::Error::new(std::io::ErrorKind::NotFound, "not among the model's files"),
                )
            }),
        }
    }

    /// The JSON file `name`, `None` when absent; a malformed one is an error naming it.
    pub(crate) fn read_json_if_exists(&self, name: &str) -> Result<Option<Value>> {
        if !self.contains(name) {
            return Ok(None);
        }
        parse_json(&self.read(name)?, &self.path(name)).map(Some)
    }
}
