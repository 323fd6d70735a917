//! Similar sentences from a sim checkpoint: one sentence per line (file or stdin) to JSONL, one
//! row per input, in order: `{"index", "text", "candidates": [{"ids", "text", "similarity"}]}`.
//!
//! `cargo run --release --example paraphrase -- --model junnyu/roformer_chinese_sim_char_ft_base --input s.txt`

use std::io::{IsTerminal, Write};

use anyhow::{Context, Result};
use clap::Parser;
use roformer::{GenerationOptions, Paraphraser, Sampling};

mod common;

#[derive(Parser)]
#[command(
    about = "Generate sentences similar to each input with a RoFormer-Sim checkpoint, ranked by similarity"
)]
struct Args {
    /// Checkpoint folder or Hub id (junnyu/roformer_chinese_sim_char_ft_base, say).
    #[arg(long)]
    model: String,
    #[command(flatten)]
    run: common::RunArgs,
    /// One sentence per line; - or nothing for stdin.
    #[arg(long, default_value = "-")]
    input: String,
    /// Output file (JSONL). Default: stdout.
    #[arg(long)]
    output: Option<String>,
    /// Candidates sampled per sentence, decoded together as one batch.
    #[arg(long, default_value_t = 32)]
    num_samples: usize,
    /// The most similar candidates kept per sentence (default 8; 1 with --greedy, which makes one).
    #[arg(long)]
    num_return: Option<usize>,
    /// Nucleus sampling: keep the smallest set of tokens holding this much probability.
    #[arg(long, default_value_t = 0.95)]
    top_p: f32,
    /// Sample among the k most likely tokens only.
    #[arg(long)]
    top_k: Option<usize>,
    #[arg(long, default_value_t = 1.0)]
    temperature: f32,
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// At most this many generated tokens per candidate, the closing [SEP] included.
    #[arg(long, default_value_t = 32)]
    max_new_tokens: usize,
    /// One deterministic candidate: the most likely token at each step.
    #[arg(long)]
    greedy: bool,
}

fn main() -> std::process::ExitCode {
    common::main_with(run)
}

fn run() -> Result<()> {
    let args = Args::parse();
    let (sampling, num_samples, num_return) = if args.greedy {
        (Sampling::Greedy, 1, args.num_return.unwrap_or(1))
    } else {
        let sampling =
            Sampling::Sample { temperature: args.temperature, top_k: args.top_k, top_p: args.top_p };
        (sampling, args.num_samples, args.num_return.unwrap_or(8))
    };
    let generation = GenerationOptions::default()
        .with_sampling(sampling)
        .with_num_samples(num_samples)
        .with_seed(args.seed)
        .with_max_new_tokens(args.max_new_tokens);
    // Flags are checked before the model loads: a mistake should not cost a download.
    generation.validate()?;
    let options = args.run.options()?;
    let mut out = common::output(args.output.as_deref())?;
    let paraphraser = Paraphraser::from_pretrained_with(&args.model, options)
        .with_context(|| format!("loading {}", args.model))?;
    if args.input == "-" && std::io::stdin().is_terminal() {
        eprintln!(
            "reading sentences from the terminal, one per line; end with Ctrl-D (or pass --input FILE)"
        );
    }
    let mut lines = common::tsv::Lines::new(common::tsv::open_input(&args.input)?, &args.input);
    let mut index = 0;
    while let Some((number, line)) = lines.next_line()? {
        let text = line.map_err(|m| anyhow::anyhow!("{}:{number}: {m}", args.input))?;
        // An option's fault (num_return against num_samples) is no line's.
        let candidates = paraphraser.paraphrase(&text, &generation, num_return).map_err(|e| match e {
            e @ roformer::Error::InvalidOption { .. } => anyhow::Error::new(e),
            e => anyhow::Error::new(e).context(format!("{}:{number}", args.input)),
        })?;
        let candidates: Vec<_> = candidates
            .iter()
            .map(|c| serde_json::json!({"ids": c.ids, "text": c.text, "similarity": c.similarity}))
            .collect();
        writeln!(out, "{}", serde_json::json!({"index": index, "text": text, "candidates": candidates}))?;
        index += 1;
    }
    Ok(out.flush()?)
}
