//! Named entities of each row of a TSV file, with a RoFormer token-classification checkpoint.
//!
//! `cargo run --release --example ner -- --model <folder or Hub id> --input texts.tsv --aggregation-strategy simple`
//! writes one JSON line per row: `{"index": i, "entities": [{"entity_group", "score", "word", "start",
//! "end"}, ...]}`, with `entity` and the token's `index` instead of `entity_group` for strategy none.
//! Offsets count characters of the row's text.

use std::io::Write;

use anyhow::{Context, Result};
use clap::Parser;
use roformer::{AggregationStrategy, TokenClassifier, TokenClassifierOptions};

mod common;

#[derive(Parser)]
#[command(
    about = "Named entities of each text of a TSV file, as transformers' token-classification pipeline"
)]
struct Args {
    /// Checkpoint folder or Hub id.
    #[arg(long)]
    model: String,
    /// TSV file, or - for stdin: one text per row (a lone column, or the one --text-col names).
    #[arg(long, default_value = "-")]
    input: String,
    #[command(flatten)]
    columns: common::ColumnArgs,
    /// none (each token, with its label), simple, first, average or max (entities).
    #[arg(long, default_value = "none")]
    aggregation_strategy: AggregationStrategy,
    /// Labels left out (repeat the flag; default O).
    #[arg(long = "ignore-label")]
    ignore_labels: Vec<String>,
    /// Where the JSON lines go (default stdout).
    #[arg(long)]
    output: Option<String>,
    #[command(flatten)]
    run: common::RunArgs,
    /// Report malformed rows and go on, instead of stopping at the first.
    #[arg(long)]
    skip_bad_lines: bool,
}

fn main() -> std::process::ExitCode {
    common::main_with(run)
}

fn run() -> Result<()> {
    let args = Args::parse();
    let pipeline_options = args.run.options()?;
    // Flags are checked before the model loads: a mistake should not cost a download.
    args.columns.columns()?;
    let mut options = TokenClassifierOptions::default().with_aggregation_strategy(args.aggregation_strategy);
    if !args.ignore_labels.is_empty() {
        options = options.with_ignore_labels(args.ignore_labels.iter().cloned());
    }
    let mut out = common::output(args.output.as_deref())?;
    let ner = TokenClassifier::from_pretrained_with(&args.model, pipeline_options)
        .with_context(|| format!("loading {}", args.model))?;
    let data = args.columns.read(&args.input, None, args.skip_bad_lines)?;
    let grouped = args.aggregation_strategy != AggregationStrategy::None;
    for chunk in data.rows.chunks(args.run.batch_size.max(1) * 8) {
        let texts: Vec<&str> = chunk.iter().map(|r| r.text.as_str()).collect();
        for (row, entities) in chunk.iter().zip(ner.classify_with(&texts, &options)?) {
            let entities: Vec<serde_json::Value> = entities
                .iter()
                .map(|e| {
                    let mut v =
                        serde_json::json!({"score": e.score, "word": e.word, "start": e.start, "end": e.end});
                    v[if grouped { "entity_group" } else { "entity" }] = e.entity.clone().into();
                    if let Some(index) = e.index {
                        v["index"] = index.into();
                    }
                    v
                })
                .collect();
            writeln!(out, "{}", serde_json::json!({"index": row.index, "entities": entities}))?;
        }
    }
    Ok(out.flush()?)
}
