//! Fill [MASK] tokens with a RoFormer masked-LM checkpoint.
//!
//! `cargo run --release --example fill_mask -- --model junnyu/roformer_chinese_base --revision refs/pr/1 "今天[MASK]很好"`

use anyhow::{Context, Result};
use clap::Parser;
use roformer::FillMask;

mod common;

#[derive(Parser)]
#[command(about = "Predict the tokens behind [MASK]")]
struct Args {
    /// Checkpoint folder or Hub id.
    #[arg(long)]
    model: String,
    #[command(flatten)]
    run: common::RunArgs,
    /// How many candidates per [MASK].
    #[arg(long, default_value_t = 5)]
    top_k: usize,
    /// Texts holding one or more [MASK].
    #[arg(required = true)]
    texts: Vec<String>,
}

fn main() -> std::process::ExitCode {
    common::main_with(run)
}

fn run() -> Result<()> {
    let args = Args::parse();
    let options = args.run.options()?;
    let fill = FillMask::from_pretrained_with(&args.model, options)
        .with_context(|| format!("loading {}", args.model))?;
    for (text, masks) in args.texts.iter().zip(fill.fill(&args.texts, args.top_k)?) {
        println!("{text}");
        if masks.is_empty() {
            println!("  (no [MASK] in this text)");
        }
        for (i, candidates) in masks.iter().enumerate() {
            let shown: Vec<String> =
                candidates.iter().map(|c| format!("{} ({:.3})", c.token, c.score)).collect();
            println!("  [MASK] {}: {}", i + 1, shown.join(", "));
        }
    }
    Ok(())
}
