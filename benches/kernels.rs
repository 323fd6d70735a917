//! A timing probe of the fused engine's kernels through the public API: one base-size encoder
//! layer (hidden 768, 12 heads, FFN 3072) in f32 and int8, at the SIMD level in force, reported as
//! effective GFLOP/s (the layer's multiply-adds × 2 over the time). Compare levels by running it
//! under `ROFORMER_CPU_LEVEL=avx2` (or `portable`, `avx-vnni`, `avx512`, `avx512-vnni`).
//!
//! `cargo bench --bench kernels [-- <batch>x<seq>,... [f32|int8]]`; the default shapes are a batch
//! of 32 SST-2-like sentences (32x25), one short sentence (1x16) and one long input (1x2048), in
//! both precisions (naming one leaves the other out, for a profiler).

use std::time::Instant;

use candle_core::{DType, Device, Tensor};
use candle_nn::{VarBuilder, VarMap};
use roformer::{Config, Inputs, Quantization, RoFormerModel};

fn main() {
    let shapes: Vec<(usize, usize)> = std::env::args()
        .skip(1)
        .find(|a| a.contains('x'))
        .unwrap_or_else(|| "32x25,1x16,1x2048".into())
        .split(',')
        .map(|s| {
            let (b, t) = s.split_once('x').expect("shapes look like 32x25");
            (b.parse().expect("a batch size"), t.parse().expect("a length"))
        })
        .collect();
    let config = Config::from_json(
        r#"{"vocab_size": 1000, "hidden_size": 768, "num_hidden_layers": 1, "num_attention_heads": 12,
            "intermediate_size": 3072, "max_position_embeddings": 4096}"#,
    )
    .expect("config");
    // Random weights, fixed (not variables), so the fused engine takes them.
    let varmap = VarMap::new();
    let vb = VarBuilder::from_varmap(&varmap, DType::F32, &Device::Cpu);
    let trained = RoFormerModel::load(vb, &config).expect("model");
    let weights: std::collections::HashMap<String, Tensor> =
        varmap.data().lock().unwrap().iter().map(|(k, v)| (k.clone(), v.as_tensor().detach())).collect();
    let fixed =
        || RoFormerModel::load(VarBuilder::from_tensors(weights.clone(), DType::F32, &Device::Cpu), &config);
    drop(trained);
    let level = std::env::var("ROFORMER_CPU_LEVEL").unwrap_or_else(|_| "the CPU's best".into());
    println!("level: {level}");
    let only = std::env::args().skip(1).find(|a| a == "f32" || a == "int8");
    for quantization in [Quantization::None, Quantization::Int8] {
        let name = if quantization == Quantization::None { "f32" } else { "int8" };
        if only.as_deref().is_some_and(|o| o != name) {
            continue;
        }
        let mut model = fixed().expect("model");
        model.quantize(quantization).expect("quantize");
        for &(batch, seq) in &shapes {
            let ids: Vec<u32> = (0..batch * seq).map(|i| (i % 997) as u32).collect();
            let ids = Tensor::from_vec(ids, (batch, seq), &Device::Cpu).unwrap();
            let (m, h, f) = ((batch * seq) as f64, 768f64, 3072f64);
            let flop =
                2.0 * m * (h * 3.0 * h + h * h + 2.0 * h * f) + 4.0 * batch as f64 * (seq * seq) as f64 * h;
            let mut best = f64::INFINITY;
            let rounds = if seq > 1000 { 3 } else { 20 };
            for _ in 0..rounds {
                let start = Instant::now();
                model.forward(Inputs::new(&ids)).expect("forward");
                best = best.min(start.elapsed().as_secs_f64());
            }
            println!(
                "{quantization:5} {batch}x{seq}: best {:.2} ms, {:.0} effective GFLOP/s",
                best * 1e3,
                flop / best / 1e9
            );
        }
    }
}
