//! Timing probes for `benches/kernels.rs`: one packed product at a named level and precision, on
//! a pool of a given number of threads, and the AMX unit's own peak. Not part of the API (the
//! crate re-exports this module hidden), so that the benchmark can time the kernels by level in
//! one process, which the public API decides once per process.

use std::time::Instant;

pub use super::amx::ProgramRates;
use super::gemm::{PackedBf16, PackedF32, PackedI8};
use super::linear::PackedWeight;
use super::tile_bf16::Bf16Kernel;
use super::tile_int8::I8Kernel;
use super::Level;

/// Which kernel computes a product at a level that has a tile program.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tiles {
    /// As the level decides by the row count.
    Level,
    /// The tile program at every row count.
    Always,
    /// The register kernel at every row count.
    Never,
}

/// The levels this CPU runs, by name, lowest first.
pub fn levels() -> Vec<&'static str> {
    Level::ALL.into_iter().filter(|l| l.supported()).map(Level::name).collect()
}

/// This architecture's levels by name, lowest first, with whether this CPU runs each.
pub fn arch_levels() -> Vec<(&'static str, bool)> {
    Level::ALL.into_iter().filter(|l| l.of_this_arch()).map(|l| (l.name(), l.supported())).collect()
}

/// The best of `rounds` timings, in seconds, of `(m, k) · (n, k)ᵀ` at `level` in `precision`
/// (`f32`, `int8` or `bf16`; int8 and bf16 include quantizing or rounding the input) on a pool
/// of `threads`, after 300 ms of untimed rounds (see `WARM_UP`).
pub fn gemm_seconds(
    level: &str,
    precision: &str,
    tiles: Tiles,
    (m, k, n): (usize, usize, usize),
    threads: usize,
    rounds: usize,
) -> Result<f64, String> {
    let level = Level::ALL.into_iter().find(|l| l.name() == level).ok_or(format!("no level {level}"))?;
    if !level.supported() {
        return Err(format!("this CPU does not run {}", level.name()));
    }
    let w = super::noise(n * k, 1);
    let a: Vec<f32> = super::noise(m * k, 2).into_iter().map(|v| v + 0.2).collect();
    let weight: Box<dyn PackedWeight + Sync> = match precision {
        "f32" => Box::new(PackedF32::new(level, &w, n, k)),
        "int8" => {
            let tiles =
                I8Kernel::tiles_for_level(level).map(|(kernel, from)| (kernel, rows_from(tiles, from)));
            Box::new(PackedI8::for_kernels(I8Kernel::for_level(level), tiles, &w, n, k))
        }
        "bf16" => match Bf16Kernel::for_level(level) {
            Some(kernel) => {
                let tiles =
                    Bf16Kernel::tiles_for_level(level).map(|(kernel, from)| (kernel, rows_from(tiles, from)));
                Box::new(PackedBf16::for_kernels(kernel, tiles, &w, n, k))
            }
            None => Box::new(PackedBf16::new(level, &w, n, k)),
        },
        _ => return Err(format!("no precision {precision} (f32, int8, bf16)")),
    };
    let pool = pool(threads)?;
    // On a 64-byte line, as the engine's products write theirs (`written_tensor`).
    let mut out = super::layout::Aligned::<f32>::zeros(m * n);
    // SAFETY: `out` holds m × n floats.
    let mut product =
        || pool.install(|| unsafe { weight.matmul(&a, m, None, out.as_mut_slice().as_mut_ptr()) });
    let warm = Instant::now();
    while warm.elapsed() < WARM_UP {
        product();
    }
    let mut best = f64::INFINITY;
    for _ in 0..rounds {
        let start = Instant::now();
        product();
        best = best.min(start.elapsed().as_secs_f64());
    }
    Ok(best)
}

/// How long a product runs untimed before its timed rounds. A pool's threads can share one core
/// for a while after they start: on a 2-core AMD EPYC VM (Zen 4), 2-thread products ran at one
/// thread's rate for their first 5 to 250 ms, so that the best of 10 rounds right after the pool
/// was built showed no gain from the second thread in 6 of a run's 30 two-thread cells.
const WARM_UP: std::time::Duration = std::time::Duration::from_millis(300);

/// One pool per thread count for the whole process, so that its threads settle on their cores
/// once rather than at every product.
fn pool(threads: usize) -> Result<std::sync::Arc<rayon::ThreadPool>, String> {
    use std::collections::HashMap;
    use std::sync::{Arc, Mutex, OnceLock};
    static POOLS: OnceLock<Mutex<HashMap<usize, Arc<rayon::ThreadPool>>>> = OnceLock::new();
    let mut pools = POOLS.get_or_init(Default::default).lock().map_err(|e| e.to_string())?;
    if let Some(pool) = pools.get(&threads) {
        return Ok(pool.clone());
    }
    let pool =
        Arc::new(rayon::ThreadPoolBuilder::new().num_threads(threads).build().map_err(|e| e.to_string())?);
    pools.insert(threads, pool.clone());
    Ok(pool)
}

fn rows_from(tiles: Tiles, level_decides: usize) -> usize {
    match tiles {
        Tiles::Level => level_decides,
        Tiles::Always => 1,
        Tiles::Never => usize::MAX,
    }
}

/// Int8 multiply-adds per second, in trillions, of a loop of `tdpbusd` on registers alone (four
/// accumulators, two A and two B tiles loaded once) on the calling thread: the unit's peak, which
/// no product with loads can pass. `None` where the unit is not usable.
pub fn amx_int8_peak() -> Option<f64> {
    #[cfg(target_arch = "x86_64")]
    if super::amx::usable() {
        return Some(super::amx::int8_peak());
    }
    None
}

/// Multiply-adds per second, in trillions, of loops of 12 independent 512-bit instructions on
/// registers alone, on the calling thread, for each precision's AVX-512 instruction this CPU
/// runs: `vfmadd231ps` (f32, 16 a instruction), `vdpbf16ps` (bf16, 32) and `vpdpbusd` (int8, 64).
/// The peaks the register kernels of `avx512`, `avx512-bf16` and `avx512-vnni` can approach.
pub fn register_peaks() -> Vec<(&'static str, f64)> {
    #[allow(unused_mut)]
    let mut peaks = Vec::new();
    #[cfg(target_arch = "x86_64")]
    {
        const ROUNDS: usize = 20_000_000;
        let rate = |macs: f64, run: unsafe fn(usize)| {
            let start = Instant::now();
            // SAFETY: called below only where the level's detection found the instructions.
            unsafe { run(ROUNDS) };
            ROUNDS as f64 * 12.0 * macs / start.elapsed().as_secs_f64() / 1e12
        };
        if Level::Avx512.supported() {
            peaks.push(("vfmadd231ps (f32)", rate(16.0, peak_loops::f32)));
        }
        if Level::Avx512Bf16.supported() {
            peaks.push(("vdpbf16ps (bf16)", rate(32.0, peak_loops::bf16)));
        }
        if Level::Avx512Vnni.supported() {
            peaks.push(("vpdpbusd (int8)", rate(64.0, peak_loops::int8)));
        }
    }
    peaks
}

#[cfg(target_arch = "x86_64")]
mod peak_loops {
    use std::arch::x86_64::*;

    /// A function running `rounds` rounds of `$op` on 12 accumulators from `$start`, with both
    /// operands `$operand` (opaque to the compiler, so that nothing folds).
    macro_rules! peak_loop {
        ($name:ident, $features:literal, $start:expr, $operand:expr, |$acc:ident, $x:ident| $op:expr) => {
            /// # Safety
            /// The CPU runs the instructions of the features named.
            #[target_feature(enable = $features)]
            pub(super) unsafe fn $name(rounds: usize) {
                let $x = std::hint::black_box($operand);
                let mut accumulators = [$start; 12];
                for _ in 0..rounds {
                    for a in accumulators.iter_mut() {
                        let $acc = *a;
                        *a = $op;
                    }
                }
                std::hint::black_box(accumulators);
            }
        };
    }

    peak_loop!(f32, "avx512f", _mm512_setzero_ps(), _mm512_set1_ps(1.0), |acc, x| _mm512_fmadd_ps(x, x, acc));
    // SAFETY (the transmute): 32 bf16 are 16 dwords' worth of bits; 0x3F80 is 1.0.
    peak_loop!(
        bf16,
        "avx512f,avx512bf16",
        _mm512_setzero_ps(),
        unsafe { std::mem::transmute::<__m512i, __m512bh>(_mm512_set1_epi32(0x3F80_3F80)) },
        |acc, x| _mm512_dpbf16_ps(acc, x, x)
    );
    peak_loop!(int8, "avx512f,avx512vnni", _mm512_setzero_si512(), _mm512_set1_epi8(1), |acc, x| {
        _mm512_dpbusd_epi32(acc, x, x)
    });
}

/// [`ProgramRates`] on this CPU; `None` where the unit is not usable.
pub fn amx_int8_program() -> Option<ProgramRates> {
    #[cfg(target_arch = "x86_64")]
    if super::amx::usable() {
        return Some(super::amx::int8_program_rates());
    }
    None
}
