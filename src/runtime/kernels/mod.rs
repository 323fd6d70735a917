//! CPU kernels for inference in f32 (and int8 or bf16 linears): the hot steps of a forward pass fused so
//! that each reads and writes its data once, without Candle's per-op dispatch.
//!
//! The fused engine (`crate::runtime::engine`) runs them: every kernel reads contiguous f32 CPU tensors in
//! place and returns a new tensor. The matrix products go through one GEMM driver (`gemm`) with a
//! microkernel per instruction set and precision (`tile_f32`, `tile_int8`, `tile_bf16`; the AMX
//! tile unit's program in `amx`); the elementwise kernels are plain
//! Rust compiled once per level by `multiversion!`. The level is picked at run time ([`Level`]),
//! so the crate needs no `target-cpu` flag.
//!
//! The files follow the precisions, one per precision with a module per instruction set inside,
//! because a precision's kernels share everything around their inner loop (the tile's operands,
//! the packed layouts, the input's quantization or rounding, the epilogue), which the driver in
//! `gemm` calls through one kernel table per precision: a reader who looks for AVX-512 VNNI's int8
//! tile opens `tile_int8`. The exception is `amx`, a file for a unit rather than an instruction
//! set: its program configures, loads and stores eight tile registers for both precisions, and
//! its detection and permission belong to the unit; `tile_int8` and `tile_bf16` each hold the few
//! lines that wire it in. Below them all, `layout` holds what they share of memory: the buffers on
//! 64-byte lines and the packed inputs' row layouts. So the files form floors, none reaching up:
//! `layout`, then `amx`, then the tiles, then `gemm`, then `linear` and `attention`.

/// Calls `$kernel::<R>` for a tile's row count, so that each height of a microkernel keeps its
/// accumulators in registers (`$kernel<_>`: `$kernel::<R, _>`, the rest inferred).
#[cfg(any(
    target_arch = "x86_64",
    target_arch = "aarch64",
    all(target_arch = "wasm32", target_feature = "simd128")
))]
macro_rules! by_rows {
    ($kernel:ident, $t:expr, $($r:literal)*) => {
        match $t.rows {
            $($r => $kernel::<$r>($t),)*
            _ => unreachable!("tile rows are checked against mr"),
        }
    };
    ($kernel:ident<_>, $t:expr, $($r:literal)*) => {
        match $t.rows {
            $($r => $kernel::<$r, _>($t),)*
            _ => unreachable!("tile rows are checked against mr"),
        }
    };
}

pub(crate) mod amx;
pub(crate) mod attention;
pub(crate) mod gemm;
pub(crate) mod layout;
pub(crate) mod linear;
pub(crate) mod math;
pub(crate) mod norm;
pub mod probe;
pub(crate) mod tile_bf16;
pub(crate) mod tile_f32;
pub(crate) mod tile_int8;

use std::ops::Range;

use candle_core::{CpuStorage, Device, Storage, Tensor};

use crate::error::{candle_bail, Result};

/// The f32 elements of a contiguous CPU tensor, borrowed in place.
pub(crate) struct View<'a> {
    guard: candle_core::StorageRef<'a>,
    range: Range<usize>,
}

impl View<'_> {
    pub fn new(t: &Tensor) -> Result<View<'_>> {
        let (guard, layout) = t.storage_and_layout();
        let Some((start, end)) = layout.contiguous_offsets() else {
            candle_bail!("kernel input of shape {:?} is not contiguous", t.dims())
        };
        if !matches!(&*guard, Storage::Cpu(CpuStorage::F32(_))) {
            candle_bail!("kernel input is not f32 on the CPU")
        }
        Ok(View { guard, range: start..end })
    }

    pub fn slice(&self) -> &[f32] {
        match &*self.guard {
            Storage::Cpu(CpuStorage::F32(data)) => &data[self.range.clone()],
            _ => &[],
        }
    }
}

/// An empty `Vec` with room for `len` floats, for an activation the kernels write next. One of
/// many MiB is mapped fresh by malloc (over glibc's mmap threshold) and faulted in page by page as
/// it is first written, every layer: at 8,192 tokens that was 5 to 8% of a bf16 layer (Zen 4).
/// On Linux such a buffer asks for transparent huge pages (`MADV_HUGEPAGE`, which the kernel
/// honours where THP is `madvise` or `always`), so that it faults in 2 MiB at a time; it is still
/// freed to the system when dropped. Elsewhere, and for smaller buffers, a plain `Vec`.
pub(crate) fn fresh(len: usize) -> Vec<f32> {
    let data = Vec::with_capacity(len);
    #[cfg(target_os = "linux")]
    {
        const HUGE: usize = 2 << 20;
        let (start, end) = (data.as_ptr() as usize, data.as_ptr() as usize + len * 4);
        let (first, last) = (start.next_multiple_of(HUGE), end / HUGE * HUGE);
        if len * 4 >= 8 * HUGE && first < last {
            // SAFETY: [first, last) lies inside this Vec's allocation, which nothing else uses;
            // MADV_HUGEPAGE changes how its pages are backed, never what they hold. A refusal
            // (a kernel without THP) leaves the buffer as it was, so its result is not needed.
            unsafe { libc::madvise(first as *mut libc::c_void, last - first, libc::MADV_HUGEPAGE) };
        }
    }
    data
}

/// `len` floats written by `fill` through the pointer it gets, without zeroing them first.
///
/// # Safety
/// `fill` must write every one of the `len` elements before returning, and read none it has not
/// written.
pub(crate) unsafe fn written_by(len: usize, fill: impl FnOnce(*mut f32)) -> Vec<f32> {
    let mut data = fresh(len);
    fill(data.as_mut_ptr());
    // SAFETY: `fill` initialised all `len` elements, as the caller promises.
    unsafe { data.set_len(len) };
    data
}

/// A contiguous tensor of `dims` on the CPU.
pub(crate) fn tensor(data: Vec<f32>, dims: &[usize]) -> Result<Tensor> {
    Ok(Tensor::from_vec(data, dims, &Device::Cpu)?)
}

/// A new tensor of `dims` whose floats `fill` writes through the pointer it gets, without zeroing
/// them first. The first float sits on a 64-byte line (the tensor views a buffer up to 15 floats
/// longer), so rows of a width of 16 floats start on lines too, and each 32-column panel of a
/// product writes whole lines, none shared with the task that writes the next panel: a `Vec`'s
/// floats mostly start 16 to 48 bytes into a line. The products' outputs only: alternated runs of
/// the base model on SST-2 dev (2-core AMX Xeon) gave int8 4 to 6% faster at `amx`, bf16 1.4%,
/// the other levels within the noise; the norm's and attention's outputs on lines ran either
/// faster or 6 to 10% slower from run to run (docs/log/2026-11-amx-bf16.md).
///
/// # Safety
/// As [`written_by`], for the product of `dims` elements.
pub(crate) unsafe fn written_tensor(dims: &[usize], fill: impl FnOnce(*mut f32)) -> Result<Tensor> {
    let len: usize = dims.iter().product();
    let mut data = fresh(len + 15);
    let skip = data.as_ptr().align_offset(64).min(15);
    data.resize(skip, 0.0);
    fill(data.as_mut_ptr().wrapping_add(skip));
    // SAFETY: the first `skip` are zeros, and `fill` initialised the `len` after them (the caller).
    unsafe { data.set_len(skip + len) };
    Ok(Tensor::from_vec(data, skip + len, &Device::Cpu)?.narrow(0, skip, len)?.reshape(dims)?)
}

/// A raw pointer that crosses threads, for kernels whose tasks write disjoint parts of one buffer.
#[derive(Clone, Copy)]
pub(crate) struct SendPtr(pub *mut f32);

impl SendPtr {
    /// The pointer; a method, so that closures capture the whole `SendPtr`, not its field.
    pub fn get(self) -> *mut f32 {
        self.0
    }
}

// SAFETY: each kernel hands every task its own disjoint region of the buffer.
unsafe impl Send for SendPtr {}
unsafe impl Sync for SendPtr {}

/// A SIMD level of the fused kernels, lowest first. The engine runs at the best level this CPU
/// has, or at a lower one named by `ROFORMER_CPU_LEVEL`, so that every level can be tested on a
/// machine that has the highest.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Level {
    /// Plain Rust that the compiler vectorises for the target's baseline (SSE2, NEON).
    Portable,
    /// WebAssembly SIMD (128-bit), when the module is built with `+simd128`: fixed at build
    /// time, as a WebAssembly module cannot ask the CPU.
    Simd128,
    /// WebAssembly's relaxed SIMD on top of simd128 (Chrome 114, Firefox 120; not Safari), when
    /// the module is built with `+relaxed-simd`: f32 through `f32x4.relaxed_madd`, int8 through
    /// `i32x4.relaxed_dot_i8x16_i7x16_add`. Fixed at build time, as `Simd128`.
    RelaxedSimd,
    /// aarch64 NEON: f32 through `fmla` by element; int8 through widening multiplies.
    Neon,
    /// NEON with the dot product (FEAT_DotProd: Apple M1, Graviton 2 and later): int8 through
    /// `sdot` by element.
    NeonDotprod,
    /// NEON with the int8 matrix multiply (FEAT_I8MM: Apple M2, Graviton 3 and later): int8
    /// through `usmmla`, 2 × 8 by 8 × 2 per instruction.
    NeonI8mm,
    /// AVX2 and FMA: 256-bit f32 FMAs; int8 through `vpmaddubsw` and `vpmaddwd`.
    Avx2,
    /// AVX2 with AVX-VNNI: int8 through the 256-bit `vpdpbusd`.
    AvxVnni,
    /// AVX-512 (F, BW, VL, DQ): 512-bit f32 FMAs; int8 as on AVX2.
    Avx512,
    /// AVX-512 with VNNI: int8 through the 512-bit `vpdpbusd`.
    Avx512Vnni,
    /// AVX-512 VNNI with AVX-512 BF16 (Zen 4, Zen 5, Cooper Lake, and every AMX Xeon): bf16
    /// through the 512-bit `vdpbf16ps`; f32 and int8 as at `avx512-vnni`.
    Avx512Bf16,
    /// AVX-512 BF16 with Intel AMX (Sapphire Rapids and later): int8 products of enough rows
    /// through the tile unit's `tdpbusd`, bf16 ones through `tdpbf16ps`, smaller ones as at
    /// `avx512-bf16` (see `amx`); f32 as at `avx512`. Linux only, where the process must ask for
    /// the tile state.
    Amx,
}

impl Level {
    pub const ALL: [Level; 12] = [
        Level::Portable,
        Level::Simd128,
        Level::RelaxedSimd,
        Level::Neon,
        Level::NeonDotprod,
        Level::NeonI8mm,
        Level::Avx2,
        Level::AvxVnni,
        Level::Avx512,
        Level::Avx512Vnni,
        Level::Avx512Bf16,
        Level::Amx,
    ];

    /// The name `ROFORMER_CPU_LEVEL` takes.
    pub fn name(self) -> &'static str {
        match self {
            Level::Portable => "portable",
            Level::Simd128 => "simd128",
            Level::RelaxedSimd => "relaxed-simd",
            Level::Neon => "neon",
            Level::NeonDotprod => "neon-dotprod",
            Level::NeonI8mm => "neon-i8mm",
            Level::Avx2 => "avx2",
            Level::AvxVnni => "avx-vnni",
            Level::Avx512 => "avx512",
            Level::Avx512Vnni => "avx512-vnni",
            Level::Avx512Bf16 => "avx512-bf16",
            Level::Amx => "amx",
        }
    }

    /// Whether the level is one of this architecture's, which a CPU of it may lack; another
    /// architecture's levels are not this CPU's to miss.
    pub fn of_this_arch(self) -> bool {
        match self {
            Level::Portable => true,
            Level::Simd128 | Level::RelaxedSimd => cfg!(target_arch = "wasm32"),
            Level::Neon | Level::NeonDotprod | Level::NeonI8mm => cfg!(target_arch = "aarch64"),
            Level::Avx2
            | Level::AvxVnni
            | Level::Avx512
            | Level::Avx512Vnni
            | Level::Avx512Bf16
            | Level::Amx => {
                cfg!(target_arch = "x86_64")
            }
        }
    }

    /// Whether this CPU runs code compiled for the level.
    pub fn supported(self) -> bool {
        #[cfg(target_arch = "x86_64")]
        {
            use std::arch::is_x86_feature_detected as has;
            let avx2 = || has!("avx2") && has!("fma");
            let avx512 =
                || avx2() && has!("avx512f") && has!("avx512bw") && has!("avx512vl") && has!("avx512dq");
            match self {
                Level::Portable => true,
                Level::Avx2 => avx2(),
                Level::AvxVnni => avx2() && has!("avxvnni"),
                Level::Avx512 => avx512(),
                Level::Avx512Vnni => avx512() && has!("avx512vnni"),
                Level::Avx512Bf16 => avx512() && has!("avx512vnni") && has!("avx512bf16"),
                Level::Amx => avx512() && has!("avx512vnni") && has!("avx512bf16") && amx::usable(),
                Level::Simd128 | Level::RelaxedSimd | Level::Neon | Level::NeonDotprod | Level::NeonI8mm => {
                    false
                }
            }
        }
        #[cfg(target_arch = "aarch64")]
        {
            use std::arch::is_aarch64_feature_detected as has;
            // The i8mm kernel is reached only above the dotprod one, so it asks for both: every
            // core with FEAT_I8MM has FEAT_DotProd, and a lowered level stays a subset.
            match self {
                Level::Portable => true,
                Level::Neon => has!("neon"),
                Level::NeonDotprod => has!("neon") && has!("dotprod"),
                Level::NeonI8mm => has!("neon") && has!("dotprod") && has!("i8mm"),
                _ => false,
            }
        }
        #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
        {
            self == Level::Portable
                || (self == Level::Simd128 && cfg!(all(target_arch = "wasm32", target_feature = "simd128")))
                || (self == Level::RelaxedSimd
                    && cfg!(all(
                        target_arch = "wasm32",
                        target_feature = "simd128",
                        target_feature = "relaxed-simd"
                    )))
        }
    }

    /// The best level this CPU runs.
    pub fn detected() -> Level {
        Level::ALL.into_iter().rev().find(|l| l.supported()).unwrap_or(Level::Portable)
    }

    /// The level `ROFORMER_CPU_LEVEL` names (the detected one when unset), or why it cannot be.
    fn from_env() -> std::result::Result<Level, String> {
        let Ok(wanted) = std::env::var("ROFORMER_CPU_LEVEL") else { return Ok(Level::detected()) };
        let names = Level::ALL.map(Level::name).join(", ");
        let level = Level::ALL
            .into_iter()
            .find(|l| l.name() == wanted.trim())
            .ok_or_else(|| format!("ROFORMER_CPU_LEVEL={wanted}: not a level (choices: {names})"))?;
        if !level.supported() {
            return Err(format!(
                "ROFORMER_CPU_LEVEL={wanted}: this CPU does not run it (its best level is {})",
                Level::detected().name()
            ));
        }
        Ok(level)
    }
}

/// The level the fused engine runs at, read once: `ROFORMER_CPU_LEVEL`, else the best this CPU
/// has. An unusable setting is an error here, which every model load reports.
pub(crate) fn configured_level() -> std::result::Result<Level, String> {
    use std::sync::OnceLock;
    static LEVEL: OnceLock<std::result::Result<Level, String>> = OnceLock::new();
    LEVEL.get_or_init(Level::from_env).clone()
}

/// The level the elementwise kernels run at: the configured one (the detected one when the
/// setting is unusable, which model loads refuse anyway). Only x86 has levels to pick between.
#[cfg(target_arch = "x86_64")]
pub(crate) fn level() -> Level {
    configured_level().unwrap_or_else(|_| Level::detected())
}

/// Defines `$name` three times, compiled for AVX-512, for AVX2 + FMA and portably, and calls the
/// one this CPU runs. The body is plain Rust that the compiler vectorises for each target. On
/// aarch64 the portable copy is the NEON one already (NEON is in the aarch64 baseline), and no
/// elementwise kernel has work for dotprod or i8mm, so one copy serves every aarch64 level.
macro_rules! multiversion {
    ($(#[$meta:meta])* $vis:vis fn $name:ident($($arg:ident: $ty:ty),* $(,)?) $(-> $ret:ty)? $body:block) => {
        $(#[$meta])*
        $vis fn $name($($arg: $ty),*) $(-> $ret)? {
            #[inline(always)]
            fn body($($arg: $ty),*) $(-> $ret)? $body
            #[cfg(target_arch = "x86_64")]
            {
                #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512dq,avx2,fma")]
                unsafe fn avx512($($arg: $ty),*) $(-> $ret)? { body($($arg),*) }
                #[target_feature(enable = "avx2,fma")]
                unsafe fn avx2($($arg: $ty),*) $(-> $ret)? { body($($arg),*) }
                use $crate::runtime::kernels::Level;
                match $crate::runtime::kernels::level() {
                    // SAFETY: the level in force is one this CPU supports (`Level::supported`), and
                    // it has the features each variant is compiled for.
                    Level::Avx512 | Level::Avx512Vnni | Level::Avx512Bf16 | Level::Amx => {
                        return unsafe { avx512($($arg),*) }
                    }
                    Level::Avx2 | Level::AvxVnni => return unsafe { avx2($($arg),*) },
                    _ => {}
                }
            }
            body($($arg),*)
        }
    };
}
pub(crate) use multiversion;

/// The levels a kernel test runs at: every one this CPU supports. Those it cannot run are named
/// in the test's output (`not_run_here`), so a pass on a smaller CPU says what it did not cover.
#[cfg(test)]
pub(crate) fn tested_levels(what: &str) -> Vec<Level> {
    let (run, skip): (Vec<Level>, Vec<Level>) =
        Level::ALL.into_iter().filter(|l| l.of_this_arch()).partition(|l| l.supported());
    let names = |levels: &[Level]| levels.iter().map(|l| l.name()).collect::<Vec<_>>().join(", ");
    println!("{what}: runs at {}", names(&run));
    if !skip.is_empty() {
        not_run_here(&format!("{what} at {} (this CPU cannot run them)", names(&skip)));
    }
    run
}

/// Says what a passing test did not run on this machine, in the output of `cargo test` itself,
/// once however often a test asks. libtest captures the `print!` family and shows it only for a
/// failing test; a write to the stderr handle is not captured, so the line stays in a passing
/// run's output.
#[cfg(test)]
pub(crate) fn not_run_here(what: &str) {
    use std::io::Write;
    static SAID: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());
    let mut said = SAID.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    if !said.iter().any(|s| s == what) {
        said.push(what.to_string());
        let _ = writeln!(std::io::stderr().lock(), "not run here: {what}");
    }
}

/// The largest of `errors`, NaN where any is NaN: `f64::max` passes over a NaN, so that a bound
/// on its result would pass a NaN output.
#[cfg(test)]
pub(crate) fn largest(errors: impl IntoIterator<Item = f64>) -> f64 {
    errors.into_iter().fold(0.0, |most, e| if e.is_nan() || e > most { e } else { most })
}

/// Reproducible values in [-0.5, 0.5) for kernel tests and probes.
pub(crate) fn noise(n: usize, seed: u64) -> Vec<f32> {
    let mut state = seed;
    (0..n)
        .map(|_| {
            state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            (state >> 40) as f32 / (1u64 << 24) as f32 - 0.5
        })
        .collect()
}
