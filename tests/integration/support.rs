//! Helpers shared by the integration tests: fixture paths, references, and tolerance checks.
#![allow(dead_code)]

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::OnceLock;

use candle_core::{DType, Device, Tensor};

/// The device the model and pipeline tests run on, read once from `ROFORMER_TEST_DEVICE`: `cpu` (the
/// default), `cuda` or `cuda:N`, `metal` or `metal:N`. The same tests run on the CPU in CI and on a GPU
/// by scripts/checks/gpu_check.sh; a build without the device's feature fails here, by name.
pub fn device() -> &'static Device {
    static DEVICE: OnceLock<Device> = OnceLock::new();
    DEVICE.get_or_init(|| {
        let name = std::env::var("ROFORMER_TEST_DEVICE").unwrap_or_default();
        let name = name.trim().to_ascii_lowercase();
        let (kind, ordinal) = match name.split_once(':') {
            Some((kind, n)) => {
                (kind, n.parse().unwrap_or_else(|_| panic!("ROFORMER_TEST_DEVICE={name}: bad ordinal")))
            }
            None => (name.as_str(), 0),
        };
        let device = match kind {
            "" | "cpu" => Ok(Device::Cpu),
            "cuda" | "gpu" => Device::new_cuda(ordinal),
            "metal" => Device::new_metal(ordinal),
            other => panic!("ROFORMER_TEST_DEVICE={other}: expected cpu, cuda[:N] or metal[:N]"),
        };
        let device = device.unwrap_or_else(|e| panic!("ROFORMER_TEST_DEVICE={name}: {e}"));
        if !device.is_cpu() {
            eprintln!("roformer tests: model and pipeline tests run on {:?}", device.location());
        }
        device
    })
}

/// Whether the tests run on the CPU.
pub fn on_cpu() -> bool {
    device().is_cpu()
}

/// True (after saying so) when the test device is not the CPU, for tests of what runs on the CPU only:
/// `if cpu_only("int8") { return; }`.
pub fn cpu_only(what: &str) -> bool {
    if on_cpu() {
        return false;
    }
    not_run_here(format!("{what} on {:?}: it runs on the CPU only", device().location()));
    true
}

/// Says what a passing test did not run here, in the output of `cargo test` itself: libtest
/// captures the `print!` family and shows it only for a failing test, but not a write to the
/// stderr handle.
pub fn not_run_here(what: impl std::fmt::Display) {
    use std::io::Write;
    let _ = writeln!(std::io::stderr().lock(), "not run here: {what}");
}

/// The source tree the fixtures are read from: `ROFORMER_SOURCE_DIR` at run time (a test binary carried
/// to another machine, as scripts/checks/gpu_check.sh runs it), else the tree it was built from.
pub fn source_dir() -> PathBuf {
    match std::env::var_os("ROFORMER_SOURCE_DIR") {
        Some(dir) if !dir.is_empty() => PathBuf::from(dir),
        _ => PathBuf::from(env!("CARGO_MANIFEST_DIR")),
    }
}

/// The words of `ROFORMER_TEST_RUNNER` (for example `qemu-aarch64 -L /usr/aarch64-linux-gnu`, which
/// `scripts/checks/check_aarch64.sh` sets), which go before every program the tests start, so that those
/// tests also run where the binaries are another CPU's; none when it is unset.
pub fn runner() -> Vec<String> {
    std::env::var("ROFORMER_TEST_RUNNER").unwrap_or_default().split_whitespace().map(String::from).collect()
}

/// A command that runs `program`, under the [`runner`] when there is one.
pub fn program(program: impl AsRef<std::ffi::OsStr>) -> std::process::Command {
    match runner().split_first() {
        Some((first, rest)) => {
            let mut command = std::process::Command::new(first);
            command.args(rest).arg(program);
            command
        }
        None => std::process::Command::new(program),
    }
}

pub fn fixture(name: &str) -> PathBuf {
    source_dir().join("tests/fixtures").join(name)
}

pub fn model_fixture(name: &str) -> PathBuf {
    fixture("models").join(name)
}

/// The inputs and transformers' outputs of a model fixture, by `<case>.<name>`, on the test device.
pub struct Reference(HashMap<String, Tensor>);

impl Reference {
    pub fn load(model: &str) -> Self {
        Self::load_file(model, "reference.safetensors")
    }

    pub fn load_file(model: &str, file: &str) -> Self {
        let path = model_fixture(model).join(file);
        Self(candle_core::safetensors::load(&path, device()).expect("reference file"))
    }

    pub fn get(&self, key: &str) -> Option<&Tensor> {
        self.0.get(key)
    }

    pub fn tensor(&self, key: &str) -> &Tensor {
        self.0.get(key).unwrap_or_else(|| panic!("reference has no `{key}`"))
    }

    /// The cases of the fixture (the prefixes of its `*.input_ids` entries), sorted.
    pub fn cases(&self) -> Vec<String> {
        let mut cases: Vec<String> =
            self.0.keys().filter_map(|k| k.strip_suffix(".input_ids").map(str::to_string)).collect();
        cases.sort();
        cases
    }
}

/// Max absolute and relative (‖a − b‖ / ‖b‖) differences, computed in f64.
pub fn diffs(ours: &Tensor, reference: &Tensor) -> (f64, f64) {
    assert_eq!(ours.dims(), reference.dims(), "shapes differ");
    let a = ours.to_dtype(DType::F64).unwrap().flatten_all().unwrap().to_vec1::<f64>().unwrap();
    let b = reference.to_dtype(DType::F64).unwrap().flatten_all().unwrap().to_vec1::<f64>().unwrap();
    let max_abs = largest(a.iter().zip(&b).map(|(x, y)| (x - y).abs()));
    let err: f64 = a.iter().zip(&b).map(|(x, y)| (x - y).powi(2)).sum::<f64>().sqrt();
    let norm: f64 = b.iter().map(|y| y * y).sum::<f64>().sqrt();
    (max_abs, err / norm.max(f64::MIN_POSITIVE))
}

/// Asserts the f32 parity bound of the project: 1e-4 max abs and 1e-5 relative.
pub fn assert_close(what: &str, ours: &Tensor, reference: &Tensor) {
    assert_within(what, ours, reference, 1e-4, 1e-5);
}

pub fn assert_within(what: &str, ours: &Tensor, reference: &Tensor, max_abs: f64, max_rel: f64) {
    let (abs, rel) = diffs(ours, reference);
    if std::env::var_os("ROFORMER_PRINT_DIFFS").is_some() {
        eprintln!("{what}: max abs {abs:.2e}, rel {rel:.2e}");
    }
    assert!(
        abs <= max_abs && rel <= max_rel,
        "{what}: max abs diff {abs:.3e} (bound {max_abs:.0e}), relative {rel:.3e} (bound {max_rel:.0e})"
    );
    // A reference of zeros would make the comparison vacuous.
    assert!(
        reference.abs().unwrap().max_all().unwrap().to_dtype(DType::F64).unwrap().to_scalar::<f64>().unwrap()
            > 0.1
    );
}

/// A scratch copy of a fixture folder, removed on drop.
pub struct Scratch(PathBuf);

impl Scratch {
    pub fn copy_of(folder: &std::path::Path, tag: &str) -> Self {
        let dir = std::env::temp_dir().join(format!("roformer-test-{}-{tag}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        copy_dir(folder, &dir);
        Scratch(dir)
    }

    pub fn path(&self) -> &std::path::Path {
        &self.0
    }

    pub fn arg(&self) -> String {
        self.0.to_string_lossy().into_owned()
    }

    /// Rewrites model.safetensors after `edit` changes its tensors.
    pub fn edit_weights(&self, edit: impl FnOnce(&mut HashMap<String, Tensor>)) {
        let file = self.0.join("model.safetensors");
        let mut tensors = candle_core::safetensors::load(&file, &Device::Cpu).unwrap();
        edit(&mut tensors);
        candle_core::safetensors::save(&tensors, &file).unwrap();
    }

    /// Rewrites config.json after `edit` changes it.
    pub fn edit_config(&self, edit: impl FnOnce(&mut serde_json::Value)) {
        self.edit_json("config.json", edit);
    }

    /// Rewrites the folder's JSON file `name` after `edit` changes it; returns its path.
    pub fn edit_json(&self, name: &str, edit: impl FnOnce(&mut serde_json::Value)) -> PathBuf {
        let file = self.0.join(name);
        let mut value: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
        edit(&mut value);
        std::fs::write(&file, serde_json::to_string_pretty(&value).unwrap()).unwrap();
        file
    }

    /// Writes `value` as the folder's JSON file `name` (its subfolder made if need be); returns
    /// its path.
    pub fn write_json(&self, name: &str, value: &serde_json::Value) -> PathBuf {
        let file = self.0.join(name);
        std::fs::create_dir_all(file.parent().unwrap()).unwrap();
        std::fs::write(&file, serde_json::to_string_pretty(value).unwrap()).unwrap();
        file
    }

    /// Points the first tensor of the shard index at `shard`; returns the index's path.
    pub fn redirect_a_shard(&self, shard: &str) -> PathBuf {
        self.edit_json("model.safetensors.index.json", |index| {
            let first = index["weight_map"].as_object().unwrap().keys().next().unwrap().clone();
            index["weight_map"][&first] = shard.into();
        })
    }
}

/// Copies the files of `from`, subfolders included (a sentence-transformers folder's modules), into `to`.
fn copy_dir(from: &std::path::Path, to: &std::path::Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let kind = entry.file_type().unwrap();
        if kind.is_dir() {
            copy_dir(&entry.path(), &to.join(entry.file_name()));
        } else if kind.is_file() {
            std::fs::copy(entry.path(), to.join(entry.file_name())).unwrap();
        }
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Pipeline options on the test device.
pub fn on_device() -> roformer::PipelineOptions {
    roformer::PipelineOptions::default().with_device(device().clone())
}

/// The largest of `errors`, NaN where any is NaN: `f64::max` passes over a NaN, so that a bound
/// on its result would pass a NaN output.
pub fn largest(errors: impl IntoIterator<Item = f64>) -> f64 {
    errors.into_iter().fold(0.0, |most, e| if e.is_nan() || e > most { e } else { most })
}
