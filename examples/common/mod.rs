//! What the examples share: the GLUE plumbing here, and from `roformer-cli` (which the server
//! uses too) their run flags and how they report errors. Each example uses part of this module.
#![allow(dead_code)]

pub mod glue;
pub mod metrics;
pub mod tsv;

use anyhow::Result;

use glue::{Column, Columns, Task};
// Each example uses part of these.
#[allow(unused_imports)]
pub use roformer_cli::{hub_options, main_with, parse_device, parse_dtype, RunArgs};

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
    /// Line 1 is a header (default: the task's layout, else announced on stderr).
    #[arg(long, conflicts_with = "no_header")]
    pub header: bool,
    /// Line 1 is data.
    #[arg(long)]
    pub no_header: bool,
}

impl ColumnArgs {
    /// Columns given one by one win over the task's; `None` when neither is given.
    pub fn columns(&self) -> Result<Option<Columns>> {
        Columns::select(self.task, self.text_col.clone(), self.pair_col.clone(), self.label_col.clone())
    }

    /// Whether line 1 is a header: the flags, else the task's layout, else undecided.
    pub fn header(&self) -> Option<bool> {
        match (self.header, self.no_header) {
            (true, _) => Some(true),
            (_, true) => Some(false),
            _ => self.task.map(Task::has_header),
        }
    }

    /// Reads a TSV file (or stdin for `-`) with these columns, and checks its labels against the
    /// model before anything runs. Says on stderr how line 1 was read when nothing decided it,
    /// and which lines were skipped.
    pub fn read(
        &self,
        path: &str,
        config: Option<&roformer::Config>,
        skip_bad_lines: bool,
    ) -> Result<tsv::Dataset> {
        self.read_columns(path, self.columns()?.as_ref(), config, skip_bad_lines)
    }

    /// As [`ColumnArgs::read`], with the columns the flags chose, else `default`.
    pub fn read_or(&self, path: &str, default: Columns, skip_bad_lines: bool) -> Result<tsv::Dataset> {
        let columns = self.columns()?.unwrap_or(default);
        self.read_columns(path, Some(&columns), None, skip_bad_lines)
    }

    fn read_columns(
        &self,
        path: &str,
        columns: Option<&Columns>,
        config: Option<&roformer::Config>,
        skip_bad_lines: bool,
    ) -> Result<tsv::Dataset> {
        let mut data = tsv::read_tsv(tsv::open_input(path)?, path, columns, self.header(), skip_bad_lines)?;
        if let Some(note) = &data.header_note {
            eprintln!("{note}");
        }
        if let Some(config) = config {
            glue::check_labels(&mut data, path, config, skip_bad_lines)?;
        }
        data.skipped.sort_by_key(|b| b.line);
        tsv::report_skipped(path, &data.skipped);
        Ok(data)
    }
}

/// Where an example's lines go: a file, or stdout without one. Examples open it before the model
/// loads, so that a wrong path fails before the work it would have cost, and a failed write names
/// the file (a full disk, say).
pub struct Output {
    name: String,
    inner: Box<dyn std::io::Write>,
}

/// Creates `path` (or takes stdout) for [`Output`]'s buffered lines.
pub fn output(path: Option<&str>) -> Result<Output> {
    use anyhow::Context;
    Ok(match path {
        Some(path) => Output {
            name: path.to_string(),
            inner: Box::new(std::io::BufWriter::new(
                std::fs::File::create(path).with_context(|| format!("creating {path}"))?,
            )),
        },
        None => Output {
            name: "stdout".into(),
            inner: Box::new(std::io::BufWriter::new(std::io::stdout().lock())),
        },
    })
}

impl Output {
    fn named(&self, e: std::io::Error) -> std::io::Error {
        std::io::Error::new(e.kind(), format!("writing {}: {e}", self.name))
    }
}

impl std::io::Write for Output {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.inner.write(buf).map_err(|e| self.named(e))
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush().map_err(|e| self.named(e))
    }
}
