//! Fine-tune (or train from scratch) a RoFormer sequence classifier on GLUE-format TSV.
//!
//! From a pretrained checkpoint:
//!   cargo run --release --example finetune -- --model <dir|hub id> --train train.tsv --dev dev.tsv --task sst2 --output out
//! From a config with random init and a vocabulary trained on the training texts:
//!   cargo run --release --example finetune -- --config config.json --train-vocab 8000 --train ... --output out

use std::time::Instant;

use anyhow::{bail, Context, Result};
use clap::Parser;
use roformer::training::{train_wordpiece, Example, Target, Trainer};
use roformer::{Checkpoint, Classification, Config, ProblemType, Tokenizer, Truncation};

mod common;

use common::glue::{self, Task};
use common::tsv::{self, Dataset};

#[derive(Parser)]
#[command(about = "Train a RoFormer sequence classifier")]
struct Args {
    /// Start from this checkpoint (folder or Hub id); its head is kept when it has one.
    #[arg(long, conflicts_with = "config")]
    model: Option<String>,
    #[arg(long)]
    revision: Option<String>,
    /// Start from random init with this config.json.
    #[arg(long)]
    config: Option<String>,
    /// With --config: train a WordPiece vocabulary of this size on the training texts.
    #[arg(long)]
    train_vocab: Option<usize>,
    /// With --config: a folder holding vocab.txt (and tokenizer_config.json).
    #[arg(long)]
    vocab: Option<String>,
    #[arg(long)]
    train: String,
    #[arg(long)]
    dev: Option<String>,
    #[command(flatten)]
    columns: common::ColumnArgs,
    /// Label names in class order, comma-separated (default: LABEL_0, ... or the checkpoint's).
    #[arg(long, value_delimiter = ',')]
    labels: Option<Vec<String>>,
    /// Where the best model (by the dev metric) is saved.
    #[arg(long)]
    output: String,
    #[arg(long, default_value_t = 3)]
    epochs: usize,
    #[arg(long, default_value_t = 32)]
    batch_size: usize,
    #[arg(long, default_value_t = 5e-5)]
    lr: f64,
    #[arg(long, default_value_t = 0.06)]
    warmup_ratio: f64,
    #[arg(long, default_value_t = 0.01)]
    weight_decay: f64,
    #[arg(long, default_value_t = 1.0)]
    max_grad_norm: f64,
    #[arg(long, default_value_t = 42)]
    seed: u64,
    #[arg(long, default_value_t = 128)]
    max_length: usize,
    #[arg(long, default_value = "cpu")]
    device: String,
    #[arg(long)]
    skip_bad_lines: bool,
}

fn main() -> std::process::ExitCode {
    common::main_with(run)
}

fn run() -> Result<()> {
    let args = Args::parse();
    let start = Instant::now();
    let device = common::parse_device(&args.device)?;
    let Some(columns) = args.columns.columns()? else {
        bail!("give --task or --text-col/--label-col");
    };
    // Labels are checked against the classes once the config is known, naming their lines.
    let read = |path: &str| -> Result<Dataset> {
        let data = args.columns.read(path, None, args.skip_bad_lines)?;
        if !data.has_labels() {
            bail!("{path} has no labels in the label column");
        }
        Ok(data)
    };
    let mut train = read(&args.train)?;
    let mut dev = args.dev.as_deref().map(read).transpose()?;
    // The folder the first epoch saves into is made now: a wrong path should not cost an epoch.
    std::fs::create_dir_all(&args.output).with_context(|| format!("creating the folder {}", args.output))?;

    // Model folder, config and tokenizer.
    let (mut config, checkpoint, mut tokenizer) = match (&args.model, &args.config) {
        (Some(model), _) => {
            let dir = common::hub_options().resolve(model, args.revision.as_deref())?;
            (
                Config::from_file(dir.join("config.json"))?,
                Some(Checkpoint::open(&dir)?),
                Tokenizer::from_dir(&dir)?,
            )
        }
        (None, Some(config)) => {
            let config = Config::from_file(config)?;
            let vocab_dir = match (args.train_vocab, &args.vocab) {
                (Some(size), _) => {
                    let dir = std::path::Path::new(&args.output).join("vocab-training");
                    let texts = train
                        .rows
                        .iter()
                        .flat_map(|r| std::iter::once(r.text.as_str()).chain(r.pair.as_deref()));
                    train_wordpiece(texts, size, 2, &dir)?;
                    dir
                }
                (None, Some(vocab)) => vocab.into(),
                (None, None) => bail!("with --config, give --train-vocab <size> or --vocab <folder>"),
            };
            let tokenizer = Tokenizer::from_dir(&vocab_dir)?;
            (config, None, tokenizer)
        }
        (None, None) => bail!("give --model <checkpoint> or --config <config.json>"),
    };
    if checkpoint.is_none() {
        config.vocab_size = tokenizer.vocab_size();
    }
    if let Some(labels) = &args.labels {
        config.id2label = Some(labels.iter().cloned().enumerate().collect());
        config.label2id = Some(labels.iter().cloned().enumerate().map(|(i, l)| (l, i)).collect());
        config.num_labels = None;
    }
    config.validate()?;
    let files =
        std::iter::once((&mut train, args.train.as_str())).chain(dev.as_mut().zip(args.dev.as_deref()));
    for (data, path) in files {
        let before = data.skipped.len();
        glue::check_labels(data, path, &config, args.skip_bad_lines)?;
        tsv::report_skipped(path, &data.skipped[before..]);
    }
    tokenizer.set_truncation(Some(Truncation::LongestFirst), Some(args.max_length))?;

    let examples = |data: &Dataset| -> Result<Vec<Example>> {
        let encodings = match columns.pair {
            Some(_) => tokenizer.encode_pair_batch(
                &data
                    .rows
                    .iter()
                    .map(|r| (r.text.as_str(), r.pair.as_deref().unwrap_or("")))
                    .collect::<Vec<_>>(),
            )?,
            None => tokenizer.encode_batch(&data.rows.iter().map(|r| r.text.as_str()).collect::<Vec<_>>())?,
        };
        data.rows
            .iter()
            .zip(encodings)
            .map(|(row, encoding)| {
                let label = row.label.as_deref().unwrap_or_default();
                let target = match config.problem_type() {
                    ProblemType::Regression => Target::Value(
                        label.parse().with_context(|| format!("line {}: label {label:?}", row.line))?,
                    ),
                    _ => Target::Class(
                        glue::label_to_id(label, &config).with_context(|| format!("line {}", row.line))?,
                    ),
                };
                Ok(Example { encoding, target })
            })
            .collect()
    };
    let train_examples = examples(&train)?;
    let dev_examples = dev.as_ref().map(examples).transpose()?;
    eprintln!(
        "{} training examples, {} dev examples, vocab {}, {:.1}s to prepare",
        train_examples.len(),
        dev_examples.as_ref().map_or(0, Vec::len),
        tokenizer.vocab_size(),
        start.elapsed().as_secs_f64()
    );

    let mut builder = Trainer::builder(config.clone())
        .epochs(args.epochs)
        .batch_size(args.batch_size)
        .learning_rate(args.lr)
        .warmup_ratio(args.warmup_ratio)
        .weight_decay(args.weight_decay)
        .max_grad_norm(args.max_grad_norm)
        .seed(args.seed)
        .pad_id(tokenizer.pad_id())
        .device(&device);
    if let Some(checkpoint) = &checkpoint {
        builder = builder.init_from(checkpoint);
    }
    let mut trainer = builder.build(train_examples.len())?;
    let metric = args.columns.task.map(Task::metric);
    let mut best: Option<f64> = None;
    for epoch in 1..=args.epochs {
        let batches = trainer.batches(&train_examples);
        let bar = indicatif::ProgressBar::new(batches.len() as u64);
        bar.set_style(indicatif::ProgressStyle::with_template(
            "epoch {prefix} {bar:30} {pos}/{len} {msg} eta {eta}",
        )?);
        bar.set_prefix(epoch.to_string());
        let (mut total, mut count) = (0.0f64, 0usize);
        for batch in &batches {
            let loss = trainer.train_step(&train_examples, batch)?;
            if !loss.is_finite() {
                bail!("the loss became {loss} at epoch {epoch}: lower --lr");
            }
            total += loss as f64;
            count += 1;
            bar.set_message(format!("loss {:.4}", total / count as f64));
            bar.inc(1);
        }
        bar.finish_and_clear();
        eprintln!(
            "epoch {epoch}: mean training loss {:.4} ({:.0}s)",
            total / count.max(1) as f64,
            start.elapsed().as_secs_f64()
        );

        let Some(dev_examples) = &dev_examples else {
            trainer.save(&args.output, &tokenizer)?;
            continue;
        };
        let logits = trainer.predict(dev_examples, 64)?;
        let predictions: Vec<Classification> =
            logits.into_iter().map(|l| Classification::from_logits(&config, l, false)).collect();
        let labels: Vec<&str> = dev
            .as_ref()
            .expect("dev examples come from dev")
            .rows
            .iter()
            .map(|r| r.label.as_deref().unwrap_or_default())
            .collect();
        let scores = glue::evaluate(metric, &config, &predictions, &labels)?;
        let line: Vec<String> = scores.iter().map(|(n, v)| format!("{n} = {v:.4}")).collect();
        eprintln!("epoch {epoch}: dev {}", line.join(", "));
        let main_score = scores[0].1;
        if best.is_none_or(|b| main_score > b) {
            best = Some(main_score);
            trainer.save(&args.output, &tokenizer)?;
            eprintln!("saved to {}", args.output);
        }
    }
    let vocab_training = std::path::Path::new(&args.output).join("vocab-training");
    if vocab_training.exists() {
        std::fs::remove_dir_all(&vocab_training)?;
    }
    eprintln!("done in {:.0}s", start.elapsed().as_secs_f64());
    Ok(())
}
