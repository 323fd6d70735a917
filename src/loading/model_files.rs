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

    /// The bytes of in-memory file `name`, shared with this folder rather than copied (a
    /// weight file is most of a model's size); `None` for a folder on disk.
    pub(crate) fn shared(&self, name: &str) -> Result<Option<SharedBytes>> {
        let Some(files) = &self.memory else { return Ok(None) };
        let key = format!("{}{name}", self.prefix);
        if !files.contains_key(&key) {
            return Err(Error::io(
                self.root.join(name),
                std::io::Error::new(std::io::ErrorKind::NotFound, "not among the model's files"),
            ));
        }
        Ok(Some(SharedBytes { files: files.clone(), key }))
    }

    /// File `name` to read in ranges: on disk, opened (not read, not mapped); in memory, the
    /// folder's own bytes.
    pub(crate) fn ranged(&self, name: &str) -> Result<Box<dyn RangedBytes>> {
        if let Some(bytes) = self.shared(name)? {
            return Ok(Box::new(bytes));
        }
        let path = self.path(name);
        let file = std::fs::File::open(&path).map_err(|e| Error::io(&path, e))?;
        let len = file.metadata().map_err(|e| Error::io(&path, e))?.len();
        Ok(Box::new(DiskFile { file: std::sync::Mutex::new(file), len }))
    }

    /// This folder without the bytes of the model's weight files at its top (`model.safetensors`,
    /// its shards, `pytorch_model.bin`): what a loaded pipeline keeps, to read its small files
    /// later, without holding the weights twice. The same folder when on disk.
    pub(crate) fn without_weights(&self) -> Self {
        let Some(files) = &self.memory else { return self.clone() };
        let weight = |key: &str| {
            let name = key.strip_prefix(&self.prefix).unwrap_or(key);
            !name.contains('/') && (name.ends_with(".safetensors") || name.ends_with(".bin"))
        };
        let kept = files.iter().filter(|(k, _)| !weight(k)).map(|(k, v)| (k.clone(), v.clone()));
        Self { root: self.root.clone(), memory: Some(Arc::new(kept.collect())), prefix: self.prefix.clone() }
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

/// The bytes of one file of an in-memory folder, kept alive by a share of the folder's files.
pub(crate) struct SharedBytes {
    files: Arc<BTreeMap<String, Cow<'static, [u8]>>>,
    key: String,
}

impl SharedBytes {
    /// The file's bytes. They stay at one address while `self` lives: the map behind the `Arc`
    /// is never changed after `ModelFiles::from_memory` builds it (nothing takes it mutably), and
    /// a `Cow`'s bytes (a `Vec`'s heap buffer, or static data) do not move with the map.
    pub(crate) fn bytes(&self) -> &[u8] {
        &self.files[&self.key]
    }
}

/// A file read in ranges, never as a whole: what lets a weight file load tensor by tensor.
pub(crate) trait RangedBytes: Send + Sync {
    /// The file's length in bytes.
    fn len(&self) -> u64;
    /// Fills `buf` with the bytes from `offset`; a range past the end is an error.
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> std::io::Result<()>;
}

impl RangedBytes for SharedBytes {
    fn len(&self) -> u64 {
        self.bytes().len() as u64
    }

    fn read_at(&self, offset: u64, buf: &mut [u8]) -> std::io::Result<()> {
        let bytes = self.bytes();
        let range = usize::try_from(offset).ok().and_then(|start| Some(start..start.checked_add(buf.len())?));
        match range.and_then(|range| bytes.get(range)) {
            Some(part) => Ok(buf.copy_from_slice(part)),
            None => Err(past_the_end(offset, buf.len(), bytes.len() as u64)),
        }
    }
}

/// A file on disk, read with one seek and one read per range.
struct DiskFile {
    file: std::sync::Mutex<std::fs::File>,
    len: u64,
}

impl RangedBytes for DiskFile {
    fn len(&self) -> u64 {
        self.len
    }

    fn read_at(&self, offset: u64, buf: &mut [u8]) -> std::io::Result<()> {
        use std::io::{Read, Seek, SeekFrom};
        if offset.checked_add(buf.len() as u64).is_none_or(|end| end > self.len) {
            return Err(past_the_end(offset, buf.len(), self.len));
        }
        let mut file = self.file.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        file.seek(SeekFrom::Start(offset))?;
        file.read_exact(buf)
    }
}

fn past_the_end(offset: u64, len: usize, file_len: u64) -> std::io::Error {
    std::io::Error::new(
        std::io::ErrorKind::UnexpectedEof,
        format!("{len} bytes from offset {offset} run past the end of the file ({file_len} bytes)"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_loaded_pipeline_keeps_the_small_files_but_not_the_weights() {
        let names = [
            "config.json",
            "model.safetensors",
            "model-00001-of-00002.safetensors",
            "pytorch_model.bin",
            "vocab.txt",
            "2_Dense/model.safetensors",
        ];
        let files = ModelFiles::from_memory("mem", names.map(|n| (n, n.as_bytes().to_vec()))).unwrap();
        let kept = files.without_weights();
        let has: Vec<bool> = names.iter().map(|n| kept.contains(n)).collect();
        assert_eq!(has, [true, false, false, false, true, true]);
        assert_eq!(&*kept.read("vocab.txt").unwrap(), b"vocab.txt");
        // The shared bytes are the folder's own, not a copy.
        let shared = files.shared("model.safetensors").unwrap().unwrap();
        assert_eq!(shared.bytes(), b"model.safetensors");
        assert!(std::ptr::eq(shared.bytes(), &*files.memory.as_ref().unwrap()["model.safetensors"]));
        assert!(ModelFiles::from_dir("/nowhere").shared("model.safetensors").unwrap().is_none());
    }
}
