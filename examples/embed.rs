//! Sentence embeddings: one sentence per line (file or stdin) to JSONL or .npy.
//!
//! `cargo run --release --example embed -- --model <dir|hub id> --input sentences.txt --pooling mean --normalize`
//! `... --query "a sentence"` ranks the input sentences by cosine similarity to the query instead.

use std::io::{BufRead, Write};

use anyhow::{Context, Result};
use clap::Parser;
use roformer::pipelines::{cosine_similarity, Pooling, SentenceEncoder};

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
    /// cls, mean or pooler.
    #[arg(long, default_value = "cls")]
    pooling: Pooling,
    /// Scale each embedding to unit length.
    #[arg(long)]
    normalize: bool,
    /// Rank the input sentences by cosine similarity to this text.
    #[arg(long)]
    query: Option<String>,
}

fn main() -> Result<()> {
    roformer::pipelines::pin_cpu_threads();
    let args = Args::parse();
    let options = args.run.options()?;
    let encoder =
        SentenceEncoder::load(&args.model, options).with_context(|| format!("loading {}", args.model))?;
    let reader = roformer::glue::open_input(&args.input)?;
    let sentences: Vec<String> = reader.lines().collect::<std::io::Result<_>>()?;
    let refs: Vec<&str> = sentences.iter().map(String::as_str).collect();
    let embeddings = encoder.encode(&refs, args.pooling, args.normalize)?;

    if let Some(query) = &args.query {
        let q = encoder.encode(&[query.as_str()], args.pooling, args.normalize)?.remove(0);
        let mut ranked: Vec<(usize, f32)> =
            embeddings.iter().map(|e| cosine_similarity(&q, e)).enumerate().collect();
        ranked.sort_by(|a, b| b.1.total_cmp(&a.1));
        for (index, sim) in ranked {
            println!("{sim:.4}\t{index}\t{}", sentences[index]);
        }
        return Ok(());
    }
    match &args.output {
        Some(path) if path.ends_with(".npy") => write_npy(path, &embeddings)?,
        Some(path) => write_jsonl(&mut std::fs::File::create(path)?, &embeddings)?,
        None => write_jsonl(&mut std::io::stdout().lock(), &embeddings)?,
    }
    Ok(())
}

fn write_jsonl(out: &mut dyn Write, embeddings: &[Vec<f32>]) -> Result<()> {
    let mut out = std::io::BufWriter::new(out);
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
