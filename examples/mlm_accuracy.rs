//! Masked-token accuracy of a masked-LM checkpoint on long inputs, with or without RoPE scaling:
//! how well a model extrapolates past the length it was trained on.
//!
//! `cargo run --release --example mlm_accuracy -- --model <dir> --input text.txt --lengths 128,256,512
//!  [--rope-scaling linear:4]`
//!
//! The text's tokens are cut into windows of each length (`[CLS]` … `[SEP]`); every 7th token is
//! replaced by `[MASK]` (a fixed pattern, so runs compare) and the model must restore it. Prints one
//! JSON line per length: the length, the windows, the masked tokens and the top-1 accuracy.

use std::num::NonZeroUsize;

use anyhow::{bail, Context, Result};
use candle_core::{DType, Device, Tensor, D};
use clap::Parser;
use roformer::{Checkpoint, Config, Inputs, RoFormerForMaskedLM, RopeScaling, Tokenizer};

mod common;

#[derive(Parser)]
#[command(about = "Masked-token accuracy at given lengths, under a RoPE scaling")]
struct Args {
    /// A masked-LM checkpoint folder.
    #[arg(long)]
    model: String,
    /// Plain text; its tokens are used in order.
    #[arg(long)]
    input: String,
    /// Window lengths in tokens, special tokens included.
    #[arg(long, value_delimiter = ',', default_value = "128,256,512,1024")]
    lengths: Vec<usize>,
    /// linear:F, dynamic:F or yarn:F; without it, the plain table.
    #[arg(long)]
    rope_scaling: Option<RopeScaling>,
    /// At most this many windows per length.
    #[arg(long, default_value_t = NonZeroUsize::new(24).unwrap())]
    max_windows: NonZeroUsize,
}

fn main() -> std::process::ExitCode {
    common::main_with(run)
}

fn run() -> Result<()> {
    let args = Args::parse();
    let dir = std::path::Path::new(&args.model);
    let mut config = Config::from_file(dir.join("config.json"))?;
    config.set_rope_scaling(args.rope_scaling.clone());
    let model: RoFormerForMaskedLM = Checkpoint::open(dir)?.load(&config, DType::F32, &Device::Cpu)?;
    let tokenizer = Tokenizer::from_dir(dir)?;
    let text = std::fs::read_to_string(&args.input).with_context(|| format!("reading {}", args.input))?;
    // Each line's tokens without their [CLS] and [SEP], one stream.
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    let stream: Vec<u32> = tokenizer
        .encode_batch(&lines)?
        .into_iter()
        .flat_map(|e| e.input_ids[1..e.input_ids.len() - 1].to_vec())
        .collect();
    let (cls, sep, mask) = (
        tokenizer.token_id("[CLS]")?,
        tokenizer.token_id("[SEP]")?,
        tokenizer.token_id(tokenizer.mask_token())?,
    );
    let scaling = args.rope_scaling.as_ref().map_or("none".to_string(), |s| format!("{s:?}"));
    for &length in &args.lengths {
        if length < 3 {
            bail!("length {length} leaves no room between [CLS] and [SEP]");
        }
        let body = length - 2;
        let windows = (stream.len() / body).min(args.max_windows.get());
        if windows == 0 {
            bail!("{} has {} tokens, fewer than one window of {length}", args.input, stream.len());
        }
        let (mut correct, mut total) = (0usize, 0usize);
        for w in 0..windows {
            let original = &stream[w * body..(w + 1) * body];
            let masked: Vec<u32> =
                original.iter().enumerate().map(|(i, &t)| if i % 7 == 3 { mask } else { t }).collect();
            let ids: Vec<u32> = std::iter::once(cls).chain(masked).chain([sep]).collect();
            let ids = Tensor::from_vec(ids, (1, length), &Device::Cpu)?;
            let predicted =
                model.forward(Inputs::new(&ids))?.argmax(D::Minus1)?.squeeze(0)?.to_vec1::<u32>()?;
            for (i, &want) in original.iter().enumerate().filter(|(i, _)| i % 7 == 3) {
                total += 1;
                correct += usize::from(predicted[i + 1] == want);
            }
        }
        let accuracy = correct as f64 / total as f64;
        println!(
            "{}",
            serde_json::json!({"length": length, "rope_scaling": scaling, "windows": windows, "masked": total, "accuracy": accuracy})
        );
    }
    Ok(())
}
