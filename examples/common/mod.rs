//! The flags every pipeline example shares, and the pipeline options they give.

use roformer::pipelines::{parse_device, parse_dtype, PipelineOptions};

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
}

impl RunArgs {
    pub fn options(&self) -> roformer::Result<PipelineOptions> {
        Ok(PipelineOptions {
            device: parse_device(&self.device)?,
            dtype: parse_dtype(&self.dtype)?,
            batch_size: self.batch_size,
            max_length: self.max_length,
            revision: self.revision.clone(),
        })
    }
}
