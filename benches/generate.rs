//! Generation speed for `scripts/bench/bench_generate.py` (which runs junnyu's `generate` on the same
//! checkpoint and source in the same run): `samples` continuations of up to `max_new` tokens of
//! one source, top-p 0.95 and top-k 50 as the authors' recipe samples, no end token so every
//! sample runs to the limit.
//!
//! `cargo bench --bench generate -- <model dir> <source ids,...> <max_new> [int8|f32] [runs]`
//! prints `batch=1 ...` (the samples one call each, as the recipe generates) and `batch=N ...`
//! (one call, the samples decoded together): the best of `runs` in tokens per second.

use std::time::Instant;

use candle_core::{DType, Device};
use roformer::{load_dir, GenerationOptions, Quantization, RoFormerForCausalLM, Sampling, TaskModel};

const SAMPLES: usize = 32;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).filter(|a| a != "--bench").collect();
    let (Some(model), Some(source), Some(max_new)) = (args.first(), args.get(1), args.get(2)) else {
        eprintln!(
            "usage: cargo bench --bench generate -- <model dir> <source ids,...> <max_new> [int8|f32] [runs]"
        );
        return;
    };
    let source: Vec<u32> = source.split(',').map(|t| t.parse().expect("a token id")).collect();
    let max_new: usize = max_new.parse().expect("a token count");
    let quantization: Quantization =
        args.get(3).map_or("none", String::as_str).parse().expect("a quantization");
    let runs: usize = args.get(4).and_then(|r| r.parse().ok()).unwrap_or(3);
    let mut lm: RoFormerForCausalLM = load_dir(model, DType::F32, &Device::Cpu).expect("model");
    lm.quantize(quantization).expect("quantize");
    let sampling = Sampling::Sample { temperature: 1.0, top_k: Some(50), top_p: 0.95 };
    let options = GenerationOptions::default().with_sampling(sampling).with_max_new_tokens(max_new);
    let tokens_per_s = |batch: usize| {
        let calls = SAMPLES / batch;
        let best = (0..runs)
            .map(|run| {
                let start = Instant::now();
                let mut tokens = 0;
                for call in 0..calls {
                    let options =
                        options.clone().with_num_samples(batch).with_seed((run * calls + call) as u64);
                    tokens +=
                        lm.generate(&source, &options).expect("generate").iter().map(Vec::len).sum::<usize>();
                }
                tokens as f64 / start.elapsed().as_secs_f64()
            })
            .fold(0.0, f64::max);
        println!("batch={batch} tokens_per_s={best:.1}");
    };
    lm.generate(&source, &options).expect("warm-up");
    tokens_per_s(1);
    tokens_per_s(SAMPLES);
}
