//! Flags the examples share, and what they give. Each example uses part of this module.
#![allow(dead_code)]

use roformer::glue::{Column, Columns, Task};
use roformer::pipelines::{parse_device, parse_dtype, PipelineOptions};

/// Which columns of a GLUE-format TSV hold the texts and labels.
#[derive(clap::Args)]
pub struct ColumnArgs {
    /// GLUE task: picks the text, pair and label columns and the metric.
    #[arg(long)]
    pub task: Option<Task>,
    /// Text column (header name or 0-based position), when no --task.
    #[arg(long)]
    pub text_col: Option<Column>,
    /// Second text column for pairs.
    #[arg(long)]
    pub pair_col: Option<Column>,
    /// Label column.
    #[arg(long)]
    pub label_col: Option<Column>,
}

impl ColumnArgs {
    /// Columns given one by one win over the task's; `None` when neither is given.
    pub fn columns(&self) -> Option<Columns> {
        Columns::select(self.task, self.text_col.clone(), self.pair_col.clone(), self.label_col.clone())
    }
}

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
