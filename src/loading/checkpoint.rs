//! Reading checkpoint weights in the Hugging Face layouts: `model.safetensors` (read tensor by tensor),
//! sharded safetensors with `model.safetensors.index.json`, and `pytorch_model.bin`.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use candle_core::pickle::PthTensors;
use candle_core::{CpuStorage, DType, Device, Shape, Storage, Tensor};
use candle_nn::var_builder::SimpleBackend;
use candle_nn::{Init, VarBuilder};

use crate::error::{Error, Result};
use crate::loading::layout::{is_shard_index, shard_names, WEIGHT_FILES};
use crate::loading::model_files::ModelFiles;
use crate::loading::safetensors_file::SafetensorsFile;

/// Prefix under which task models keep the encoder; bare `RoFormerModel` files omit it. The
/// checkpoint resolves names with or without it, so any model loads from any RoFormer file.
const BASE_PREFIX: &str = "roformer.";

enum WeightFile {
    /// Safetensors on disk or in memory (built into the binary, or handed over at run time),
    /// read tensor by tensor.
    Safetensors(SafetensorsFile),
    Pth(PthTensors),
}

struct Weights {
    /// The file a missing tensor is reported against: the single file or the shard index.
    origin: PathBuf,
    files: Vec<(PathBuf, WeightFile)>,
    /// Tensor name -> index into `files`.
    names: HashMap<String, usize>,
}

/// The weights of one checkpoint, opened lazily: tensors are read when a model asks for them.
///
/// ```
/// # #[cfg(feature = "bundled-sst2")]
/// # fn main() -> roformer::Result<()> {
/// use candle_core::{DType, Device};
/// use roformer::{Checkpoint, Config, ModelFiles, RoFormerForSequenceClassification};
///
/// let files = ModelFiles::bundled_sst2()?; // Checkpoint::open("folder or weight file") on disk
/// let checkpoint = Checkpoint::from_files(&files)?;
/// assert!(checkpoint.tensor_names().iter().any(|n| n == "classifier.out_proj.weight"));
/// let config = Config::from_files(&files)?;
/// let model: RoFormerForSequenceClassification = checkpoint.load(&config, DType::F32, &Device::Cpu)?;
/// # Ok(())
/// # }
/// # #[cfg(not(feature = "bundled-sst2"))]
/// # fn main() {}
/// ```
#[derive(Clone)]
pub struct Checkpoint {
    weights: Arc<Weights>,
}

impl std::fmt::Debug for Checkpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Checkpoint")
            .field("origin", &self.weights.origin)
            .field("tensors", &self.weights.names.len())
            .finish()
    }
}

impl Checkpoint {
    /// Opens a checkpoint folder (preferring `model.safetensors`, then its shard index, then
    /// `pytorch_model.bin` and its index) or a single weight file.
    pub fn open(path: impl AsRef<Path>) -> Result<Self> {
        let path = path.as_ref();
        if path.is_dir() {
            Self::from_files(&ModelFiles::from_dir(path))
        } else {
            let folder = ModelFiles::from_dir(path.parent().unwrap_or(Path::new(".")));
            let name = path.file_name().and_then(|n| n.to_str()).unwrap_or_default();
            Self::open_file(&folder, name)
        }
    }

    /// Opens the weights of a model folder on disk or in memory, as [`Checkpoint::open`] opens a
    /// folder. In memory, weights must be safetensors (a single file or shards).
    pub fn from_files(folder: &ModelFiles) -> Result<Self> {
        match WEIGHT_FILES.iter().find(|c| folder.contains(c)) {
            Some(file) => Self::open_file(folder, file),
            None => Err(Error::Checkpoint {
                path: folder.root().to_path_buf(),
                message: format!("no weights found (looked for {})", WEIGHT_FILES.join(", ")),
                source: None,
            }),
        }
    }

    /// Opens the weight file `name` of `folder`, or the shards its index lists.
    fn open_file(folder: &ModelFiles, name: &str) -> Result<Self> {
        let path = folder.path(name);
        let shards = if is_shard_index(name) {
            shard_names(&folder.read(name)?, &path)?
        } else {
            vec![name.to_string()]
        };
        let mut files = Vec::with_capacity(shards.len());
        let mut names = HashMap::new();
        for (i, shard) in shards.into_iter().enumerate() {
            let file = open_weight_file(folder, &shard)?;
            let shard = folder.path(&shard);
            let tensor_names: Vec<String> = match &file {
                WeightFile::Safetensors(st) => st.names().cloned().collect(),
                WeightFile::Pth(pth) => pth.tensor_infos().keys().cloned().collect(),
            };
            for n in tensor_names {
                names.insert(n, i);
            }
            files.push((shard, file));
        }
        Ok(Self { weights: Arc::new(Weights { origin: path, files, names }) })
    }

    /// The file the checkpoint was opened from.
    pub fn path(&self) -> &Path {
        &self.weights.origin
    }

    /// Every tensor name in the checkpoint, sorted.
    pub fn tensor_names(&self) -> Vec<String> {
        self.weights.names.keys().cloned().collect::<BTreeSet<_>>().into_iter().collect()
    }

    /// Reads one tensor (with or without the `roformer.` prefix) in its stored dtype, on the CPU.
    pub fn tensor(&self, name: &str) -> Result<Tensor> {
        self.find(name)?
            .ok_or_else(|| Error::MissingTensor { path: self.path().to_path_buf(), tensor: name.into() })
    }

    /// A tensor by the name a model asks for (with or without the `roformer.` prefix), if present.
    pub fn find(&self, name: &str) -> Result<Option<Tensor>> {
        let backend = Backend::new(self.weights.clone());
        if backend.resolve(name).is_none() {
            return Ok(None);
        }
        backend.read(name).map(Some)
    }

    /// Builds a model with `build` from a `VarBuilder` over these weights, converting them to
    /// `dtype` on `device`; `model` names it in the warning about unused tensors.
    ///
    /// Loading knows no model type: the public `Checkpoint::load::<M>` and `load_dir::<M>` for
    /// every `TaskModel` are in `model/task.rs`, one layer up, and call this.
    ///
    /// Tensors the model does not use are reported as transformers does: a warning through the
    /// `log` crate naming them, and an error when they are encoder layers, since then the config
    /// disagrees with the weights (a `num_hidden_layers` too small, say).
    pub(crate) fn build<T>(
        &self,
        dtype: DType,
        device: &Device,
        model: &str,
        build: impl FnOnce(VarBuilder) -> Result<T>,
    ) -> Result<T> {
        let backend = Backend::new(self.weights.clone());
        let (error, used) = (backend.error.clone(), backend.used.clone());
        let vb = VarBuilder::from_backend(Box::new(backend), dtype, device.clone());
        let built = build(vb).map_err(|e| error.lock().ok().and_then(|mut slot| slot.take()).unwrap_or(e))?;
        let used = used.lock().map(|u| u.clone()).unwrap_or_default();
        self.check_unused(&used, model)?;
        Ok(built)
    }

    fn check_unused(&self, used: &HashSet<String>, model: &str) -> Result<()> {
        let model = model.rsplit("::").next().unwrap_or(model);
        let unused: Vec<String> = self
            .tensor_names()
            .into_iter()
            .filter(|n| !used.contains(n) && !n.ends_with("encoder.embed_positions.weight"))
            .collect();
        let layers: Vec<&String> = unused.iter().filter(|n| is_encoder_layer(n)).collect();
        if !layers.is_empty() {
            return Err(Error::Checkpoint {
                path: self.path().to_path_buf(),
                message: format!(
                    "{} encoder-layer tensors are not used by the config (check num_hidden_layers and the \
                     other sizes): {}",
                    layers.len(),
                    abbreviate(&layers)
                ),
                source: None,
            });
        }
        if !unused.is_empty() {
            log::warn!(
                "{}: {} tensors are not used by {model}: {}",
                self.path().display(),
                unused.len(),
                abbreviate(&unused.iter().collect::<Vec<_>>())
            );
        }
        Ok(())
    }
}

fn is_encoder_layer(name: &str) -> bool {
    name.strip_prefix(BASE_PREFIX).unwrap_or(name).starts_with("encoder.layer.")
}

/// The first few names of a list, and how many more there are.
fn abbreviate(names: &[&String]) -> String {
    const SHOWN: usize = 8;
    let head: Vec<&str> = names.iter().take(SHOWN).map(|n| n.as_str()).collect();
    match names.len().saturating_sub(SHOWN) {
        0 => head.join(", "),
        more => format!("{}, and {more} more", head.join(", ")),
    }
}

fn open_weight_file(folder: &ModelFiles, name: &str) -> Result<WeightFile> {
    let path = &folder.path(name);
    if !folder.contains(name) {
        return Err(Error::io(
            path,
            std::io::Error::new(std::io::ErrorKind::NotFound, "weight file not found"),
        ));
    }
    let corrupt = |message: String| Error::Checkpoint {
        path: path.to_path_buf(),
        message: format!("unreadable weight file (truncated or corrupt?): {message}"),
        source: None,
    };
    let pickle = path.extension().is_some_and(|e| e == "bin" || e == "pt" || e == "pth");
    if pickle {
        if !folder.is_on_disk() {
            return Err(Error::Checkpoint {
                path: path.clone(),
                message: "a model held in memory needs its weights as safetensors, not a PyTorch pickle"
                    .into(),
                source: None,
            });
        }
        return PthTensors::new(path, None).map(WeightFile::Pth).map_err(|e| corrupt(root_message(&e)));
    }
    SafetensorsFile::open(folder.ranged(name)?).map(WeightFile::Safetensors).map_err(corrupt)
}

/// The innermost message of a Candle error, without backtraces or repeated paths.
fn root_message(e: &candle_core::Error) -> String {
    match e {
        candle_core::Error::WithBacktrace { inner, .. } | candle_core::Error::WithPath { inner, .. } => {
            root_message(inner)
        }
        other => other.to_string(),
    }
}

/// The `VarBuilder` backend over a checkpoint. Candle's error type cannot carry ours back, so
/// the first typed error is kept aside and `Checkpoint::build` returns it instead.
struct Backend {
    weights: Arc<Weights>,
    error: Arc<Mutex<Option<Error>>>,
    /// Stored names the model has read.
    used: Arc<Mutex<HashSet<String>>>,
}

impl Backend {
    fn new(weights: Arc<Weights>) -> Self {
        Self { weights, error: Default::default(), used: Default::default() }
    }

    fn fail(&self, e: Error) -> candle_core::Error {
        let message = e.to_string();
        if let Ok(mut slot) = self.error.lock() {
            slot.get_or_insert(e);
        }
        candle_core::Error::Msg(message)
    }

    /// The stored name for `name`: itself, or the same name without / with the `roformer.` prefix.
    fn resolve(&self, name: &str) -> Option<(usize, String)> {
        let names = &self.weights.names;
        let candidates = [
            Some(name.to_string()),
            name.strip_prefix(BASE_PREFIX).map(str::to_string),
            Some(format!("{BASE_PREFIX}{name}")),
        ];
        candidates.into_iter().flatten().find_map(|n| names.get(&n).map(|&i| (i, n)))
    }

    fn read(&self, name: &str) -> Result<Tensor> {
        let Some((file, stored)) = self.resolve(name) else {
            return Err(Error::MissingTensor { path: self.weights.origin.clone(), tensor: name.to_string() });
        };
        let (path, weights) = &self.weights.files[file];
        let tensor = match weights {
            WeightFile::Safetensors(st) => st.load(&stored),
            WeightFile::Pth(pth) => pth.get(&stored).and_then(|t| t.ok_or(candle_core::Error::UnwrapNone)),
        };
        let bad = |message: String| Error::Checkpoint {
            path: path.clone(),
            message: format!("tensor `{stored}` {message}"),
            source: None,
        };
        let tensor = tensor.map_err(|e| bad(format!("cannot be read: {}", root_message(&e))))?;
        // Every weight of a RoFormer is a float: integer bytes would be converted silently.
        if !tensor.dtype().is_float() {
            return Err(bad(format!("is stored as {:?}, but it is a float weight", tensor.dtype())));
        }
        if let Some(position) = first_non_finite(&tensor) {
            return Err(bad(format!("holds a non-finite value (NaN or infinity) at flat index {position}")));
        }
        if let Ok(mut used) = self.used.lock() {
            used.insert(stored);
        }
        Ok(tensor)
    }
}

/// The flat index of the first NaN or infinity of a CPU tensor, if any.
fn first_non_finite(tensor: &Tensor) -> Option<usize> {
    let (storage, layout) = tensor.storage_and_layout();
    let Storage::Cpu(cpu) = &*storage else { return None };
    let range = layout.contiguous_offsets().unwrap_or((0, 0));
    let range = range.0..range.1;
    match cpu {
        CpuStorage::F32(v) => v[range].iter().position(|x| !x.is_finite()),
        CpuStorage::F64(v) => v[range].iter().position(|x| !x.is_finite()),
        CpuStorage::F16(v) => v[range].iter().position(|x| !x.is_finite()),
        CpuStorage::BF16(v) => v[range].iter().position(|x| !x.is_finite()),
        _ => None,
    }
}

impl SimpleBackend for Backend {
    fn get(&self, s: Shape, name: &str, _: Init, dtype: DType, dev: &Device) -> candle_core::Result<Tensor> {
        let tensor = self.read(name).map_err(|e| self.fail(e))?;
        if tensor.shape() != &s {
            let path = self.resolve(name).map(|(i, _)| self.weights.files[i].0.clone()).unwrap_or_default();
            return Err(self.fail(Error::ShapeMismatch {
                path,
                tensor: name.to_string(),
                expected: s.dims().to_vec(),
                found: tensor.dims().to_vec(),
            }));
        }
        tensor.to_dtype(dtype)?.to_device(dev)
    }

    fn get_unchecked(&self, name: &str, dtype: DType, dev: &Device) -> candle_core::Result<Tensor> {
        self.read(name).map_err(|e| self.fail(e))?.to_dtype(dtype)?.to_device(dev)
    }

    fn contains_tensor(&self, name: &str) -> bool {
        self.resolve(name).is_some()
    }
}
