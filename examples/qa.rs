//! Answers to questions about contexts, from a TSV file, with a RoFormer question-answering
//! checkpoint.
//!
//! `cargo run --release --example qa -- --model <folder or Hub id> --input questions.tsv` reads the
//! question from column 0 and the context from column 1 (or the columns --text-col and --pair-col
//! name) and writes one JSON line per row: `{"index": i, "answer", "score", "start", "end"}`, the
//! offsets counting characters of the context. With `--top-k` above 1 a row holds the best answers
//! instead: `{"index": i, "answers": [{"answer", "score", "start", "end"}, ...]}`, best first.

use std::io::Write;

use anyhow::{bail, Context, Result};
use clap::Parser;
use roformer::{Answer, QuestionAnswerer, QuestionAnswererOptions};

mod common;

use common::glue::{Column, Columns};

#[derive(Parser)]
#[command(
    about = "Answer questions about contexts from a TSV file, as transformers' question-answering pipeline"
)]
struct Args {
    /// Checkpoint folder or Hub id.
    #[arg(long)]
    model: String,
    /// TSV file, or - for stdin: a question and its context per row.
    #[arg(long, default_value = "-")]
    input: String,
    #[command(flatten)]
    columns: common::ColumnArgs,
    /// Answers per row.
    #[arg(long, default_value_t = 1)]
    top_k: usize,
    /// The longest answer, in tokens.
    #[arg(long, default_value_t = 15)]
    max_answer_len: usize,
    /// Tokens per window, question included (default: the model's max length, at most 384).
    #[arg(long)]
    max_seq_len: Option<usize>,
    /// Context tokens consecutive windows share (default: half of --max-seq-len, at most 128).
    #[arg(long)]
    doc_stride: Option<usize>,
    /// Let "no answer" (empty, at 0..0) compete.
    #[arg(long)]
    handle_impossible_answer: bool,
    /// Where the JSON lines go (default stdout).
    #[arg(long)]
    output: Option<String>,
    #[command(flatten)]
    run: common::RunArgs,
    /// Report malformed rows (an empty question or context among them) and go on.
    #[arg(long)]
    skip_bad_lines: bool,
}

fn main() -> std::process::ExitCode {
    common::main_with(run)
}

fn run() -> Result<()> {
    let args = Args::parse();
    let pipeline_options = args.run.options()?;
    let mut options = QuestionAnswererOptions::default()
        .with_top_k(args.top_k)
        .with_max_answer_len(args.max_answer_len)
        .with_handle_impossible_answer(args.handle_impossible_answer);
    if let Some(n) = args.max_seq_len {
        options = options.with_max_seq_len(n);
    }
    if let Some(n) = args.doc_stride {
        options = options.with_doc_stride(n);
    }
    let columns = args.columns.columns()?;
    if columns.as_ref().is_some_and(|c| c.pair.is_none()) {
        bail!("--text-col names the question: name the context with --pair-col");
    }
    // Flags are checked before the model loads: a mistake should not cost a download.
    options.validate()?;
    let mut out = common::output(args.output.as_deref())?;
    let qa = QuestionAnswerer::from_pretrained_with(&args.model, pipeline_options)
        .with_context(|| format!("loading {}", args.model))?;
    let default = Columns { text: Column::Index(0), pair: Some(Column::Index(1)), label: None };
    let mut data = args.columns.read_or(&args.input, default, args.skip_bad_lines)?;
    // An empty question or context has no answer: its line is at fault, named before any output.
    let mut rows = Vec::with_capacity(data.rows.len());
    for row in std::mem::take(&mut data.rows) {
        let context = row.pair.as_deref().unwrap_or_default();
        let empty = [("question", row.text.as_str()), ("context", context)]
            .into_iter()
            .find(|(_, t)| t.trim().is_empty());
        match empty {
            Some((name, _)) => {
                data.bad_line(&args.input, row.line, format!("the {name} is empty"), args.skip_bad_lines)?;
                eprintln!("skipped {}:{}: the {name} is empty", args.input, row.line);
            }
            None => rows.push(row),
        }
    }
    for chunk in rows.chunks(args.run.batch_size.max(1) * 8) {
        let pairs: Vec<(&str, &str)> =
            chunk.iter().map(|r| (r.text.as_str(), r.pair.as_deref().unwrap_or_default())).collect();
        for (row, answers) in chunk.iter().zip(qa.answer_with(&pairs, &options)?) {
            let line = if args.top_k > 1 {
                serde_json::json!({"index": row.index, "answers": answers.iter().map(answer).collect::<Vec<_>>()})
            } else {
                let mut line = answers.first().map_or_else(
                    || serde_json::json!({"answer": null, "score": null, "start": null, "end": null}),
                    answer,
                );
                line["index"] = row.index.into();
                line
            };
            writeln!(out, "{line}")?;
        }
    }
    Ok(out.flush()?)
}

fn answer(a: &Answer) -> serde_json::Value {
    serde_json::json!({"answer": a.answer, "score": a.score, "start": a.start, "end": a.end})
}
