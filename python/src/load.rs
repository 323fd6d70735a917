//! The options every class loads with, read once here: a model is a folder or a Hub id, and
//! `Load` says where it comes from (`revision`, `token`, `cache_folder`, `local_files_only`), how
//! it runs (`precision`, `threads`, `device`) and how far inputs go (`max_seq_length`).

use std::path::PathBuf;

use candle_core::{DType, Device};
use pyo3::prelude::*;
use roformer::{PipelineOptions, Quantization};

use crate::errors::{value_error, OrRaise};
use crate::inputs::at_least_one;

/// Texts per forward pass inside the library: the binding hands it one batch at a time (see
/// `batches`), so this only has to be larger than any batch size a caller asks for.
pub const ONE_BATCH: usize = 1 << 20;

/// Loading options, checked when made.
#[pyclass(frozen, module = "roformer_rs._native")]
pub struct Load {
    options: PipelineOptions,
    precision: &'static str,
}

fn device(spec: &str) -> PyResult<Device> {
    let unavailable = |e: candle_core::Error| value_error(format!("device `{spec}` is not available: {e}"));
    match spec {
        "cpu" => Ok(Device::Cpu),
        "metal" => Device::new_metal(0).map_err(unavailable),
        "cuda" => Device::new_cuda(0).map_err(unavailable),
        _ => match spec.strip_prefix("cuda:").map(str::parse::<usize>) {
            Some(Ok(ordinal)) => Device::new_cuda(ordinal).map_err(unavailable),
            _ => Err(value_error(format!("unknown device `{spec}` (cpu, cuda, cuda:N or metal)"))),
        },
    }
}

#[pymethods]
impl Load {
    #[new]
    #[pyo3(signature = (*, revision=None, token=None, cache_folder=None, local_files_only=false,
                        precision="float32", threads=None, device="cpu", max_seq_length=None))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        revision: Option<String>,
        token: Option<String>,
        cache_folder: Option<PathBuf>,
        local_files_only: bool,
        precision: &str,
        threads: Option<usize>,
        device: &str,
        max_seq_length: Option<usize>,
    ) -> PyResult<Self> {
        let mut options =
            PipelineOptions::default().with_batch_size(ONE_BATCH).with_device(self::device(device)?);
        let precision = match precision {
            "float32" => "float32",
            "int8" => {
                options = options.with_quantization(Quantization::Int8);
                "int8"
            }
            "bfloat16" => {
                options = options.with_dtype(DType::BF16);
                "bfloat16"
            }
            other => {
                return Err(value_error(format!("unknown precision `{other}` (float32, int8 or bfloat16)")))
            }
        };
        if let Some(revision) = revision {
            options = options.with_revision(revision);
        }
        if let Some(token) = token {
            options = options.with_token(token);
        }
        if let Some(folder) = cache_folder {
            options = options.with_cache_dir(folder);
        }
        if local_files_only {
            options = options.with_offline(true);
        }
        if let Some(threads) = threads {
            options = options.with_threads(at_least_one(threads, "threads")?);
        }
        if let Some(length) = max_seq_length {
            options = options.with_max_length(at_least_one(length, "max_seq_length")?);
        }
        Ok(Self { options, precision })
    }

    /// float32, int8 or bfloat16.
    #[getter]
    fn precision(&self) -> &'static str {
        self.precision
    }

    /// Threads of the model's own pool; `None` for one per core.
    #[getter]
    fn threads(&self) -> Option<usize> {
        self.options.threads
    }
}

impl Load {
    /// A model loaded with these options by `from` (a library constructor), without the GIL: reading
    /// and repacking weights takes seconds.
    pub fn load<T: Send>(
        &self,
        py: Python<'_>,
        from: impl FnOnce(PipelineOptions) -> roformer::Result<T> + Send,
    ) -> PyResult<T> {
        let options = self.options.clone();
        py.detach(|| from(options)).or_raise()
    }
}
