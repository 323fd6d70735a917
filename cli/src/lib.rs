//! The command-line plumbing the examples and `roformer-serve` share: the flags that say how a
//! pipeline runs, Hub downloads with progress bars, and one way of reporting errors.

#![warn(missing_docs)]

use std::process::ExitCode;

use anyhow::{bail, Context, Result};
use roformer::PipelineOptions;

/// Runs an example's body and reports its error once, cause chain included, with exit code 1.
/// The library's warnings (unused checkpoint tensors, say) go to stderr.
pub fn main_with(run: impl FnOnce() -> Result<()>) -> ExitCode {
    if log::set_logger(&StderrLogger).is_ok() {
        log::set_max_level(log::LevelFilter::Warn);
    }
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

/// Warnings and errors of the library, one line each on stderr.
struct StderrLogger;

impl log::Log for StderrLogger {
    fn enabled(&self, metadata: &log::Metadata) -> bool {
        metadata.level() <= log::Level::Warn
    }

    fn log(&self, record: &log::Record) {
        if self.enabled(record.metadata()) {
            eprintln!("{}: {}", record.level().as_str().to_lowercase(), record.args());
        }
    }

    fn flush(&self) {}
}

/// How the pipeline runs: the flags of every inference example.
#[derive(clap::Args)]
pub struct RunArgs {
    /// Hub revision: branch, tag, commit or refs/pr/N.
    #[arg(long)]
    pub revision: Option<String>,
    /// Texts per forward pass.
    #[arg(long, default_value_t = 32)]
    pub batch_size: usize,
    /// Longer inputs are truncated (default: the tokenizer's model_max_length).
    #[arg(long)]
    pub max_length: Option<usize>,
    /// cpu, cuda:N, metal or auto.
    #[arg(long, default_value = "cpu")]
    pub device: String,
    /// f32, f16 or bf16.
    #[arg(long, default_value = "f32")]
    pub dtype: String,
    /// none, int8 or bf16: int8 or bf16 linear layers in the encoder (CPU only; `--dtype bf16` on
    /// the CPU is bf16).
    #[arg(long, default_value = "none")]
    pub quantize: roformer::Quantization,
    /// RoPE scaling for inputs past the trained length: linear:4, dynamic:2 or yarn:4.
    #[arg(long)]
    pub rope_scaling: Option<roformer::RopeScaling>,
    /// Threads of the inference pool (default: one per core).
    #[arg(long)]
    pub threads: Option<usize>,
}

impl RunArgs {
    /// The pipeline options these flags say, with the Hub settings of [`hub_options`].
    pub fn options(&self) -> Result<PipelineOptions> {
        let mut options = PipelineOptions::default()
            .with_hub(hub_options())
            .with_device(parse_device(&self.device)?)
            .with_dtype(parse_dtype(&self.dtype)?)
            .with_batch_size(self.batch_size)
            .with_quantization(self.quantize);
        if let Some(n) = self.max_length {
            options = options.with_max_length(n);
        }
        if let Some(revision) = &self.revision {
            options = options.with_revision(revision);
        }
        if let Some(scaling) = &self.rope_scaling {
            options = options.with_rope_scaling(scaling.clone());
        }
        if let Some(threads) = self.threads {
            options = options.with_threads(threads);
        }
        Ok(options)
    }
}

/// The Hub settings of the environment, with a progress bar on stderr (when it is a terminal)
/// for each file that downloads; the library itself prints nothing.
pub fn hub_options() -> roformer::HubOptions {
    use std::collections::HashMap;
    use std::io::IsTerminal;
    use std::sync::Mutex;
    let hub = roformer::HubOptions::from_env();
    if !std::io::stderr().is_terminal() {
        return hub;
    }
    let bars: Mutex<HashMap<String, indicatif::ProgressBar>> = Mutex::default();
    hub.with_progress(move |progress| {
        let Ok(mut bars) = bars.lock() else { return };
        let bar = bars.entry(progress.file.clone()).or_insert_with(|| {
            let bar = indicatif::ProgressBar::new(progress.total.unwrap_or(0));
            bar.set_style(
                indicatif::ProgressStyle::with_template(
                    "{msg} {bar:40} {bytes}/{total_bytes}, {bytes_per_sec}, eta {eta}",
                )
                .expect("valid template"),
            );
            bar.set_message(progress.file.clone());
            bar
        });
        bar.set_position(progress.downloaded);
        if progress.total.is_some_and(|total| progress.downloaded >= total) {
            bar.finish_and_clear();
            bars.remove(&progress.file);
        }
    })
}

/// Parses `cpu`, `cuda`, `cuda:N`, `metal`, `metal:N` or `auto` (CUDA, then Metal, then CPU).
pub fn parse_device(spec: &str) -> Result<candle_core::Device> {
    use candle_core::Device;
    let (kind, ordinal) = match spec.split_once(':') {
        Some((k, n)) => match n.parse::<usize>() {
            Ok(n) => (k, n),
            Err(_) => bail!("device `{spec}`: `{n}` is not an ordinal"),
        },
        None => (spec, 0),
    };
    // Candle's own words for a build without the backend do not say how to get one.
    let missing = |backend: &str| {
        anyhow::anyhow!(
            "device `{spec}`: this build has no {backend}: build it with `--features {}` (docs/features.md)",
            backend.to_lowercase()
        )
    };
    Ok(match kind {
        "cpu" => Device::Cpu,
        "cuda" if !candle_core::utils::cuda_is_available() => return Err(missing("CUDA")),
        "metal" if !candle_core::utils::metal_is_available() => return Err(missing("Metal")),
        "cuda" => Device::new_cuda(ordinal).with_context(|| format!("device `{spec}`"))?,
        "metal" => Device::new_metal(ordinal).with_context(|| format!("device `{spec}`"))?,
        "auto" if candle_core::utils::cuda_is_available() => Device::new_cuda(0)?,
        "auto" if candle_core::utils::metal_is_available() => Device::new_metal(0)?,
        "auto" => Device::Cpu,
        _ => bail!("unknown device `{spec}` (cpu, cuda:N, metal or auto)"),
    })
}

/// Parses `f32`, `f16` or `bf16`.
pub fn parse_dtype(spec: &str) -> Result<candle_core::DType> {
    use candle_core::DType;
    Ok(match spec {
        "f32" => DType::F32,
        "f16" => DType::F16,
        "bf16" => DType::BF16,
        _ => bail!("unknown dtype `{spec}` (f32, f16 or bf16)"),
    })
}

#[cfg(test)]
mod tests {
    use super::parse_device;

    #[test]
    fn a_device_this_build_cannot_make_says_what_to_build() {
        for (spec, backend, built) in [
            ("cuda:99999", "cuda", candle_core::utils::cuda_is_available()),
            ("metal:99999", "metal", candle_core::utils::metal_is_available()),
        ] {
            let error = format!("{:#}", parse_device(spec).unwrap_err());
            // With the backend built, there is still no device 99999: Candle's error, under the spec.
            let want = if built {
                format!("device `{spec}`: ")
            } else {
                format!("build it with `--features {backend}`")
            };
            assert!(error.contains(&want), "{spec}: {error}");
        }
        assert!(format!("{:#}", parse_device("tpu").unwrap_err()).contains("unknown device `tpu`"));
        assert!(format!("{:#}", parse_device("cuda:x").unwrap_err()).contains("`x` is not an ordinal"));
    }
}
