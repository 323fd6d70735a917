//! Batch-1 latency of the classifier pipeline on inputs of exactly N tokens, for
//! `scripts/bench/bench_e2e.py` (which runs the Python peers on the same inputs in the same run).
//!
//! `cargo bench --bench latency -- <model dir> <tokens>[,<tokens>...] [f32|int8|bf16] [runs]
//! [threads] [warm-up runs]` prints one line per length: `tokens=N median_ms=M p90_ms=P
//! best_ms=B`, after that many untimed runs at that length (default 5). The pipeline runs on
//! `threads` (default: one per core), so that a peer held to a thread count meets ours held to it.
//! `scripts/bench/bench_long_peers.py` takes it with few runs and one warm-up for long inputs.

use std::time::Instant;

use roformer::{Encoded, PipelineOptions, TextClassifier};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).filter(|a| a != "--bench").collect();
    let (Some(model), Some(lengths)) = (args.first(), args.get(1)) else {
        eprintln!(
            "usage: cargo bench --bench latency -- <model dir> <tokens,...> [f32|int8|bf16] [runs] [threads] \
             [warm-up runs]"
        );
        return;
    };
    let quantize = args.get(2).map(String::as_str).unwrap_or("f32");
    let runs: usize = args.get(3).and_then(|r| r.parse().ok()).unwrap_or(50).max(1);
    let warmups: usize = args.get(5).map_or(5, |w| w.parse().expect("a count of warm-up runs"));
    let mut options = PipelineOptions::default().with_batch_size(1).with_max_length(100_000);
    if let Some(threads) = args.get(4) {
        options = options.with_threads(threads.parse().expect("a thread count"));
    }
    let options = match quantize {
        "f32" => options,
        other => options.with_quantization(other.parse().expect("a quantization")),
    };
    let classifier = TextClassifier::from_pretrained_with(model, options).expect("model");
    let tokenizer = classifier.tokenizer();
    let (cls, sep) = (tokenizer.token_id("[CLS]").unwrap(), tokenizer.token_id("[SEP]").unwrap());
    for tokens in lengths.split(',').map(|t| t.parse::<usize>().expect("a token count")) {
        // The same ids the Python peers use: [CLS], then 1000, 1001, ..., then [SEP].
        let input_ids: Vec<u32> =
            std::iter::once(cls).chain((0..tokens - 2).map(|i| 1000 + i as u32)).chain([sep]).collect();
        let encoding = Encoded {
            token_type_ids: vec![0; tokens],
            attention_mask: vec![1; tokens],
            offsets: vec![(0, 0); tokens],
            truncated: false,
            input_ids,
        };
        let batch = [encoding];
        for _ in 0..warmups {
            classifier.classify_tokenized(&batch).unwrap();
        }
        let mut times: Vec<f64> = (0..runs)
            .map(|_| {
                let start = Instant::now();
                classifier.classify_tokenized(&batch).unwrap();
                start.elapsed().as_secs_f64() * 1e3
            })
            .collect();
        times.sort_by(f64::total_cmp);
        println!(
            "tokens={tokens} median_ms={:.3} p90_ms={:.3} best_ms={:.3}",
            times[runs / 2],
            times[runs * 9 / 10],
            times[0]
        );
    }
}
