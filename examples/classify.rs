//! Classify GLUE-style text with a RoFormer sequence classifier.
//!
//! `cargo run --release --example classify` runs the bundled model over a few sentences;
//! `-- --input ../shared/data/glue/SST-2/dev.tsv --task sst2` scores a GLUE dev file.

use std::io::Write;
use std::time::Instant;

use anyhow::{Context, Result};
use clap::{Parser, ValueEnum};
use roformer::{Classification, TextClassifier};

mod common;

use common::glue::{self, Task};

#[derive(Parser)]
#[command(about = "Classify sentences or sentence pairs with a RoFormer checkpoint")]
struct Args {
    /// Checkpoint folder or Hub id (default: the SST-2 model built into the crate).
    #[arg(long)]
    model: Option<String>,
    /// GLUE-format TSV file, or - for stdin. Without it, a few built-in sentences.
    #[arg(long)]
    input: Option<String>,
    #[command(flatten)]
    columns: common::ColumnArgs,
    /// Where predictions go (default stdout).
    #[arg(long)]
    output: Option<String>,
    /// Output format (default tsv); with no --input, it applies to the built-in sentences.
    #[arg(long, value_enum)]
    format: Option<Format>,
    #[command(flatten)]
    run: common::RunArgs,
    /// Report malformed rows and go on, instead of stopping at the first.
    #[arg(long)]
    skip_bad_lines: bool,
}

#[derive(Clone, Copy, ValueEnum)]
enum Format {
    /// `index<TAB>prediction`, as GLUE submissions use: with --task, the values its server expects.
    Tsv,
    /// One JSON object per row: index, label, score, probabilities (or value) and logits.
    Jsonl,
}

const BUILT_IN: [&str; 6] = [
    "a gorgeous , witty , seductive movie .",
    "the acting is wooden and the plot makes no sense .",
    "it 's a charming and often affecting journey .",
    "an utterly incompetent conclusion to a trilogy .",
    "one of the best films of the year",
    "i wanted to like it , but it was a chore to sit through .",
];

fn main() -> std::process::ExitCode {
    common::main_with(run)
}

fn run() -> Result<()> {
    let args = Args::parse();
    let options = args.run.options()?;
    // Flags are checked before the model loads: a mistake should not cost a download.
    let columns = args.columns.columns()?;
    let mut out = common::output(args.output.as_deref())?;
    let classifier = match &args.model {
        Some(model) => TextClassifier::from_pretrained_with(model, options)
            .with_context(|| format!("loading {model}"))?,
        None => TextClassifier::bundled_with(options).context("loading the built-in SST-2 model")?,
    };
    let submission = match (args.format, args.columns.task) {
        (Some(Format::Tsv) | None, Some(task)) if args.input.is_some() => {
            glue::submission_labels(task, classifier.config())?
        }
        _ => None,
    };

    let Some(input) = &args.input else {
        let results = classifier.classify(&BUILT_IN)?;
        if args.format.is_none() && args.output.is_none() {
            for (text, r) in BUILT_IN.iter().zip(&results) {
                writeln!(out, "{}\t{:.4}\t{text}", r.label, r.score)?;
            }
            return Ok(out.flush()?);
        }
        let indices: Vec<usize> = (0..results.len()).collect();
        return write_predictions(out, &args, &classifier, &indices, &results, None);
    };

    let data = args.columns.read(input, Some(classifier.config()), args.skip_bad_lines)?;
    let pairs = columns.as_ref().is_some_and(|c| c.pair.is_some());
    let start = Instant::now();
    let progress = progress_bar(data.rows.len());
    let mut results: Vec<Classification> = Vec::with_capacity(data.rows.len());
    // Chunks keep the progress bar moving; each chunk is batched and length-sorted inside.
    for chunk in data.rows.chunks(args.run.batch_size.max(1) * 8) {
        let mut chunk_results = if pairs {
            let pairs: Vec<(&str, &str)> =
                chunk.iter().map(|r| (r.text.as_str(), r.pair.as_deref().unwrap_or(""))).collect();
            classifier.classify_pairs(&pairs)?
        } else {
            classifier.classify(&chunk.iter().map(|r| &r.text).collect::<Vec<_>>())?
        };
        results.append(&mut chunk_results);
        progress.inc(chunk.len() as u64);
    }
    progress.finish_and_clear();
    let elapsed = start.elapsed().as_secs_f64();

    let indices: Vec<usize> = data.rows.iter().map(|r| r.index).collect();
    write_predictions(out, &args, &classifier, &indices, &results, submission.as_deref())?;

    let truncated = results.iter().filter(|r| r.truncated).count();
    if truncated > 0 {
        eprintln!("{truncated} of {} rows were truncated to max_length", results.len());
    }
    eprintln!(
        "{} rows in {elapsed:.2} s ({:.1} rows/s)",
        results.len(),
        results.len() as f64 / elapsed.max(1e-9)
    );
    if data.has_labels() {
        let labels: Vec<&str> = data.rows.iter().map(|r| r.label.as_deref().unwrap_or_default()).collect();
        let scores =
            glue::evaluate(args.columns.task.map(Task::metric), classifier.config(), &results, &labels)?;
        let line: Vec<String> = scores.iter().map(|(name, v)| format!("{name} = {v:.4}")).collect();
        eprintln!("{}", line.join(", "));
    }
    Ok(())
}

/// Writes one line per row, under the row's own index. A GLUE task's TSV holds the values its
/// server expects (`submission`, per class id; the number itself for a regression).
fn write_predictions(
    mut out: common::Output,
    args: &Args,
    classifier: &TextClassifier,
    indices: &[usize],
    results: &[Classification],
    submission: Option<&[String]>,
) -> Result<()> {
    let format = args.format.unwrap_or(Format::Tsv);
    if matches!(format, Format::Tsv) {
        writeln!(out, "index\tprediction")?;
    }
    let regression = classifier.problem_type() == roformer::ProblemType::Regression;
    for (index, r) in indices.iter().zip(results) {
        match format {
            Format::Tsv if regression => writeln!(out, "{index}\t{:.3}", r.score)?,
            Format::Tsv => {
                let value = submission.map_or(r.label.as_str(), |values| values[r.label_id].as_str());
                writeln!(out, "{index}\t{value}")?
            }
            Format::Jsonl => {
                let mut row = serde_json::json!({"index": index, "label": r.label, "score": r.score, "logits": r.logits});
                row[if regression { "value" } else { "probabilities" }] =
                    if regression { serde_json::json!(r.score) } else { serde_json::json!(r.scores) };
                writeln!(out, "{row}")?;
            }
        }
    }
    Ok(out.flush()?)
}

fn progress_bar(len: usize) -> indicatif::ProgressBar {
    if len < 1000 {
        return indicatif::ProgressBar::hidden();
    }
    let bar = indicatif::ProgressBar::new(len as u64);
    bar.set_style(
        indicatif::ProgressStyle::with_template("{bar:40} {pos}/{len} rows, {per_sec}, eta {eta}")
            .expect("valid template"),
    );
    bar
}
