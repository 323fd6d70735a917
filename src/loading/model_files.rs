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
    memory: Option<Arc<BTreeMap<String, FileBytes>>>,
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
    /// `"1_Pooling/config.json"`) with its bytes ([`FileBytes`]: a `Vec<u8>`, static bytes, or
    /// bytes read in ranges from where they are held). `name` stands for the folder in error
    /// messages. A path that is absolute, empty, or climbs out with `..` is refused.
    pub fn from_memory<P, B>(
        name: impl Into<PathBuf>,
        files: impl IntoIterator<Item = (P, B)>,
    ) -> Result<Self>
    where
        P: AsRef<str>,
        B: Into<FileBytes>,
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

    /// File `name` to read in ranges: on disk, opened (not read, not mapped); in memory, the
    /// folder's own bytes, not a copy.
    pub(crate) fn ranged(&self, name: &str) -> Result<Box<dyn RangedBytes>> {
        let path = self.path(name);
        let Some(files) = &self.memory else {
            let file = std::fs::File::open(&path).map_err(|e| Error::io(&path, e))?;
            let len = file.metadata().map_err(|e| Error::io(&path, e))?.len();
            return Ok(Box::new(DiskFile { file: std::sync::Mutex::new(file), len }));
        };
        let key = format!("{}{name}", self.prefix);
        match files.get(&key) {
            Some(FileBytes::Held(_)) => Ok(Box::new(SharedBytes { files: files.clone(), key })),
            Some(FileBytes::Ranged(bytes)) => Ok(Box::new(bytes.clone())),
            None => Err(not_among(path)),
        }
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
        let Some(files) = &self.memory else {
            return std::fs::read(&path).map(Cow::Owned).map_err(|e| Error::io(path, e));
        };
        match files.get(&format!("{}{name}", self.prefix)) {
            Some(bytes) => bytes.contents().map_err(|e| Error::io(path, e)),
            None => Err(not_among(path)),
        }
    }

    /// The JSON file `name`, `None` when absent; a malformed one is an error naming it.
    pub(crate) fn read_json_if_exists(&self, name: &str) -> Result<Option<Value>> {
        if !self.contains(name) {
            return Ok(None);
        }
        parse_json(&self.read(name)?, &self.path(name)).map(Some)
    }

    /// [`ModelFiles::read_json_if_exists`] of a settings file, which must hold a JSON object (its
    /// fields are settings by name); anything else is an error naming the file.
    pub(crate) fn read_json_object_if_exists(&self, name: &str) -> Result<Option<Value>> {
        let config = self.read_json_if_exists(name)?;
        match &config {
            Some(value) if !value.is_object() => {
                Err(Error::config_in(&self.path(name), "", format!("expected a JSON object, found {value}")))
            }
            _ => Ok(config),
        }
    }
}

fn not_among(path: PathBuf) -> Error {
    Error::io(path, std::io::Error::new(std::io::ErrorKind::NotFound, "not among the model's files"))
}

/// The bytes of one file of an in-memory folder.
#[derive(Clone)]
pub enum FileBytes {
    /// Held here: read in place, not copied.
    Held(Cow<'static, [u8]>),
    /// Held elsewhere (a JavaScript buffer outside WebAssembly memory, say) and read in ranges:
    /// a weight file is read tensor by tensor, and never copied in whole.
    Ranged(Arc<dyn RangedBytes>),
}

impl FileBytes {
    /// All the bytes: the held ones, or a copy read from where they are held.
    pub(crate) fn contents(&self) -> std::io::Result<Cow<'static, [u8]>> {
        match self {
            FileBytes::Held(bytes) => Ok(bytes.clone()),
            FileBytes::Ranged(bytes) => {
                let len = usize::try_from(bytes.len()).map_err(std::io::Error::other)?;
                let mut all = vec![0; len];
                bytes.read_at(0, &mut all)?;
                Ok(Cow::Owned(all))
            }
        }
    }
}

impl std::fmt::Debug for FileBytes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FileBytes::Held(bytes) => write!(f, "FileBytes::Held({} bytes)", bytes.len()),
            FileBytes::Ranged(bytes) => write!(f, "FileBytes::Ranged({} bytes)", bytes.len()),
        }
    }
}

impl From<Vec<u8>> for FileBytes {
    fn from(bytes: Vec<u8>) -> Self {
        FileBytes::Held(Cow::Owned(bytes))
    }
}

impl From<&'static [u8]> for FileBytes {
    fn from(bytes: &'static [u8]) -> Self {
        FileBytes::Held(Cow::Borrowed(bytes))
    }
}

impl<const N: usize> From<&'static [u8; N]> for FileBytes {
    fn from(bytes: &'static [u8; N]) -> Self {
        FileBytes::Held(Cow::Borrowed(bytes))
    }
}

impl From<Cow<'static, [u8]>> for FileBytes {
    fn from(bytes: Cow<'static, [u8]>) -> Self {
        FileBytes::Held(bytes)
    }
}

impl From<Arc<dyn RangedBytes>> for FileBytes {
    fn from(bytes: Arc<dyn RangedBytes>) -> Self {
        FileBytes::Ranged(bytes)
    }
}

/// The held bytes of one file of an in-memory folder, kept alive by a share of the folder's files.
struct SharedBytes {
    files: Arc<BTreeMap<String, FileBytes>>,
    key: String,
}

impl SharedBytes {
    /// The file's bytes. They stay at one address while `self` lives: the map behind the `Arc`
    /// is never changed after `ModelFiles::from_memory` builds it (nothing takes it mutably), and
    /// a `Cow`'s bytes (a `Vec`'s heap buffer, or static data) do not move with the map.
    fn bytes(&self) -> &[u8] {
        match &self.files[&self.key] {
            FileBytes::Held(bytes) => bytes,
            FileBytes::Ranged(_) => &[],
        }
    }
}

/// A file read in ranges, never as a whole: what lets a weight file load tensor by tensor. A
/// host that holds a file's bytes outside this program's memory implements it, and hands the
/// file over as [`FileBytes::Ranged`].
pub trait RangedBytes: Send + Sync {
    /// The file's length in bytes.
    fn len(&self) -> u64;
    /// Whether the file is empty.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Fills `buf` with the bytes from `offset`; a range past the end is an error.
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> std::io::Result<()>;
}

impl<T: RangedBytes + ?Sized> RangedBytes for Arc<T> {
    fn len(&self) -> u64 {
        (**self).len()
    }

    fn read_at(&self, offset: u64, buf: &mut [u8]) -> std::io::Result<()> {
        (**self).read_at(offset, buf)
    }
}

impl RangedBytes for SharedBytes {
    fn len(&self) -> u64 {
        self.bytes().len() as u64
    }

    fn read_at(&self, offset: u64, buf: &mut [u8]) -> std::io::Result<()> {
        let bytes = self.bytes();
        let range = usize::try_from(offset).ok().and_then(|start| Some(start..start.checked_add(buf.len())?));
        match range.and_then(|range| bytes.get(range)) {
            Some(part) => {
                buf.copy_from_slice(part);
                Ok(())
            }
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
        // The weights are read from the folder's own bytes, not a copy of them.
        let key = "model.safetensors".to_string();
        let shared = SharedBytes { files: files.memory.clone().unwrap(), key };
        let FileBytes::Held(held) = &files.memory.as_ref().unwrap()["model.safetensors"] else {
            unreachable!()
        };
        assert!(std::ptr::eq(shared.bytes(), &**held));
        let mut part = [0u8; 5];
        files.ranged("model.safetensors").unwrap().read_at(6, &mut part).unwrap();
        assert_eq!(&part, b"safet");
        let past = files.ranged("model.safetensors").unwrap().read_at(14, &mut part).unwrap_err();
        assert!(past.to_string().contains("past the end"), "{past}");
        assert!(ModelFiles::from_dir("/nowhere").ranged("model.safetensors").is_err());
    }
}
