//! Sentence embeddings: one sentence per line (file or stdin) to JSONL or .npy.
//!
//! `cargo run --release --example embed -- --model <dir|hub id> --input sentences.txt --pooling mean`
//! `... --query "a sentence"` ranks the input sentences by cosine similarity to the query instead.
//! A sentence-transformers folder is encoded as its modules.json says, with `--prompt-name NAME`
//! or `--prompt TEXT` (else its default prompt) and `--truncate-dim N`.

use std::io::{IsTerminal, Write};

use anyhow::{bail, Context, Result};
use clap::Parser;
use roformer::{cosine_similarity, Pooling, SentenceEncoder};

mod common;

#[derive(Parser)]
#[command(about = "Encode sentences into embeddings with a RoFormer checkpoint")]
struct Args {
    /// Checkpoint folder or Hub id (junnyu/roformer_chinese_sim_char_base, say).
    #[arg(long)]
    model: String,
    #[command(flatten)]
    run: common::RunArgs,
    /// One sentence per line; - or nothing for stdin.
    #[arg(long, default_value = "-")]
    input: String,
    /// Output file; .npy writes a float32 matrix, anything else JSONL. Default: JSONL on stdout.
    #[arg(long)]
    output: Option<String>,
    /// cls, mean or pooler (default: the checkpoint's pooler if it has one, else mean; a
    /// sentence-transformers folder's modules.json sets its own).
    #[arg(long)]
    pooling: Option<Pooling>,
    /// Scale embeddings to unit length (the default without modules.json; after --truncate-dim).
    #[arg(long, conflicts_with = "no_normalize")]
    normalize: bool,
    /// Keep embeddings at their own length instead of scaling them to unit length.
    #[arg(long)]
    no_normalize: bool,
    /// Put the folder's prompt of this name (config_sentence_transformers.json) before each sentence.
    #[arg(long, conflicts_with = "prompt")]
    prompt_name: Option<String>,
    /// Put this text before each sentence.
    #[arg(long)]
    prompt: Option<String>,
    /// Cut embeddings to their first N values (Matryoshka).
    #[arg(long, value_name = "N")]
    truncate_dim: Option<usize>,
    /// Rank the input sentences by cosine similarity to this text: lines of similarity, index and
    /// sentence, to --output or stdout.
    #[arg(long)]
    query: Option<String>,
}

fn main() -> std::process::ExitCode {
    common::main_with(run)
}

fn run() -> Result<()> {
    let args = Args::parse();
    let mut options = args.run.options()?;
    if args.normalize || args.no_normalize {
        options = options.with_normalize(args.normalize);
    }
    if let Some(pooling) = args.pooling {
        options = options.with_pooling(pooling);
    }
    if let Some(name) = &args.prompt_name {
        options = options.with_prompt_name(name);
    }
    if let Some(prompt) = &args.prompt {
        options = options.with_prompt(prompt);
    }
    if let Some(dim) = args.truncate_dim {
        options = options.with_truncate_dim(dim);
    }
    let npy = args.output.as_deref().filter(|path| path.ends_with(".npy"));
    if let (Some(path), Some(_)) = (npy, &args.query) {
        bail!("--query writes a ranking as text lines, not a matrix: --output {path} asks for .npy");
    }
    // Created before the model loads, .npy too (Candle's writer creates it again by its path).
    let mut out = common::output(args.output.as_deref())?;
    let encoder = SentenceEncoder::from_pretrained_with(&args.model, options)
        .with_context(|| format!("loading {}", args.model))?;
    if args.input == "-" && std::io::stdin().is_terminal() {
        eprintln!(
            "reading sentences from the terminal, one per line; end with Ctrl-D (or pass --input FILE)"
        );
    }
    let mut lines = common::tsv::Lines::new(common::tsv::open_input(&args.input)?, &args.input);
    let mut sentences = Vec::new();
    while let Some((number, line)) = lines.next_line()? {
        sentences.push(line.map_err(|m| anyhow::anyhow!("{}:{number}: {m}", args.input))?);
    }
    let start = std::time::Instant::now();
    let embeddings = encoder.encode(&sentences)?;
    let elapsed = start.elapsed().as_secs_f64();
    // The rate of the encoding alone (tokenization included, loading and writing not), as classify
    // prints its own: what scripts/bench/bench_python.py holds the Python binding against.
    eprintln!(
        "{} sentences in {elapsed:.2} s ({:.1} sentences/s)",
        embeddings.len(),
        embeddings.len() as f64 / elapsed.max(1e-9)
    );

    if let Some(query) = &args.query {
        let q = encoder.encode(&[query])?.remove(0);
        let mut ranked: Vec<(usize, f32)> =
            embeddings.iter().map(|e| cosine_similarity(&q, e)).enumerate().collect();
        ranked.sort_by(|a, b| b.1.total_cmp(&a.1));
        for (index, sim) in ranked {
            writeln!(out, "{sim:.4}\t{index}\t{}", sentences[index])?;
        }
        return Ok(out.flush()?);
    }
    match npy {
        Some(path) => {
            drop(out);
            write_npy(path, &embeddings).with_context(|| format!("writing {path}"))
        }
        None => write_jsonl(out, &embeddings),
    }
}

fn write_jsonl(mut out: common::Output, embeddings: &[Vec<f32>]) -> Result<()> {
    for (index, e) in embeddings.iter().enumerate() {
        writeln!(out, "{}", serde_json::json!({"index": index, "embedding": e}))?;
    }
    Ok(out.flush()?)
}

/// A (rows, dim) float32 .npy file, through Candle's writer.
fn write_npy(path: &str, embeddings: &[Vec<f32>]) -> Result<()> {
    let dim = embeddings.first().map_or(0, Vec::len);
    let flat: Vec<f32> = embeddings.iter().flatten().copied().collect();
    let tensor = candle_core::Tensor::from_vec(flat, (embeddings.len(), dim), &candle_core::Device::Cpu)?;
    tensor.write_npy(path)?;
    Ok(())
}
