//! A timing probe of the fused engine's kernels through the public API: one base-size encoder
//! layer (hidden 768, 12 heads, FFN 3072) in f32 and int8, at the SIMD level in force, reported as
//! effective GFLOP/s (the layer's multiply-adds × 2 over the time). Compare levels by running it
//! under `ROFORMER_CPU_LEVEL=avx2` (or `portable`, `avx-vnni`, `avx512`, `avx512-vnni`).
//!
//! `cargo bench --bench kernels [-- <batch>x<seq>,... [f32|int8|bf16]]`; the default shapes are a
//! batch of 32 SST-2-like sentences (32x25), one short sentence (1x16) and one long input (1x2048),
//! in every precision (naming one leaves the others out, for a profiler).
//!
//! `cargo bench --bench kernels -- gemm` times a base layer's products alone instead (M = 512,
//! K = 768, N = 768 and 3072) at every level this CPU runs, in each precision, in TMAC/s (int8's
//! input quantization and bf16's rounding included), on 1 and 2 threads, beside loops of
//! `vfmadd231ps`, `vdpbf16ps` and `vpdpbusd` on registers as the register kernels' peaks, a plain
//! `tdpbusd` loop on registers as the AMX unit's peak, and the int8 tile program itself and its tile loads
//! alone on operands in L1 (what the program's shape allows); then, where a level has a tile
//! program, each row count's time with the tiles and with the register kernel, which puts the
//! crossover.

use std::time::Instant;

use candle_core::{DType, Device, Tensor};
use candle_nn::{VarBuilder, VarMap};
use roformer::{Config, Inputs, Quantization, RoFormerModel};

fn main() {
    if std::env::args().skip(1).any(|a| a == "gemm") {
        return gemm();
    }
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
    let only = std::env::args().skip(1).find(|a| ["f32", "int8", "bf16"].contains(&a.as_str()));
    for quantization in [Quantization::None, Quantization::Int8, Quantization::Bf16] {
        let name = if quantization == Quantization::None { "f32".into() } else { quantization.to_string() };
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
                "{name:5} {batch}x{seq}: best {:.2} ms, {:.0} effective GFLOP/s",
                best * 1e3,
                flop / best / 1e9
            );
        }
    }
}

/// The products alone, per level and precision, and the tile programs' crossover.
fn gemm() {
    use roformer::kernel_probe::{
        amx_int8_peak, amx_int8_program, gemm_seconds, levels, register_peaks, Tiles,
    };
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|info| {
            info.lines()
                .find(|l| l.starts_with("model name"))
                .map(|l| l[l.find(':').map_or(0, |i| i + 2)..].to_string())
        })
        .unwrap_or_else(|| std::env::consts::ARCH.into());
    println!("{cpu}; levels {}", levels().join(", "));
    let peaks: Vec<String> =
        register_peaks().into_iter().map(|(instruction, peak)| format!("{instruction} {peak:.3}")).collect();
    if !peaks.is_empty() {
        println!("512-bit instructions on registers alone, 1 thread, TMAC/s: {}", peaks.join(", "));
    }
    let peak = amx_int8_peak();
    match peak {
        Some(peak) => println!("tdpbusd on registers (the unit's int8 peak), 1 thread: {peak:.2} TMAC/s"),
        None => println!("tdpbusd: no usable AMX unit here"),
    }
    if let Some(rates) = amx_int8_program() {
        println!(
            "the int8 tile program (K = 768, no quantizing or epilogue), 1 thread: {:.2} TMAC/s on \
             operands in L1, {:.2} with its inputs from L2 (8 tiles, 192 KiB); its tile loads alone: {:.2}",
            rates.l1, rates.l2_inputs, rates.loads
        );
    }
    let tmacs = |(m, k, n): (usize, usize, usize), seconds: f64| (m * k * n) as f64 / seconds / 1e12;
    println!("\nM = 512, K = 768 | TMAC/s at N = 768, 1 thread | 2 threads | N = 3072, 1 thread | 2 threads");
    let mut amx_int8 = None;
    for level in levels() {
        for precision in ["f32", "int8", "bf16"] {
            let mut cells = Vec::new();
            for n in [768, 3072] {
                for threads in [1, 2] {
                    let shape = (512, 768, n);
                    let seconds =
                        gemm_seconds(level, precision, Tiles::Level, shape, threads, 10).expect("gemm");
                    let rate = tmacs(shape, seconds);
                    if (level, precision, n, threads) == ("amx", "int8", 768, 1) {
                        amx_int8 = Some(rate);
                    }
                    cells.push(format!("{rate:.3}"));
                }
            }
            println!("| {level} {precision} | {} |", cells.join(" | "));
        }
    }
    // The goal the lab log measures the tile program against (docs/log/2026-11-amx-bf16.md): half the
    // unit's loop, on one core.
    if let (Some(rate), Some(peak)) = (amx_int8, peak) {
        println!(
            "amx int8, M = 512, N = 768, 1 thread: {rate:.3} TMAC/s, {:.2} of the tdpbusd loop (the goal: 0.50)",
            rate / peak
        );
    }
    if !levels().contains(&"amx") {
        println!("\nno tile program on this CPU: no crossover to measure");
        return;
    }
    println!("\namx: µs per product, tiles / registers, 1 thread (K = 768)");
    println!("| M | int8 N = 768 | int8 N = 3072 | bf16 N = 768 | bf16 N = 3072 |");
    for m in [1, 4, 8, 16, 24, 32, 48, 64, 128, 512] {
        let mut cells = Vec::new();
        for precision in ["int8", "bf16"] {
            for n in [768, 3072] {
                let time =
                    |tiles| gemm_seconds("amx", precision, tiles, (m, 768, n), 1, 20).expect("gemm") * 1e6;
                cells.push(format!("{:.0} / {:.0}", time(Tiles::Always), time(Tiles::Never)));
            }
        }
        println!("| {m} | {} |", cells.join(" | "));
    }
}
