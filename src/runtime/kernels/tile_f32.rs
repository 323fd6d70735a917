//! The f32 microkernels: one `mr × nr` tile of `c` in registers for the whole depth, fed one
//! packed line of `a` (the tile's rows at one step) and one step of a weight panel at a time.
//!
//! | level | tile | registers |
//! | --- | --- | --- |
//! | AVX-512 (and AMX) | 14 × 32 | 28 accumulators, 2 weight vectors, 1 broadcast of 32 zmm |
//! | AVX2 + FMA (and AVX-VNNI) | 6 × 16 | 12 accumulators, 2 weight vectors, 1 broadcast of 16 ymm |
//! | aarch64 NEON (every ARM level) | 8 × 12 | 24 accumulators, 3 weight vectors, 2 vectors of 4 rows' inputs of 32 |
//! | WebAssembly relaxed SIMD | 4 × 8 | 8 accumulators, 2 weight vectors, a broadcast; `f32x4.relaxed_madd` |
//! | WebAssembly SIMD | 4 × 8 | 8 accumulators, 2 weight vectors, a broadcast and a product of V8's 16 xmm on x86-64 |
//! | portable | 4 × 16 | plain arrays the compiler vectorises for the target |
//!
//! Each kernel reads weight panels of f32 or of bf16 ([`Weight`]): bf16 is how levels without
//! bf16 products run bf16 weights, widened to f32 in the registers they are loaded into (a shift
//! by 16 per vector of weights, a few instructions against a step's dozens of multiply-adds), so
//! that bf16 costs no pass over the weights of its own and reads half the bytes.

use super::tile_bf16::{from_bf16, to_bf16};
use super::Level;

/// What a weight panel holds. The kernels ask `BF16` inside their loops, where it is a constant.
pub(crate) trait Weight: Copy + Send + Sync + 'static {
    /// bf16 bits, widened to f32 as they are loaded, rather than f32.
    const BF16: bool;

    /// The kernel of `kernel`'s level that reads panels of this type.
    fn tile(kernel: &F32Kernel) -> unsafe fn(&F32Tile<Self>);

    /// An input as products with these weights see it: itself against f32, rounded to bf16
    /// (to nearest, ties to even) against bf16, as the bf16 kernels round theirs.
    fn input(x: f32) -> f32;

    /// The f32 the weight stands for, exactly.
    fn value(self) -> f32;
}

impl Weight for f32 {
    const BF16: bool = false;

    fn tile(kernel: &F32Kernel) -> unsafe fn(&F32Tile<f32>) {
        kernel.tile
    }

    #[inline(always)]
    fn input(x: f32) -> f32 {
        x
    }

    #[inline(always)]
    fn value(self) -> f32 {
        self
    }
}

impl Weight for u16 {
    const BF16: bool = true;

    fn tile(kernel: &F32Kernel) -> unsafe fn(&F32Tile<u16>) {
        kernel.tile_bf16
    }

    #[inline(always)]
    fn input(x: f32) -> f32 {
        from_bf16(to_bf16(x))
    }

    #[inline(always)]
    fn value(self) -> f32 {
        from_bf16(self)
    }
}

/// The operands of one tile.
pub(crate) struct F32Tile<'a, W = f32> {
    /// Rows of `c` to write, at most the kernel's `mr`.
    pub rows: usize,
    /// The tile's rows at each step: `depth` lines, `a_line` floats apart, of which the kernel
    /// reads its `a_stride` (packed lines, `a_line` = `a_stride`; or, from attention's transposed
    /// weights, lanes of lines one key apart, whose padding past the tile's rows the kernel reads
    /// into accumulators it never stores).
    pub a: &'a [f32],
    pub a_line: usize,
    /// `depth` steps of `nr` weights.
    pub b: &'a [W],
    pub depth: usize,
    /// `nr` values to start from (a bias, or zeros), unless `accumulate` says to start from `c`.
    pub start: &'a [f32],
    pub accumulate: bool,
    /// The tile's first output; rows are `ldc` apart, and `cols` (≤ nr) columns are written.
    pub c: *mut f32,
    pub ldc: usize,
    pub cols: usize,
}

impl<W> F32Tile<'_, W> {
    /// The checks every kernel relies on before it touches memory through pointers.
    fn check(&self, mr: usize, nr: usize, a_stride: usize) {
        assert!(
            (1..=mr).contains(&self.rows)
                && (1..=nr).contains(&self.cols)
                && (self.depth == 0 || self.a.len() >= (self.depth - 1) * self.a_line + a_stride)
                && self.b.len() >= self.depth * nr
                && self.start.len() >= nr,
            "f32 tile: operands do not fit the kernel"
        );
    }

    /// Row `r` of `c`, zero past `cols`: what a kernel without masked loads starts from.
    ///
    /// # Safety
    /// Row r of `c` is valid for `cols` reads.
    unsafe fn padded_row<const N: usize>(&self, r: usize) -> [f32; N] {
        let mut row = [0f32; N];
        // SAFETY: as the caller promises.
        row[..self.cols].copy_from_slice(unsafe {
            std::slice::from_raw_parts(self.c.wrapping_add(r * self.ldc), self.cols)
        });
        row
    }

    /// Writes the first `cols` of `row` to row `r` of `c`: how a kernel without masked stores ends.
    ///
    /// # Safety
    /// Row r of `c` is valid for `cols` writes, and no one else touches them during the call.
    unsafe fn write_row(&self, r: usize, row: &[f32]) {
        // SAFETY: as the caller promises.
        unsafe { std::slice::from_raw_parts_mut(self.c.wrapping_add(r * self.ldc), self.cols) }
            .copy_from_slice(&row[..self.cols]);
    }
}

/// One instruction set's f32 microkernel and its tile shape.
#[derive(Debug)]
pub(crate) struct F32Kernel {
    pub mr: usize,
    pub nr: usize,
    /// Floats per packed line of `a` (mr rounded up to whole lines or vectors).
    pub a_stride: usize,
    /// Computes one tile.
    ///
    /// # Safety
    /// The CPU runs the kernel's instruction set, and `c` is valid for the tile's writes.
    pub tile: unsafe fn(&F32Tile),
    /// The same kernel on bf16 weights; the same safety contract.
    pub tile_bf16: unsafe fn(&F32Tile<u16>),
}

impl<W> std::fmt::Debug for F32Tile<'_, W> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "F32Tile({} × {}, depth {})", self.rows, self.cols, self.depth)
    }
}

static PORTABLE: F32Kernel =
    F32Kernel { mr: 4, nr: 16, a_stride: 4, tile: portable::tile, tile_bf16: portable::tile };
#[cfg(target_arch = "x86_64")]
static AVX2: F32Kernel = F32Kernel { mr: 6, nr: 16, a_stride: 8, tile: avx2::tile, tile_bf16: avx2::tile };
#[cfg(target_arch = "x86_64")]
static AVX512: F32Kernel =
    F32Kernel { mr: 14, nr: 32, a_stride: 16, tile: avx512::tile, tile_bf16: avx512::tile };
#[cfg(target_arch = "aarch64")]
static NEON: F32Kernel =
    F32Kernel { mr: neon::MR, nr: neon::NR, a_stride: neon::MR, tile: neon::tile, tile_bf16: neon::tile };
#[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
static SIMD128: F32Kernel = F32Kernel {
    mr: simd128::MR,
    nr: simd128::NR,
    a_stride: simd128::MR,
    tile: simd128::tile,
    tile_bf16: simd128::tile,
};
#[cfg(all(target_arch = "wasm32", target_feature = "relaxed-simd"))]
static RELAXED_SIMD: F32Kernel = F32Kernel {
    mr: simd128::relaxed::MR,
    nr: simd128::NR,
    a_stride: simd128::relaxed::MR,
    tile: simd128::relaxed::tile,
    tile_bf16: simd128::relaxed::tile,
};

impl F32Kernel {
    pub fn for_level(level: Level) -> &'static F32Kernel {
        #[cfg(target_arch = "x86_64")]
        match level {
            Level::Avx512 | Level::Avx512Vnni | Level::Avx512Bf16 | Level::Amx => return &AVX512,
            Level::Avx2 | Level::AvxVnni => return &AVX2,
            _ => {}
        }
        #[cfg(target_arch = "aarch64")]
        if matches!(level, Level::Neon | Level::NeonDotprod | Level::NeonI8mm) {
            return &NEON;
        }
        #[cfg(all(target_arch = "wasm32", target_feature = "relaxed-simd"))]
        if level == Level::RelaxedSimd {
            return &RELAXED_SIMD;
        }
        #[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
        if level == Level::Simd128 {
            return &SIMD128;
        }
        let _ = level;
        &PORTABLE
    }
}

/// Weight steps to prefetch ahead of use: short tiles stream the weights faster than memory
/// delivers them.
#[cfg(target_arch = "x86_64")]
const PREFETCH: usize = 24;

#[cfg(target_arch = "x86_64")]
mod avx512 {
    use std::arch::x86_64::*;

    use super::{F32Tile, Weight, PREFETCH};

    const NR: usize = 32;
    const STRIDE: usize = 16;

    /// # Safety
    /// The CPU has AVX-512F, and `t.c` is valid for the tile's writes.
    pub(super) unsafe fn tile<W: Weight>(t: &F32Tile<W>) {
        t.check(14, NR, STRIDE);
        // SAFETY: the operands were checked above; the caller vouches for the CPU and `c`.
        unsafe { by_rows!(rows<_>, t, 1 2 3 4 5 6 7 8 9 10 11 12 13 14) }
    }

    /// 16 weights from `p`, as f32.
    ///
    /// # Safety
    /// `p` is valid for 16 reads.
    #[target_feature(enable = "avx512f")]
    #[inline]
    unsafe fn weights<W: Weight>(p: *const W) -> __m512 {
        // SAFETY: as the caller promises.
        unsafe {
            if W::BF16 {
                let bits = _mm512_cvtepu16_epi32(_mm256_loadu_si256(p.cast()));
                _mm512_castsi512_ps(_mm512_slli_epi32::<16>(bits))
            } else {
                _mm512_loadu_ps(p.cast())
            }
        }
    }

    #[target_feature(enable = "avx512f")]
    unsafe fn rows<const R: usize, W: Weight>(t: &F32Tile<W>) {
        let (a, b, c, ldc) = (t.a.as_ptr(), t.b.as_ptr(), t.c, t.ldc);
        let mask_lo: __mmask16 = if t.cols >= 16 { 0xFFFF } else { ((1u32 << t.cols) - 1) as u16 };
        let mask_hi: __mmask16 = if t.cols <= 16 { 0 } else { ((1u32 << (t.cols - 16)) - 1) as u16 };
        // SAFETY (every access below): `start` holds 32 floats and `a`, `b` `depth` steps (checked
        // by `tile`); `c` rows are valid for `cols` floats, and masked lanes past them are neither
        // read nor written (AVX-512 masked accesses do not fault there).
        let mut lo = [unsafe { _mm512_loadu_ps(t.start.as_ptr()) }; R];
        let mut hi = [unsafe { _mm512_loadu_ps(t.start.as_ptr().add(16)) }; R];
        if t.accumulate {
            for r in 0..R {
                let row = c.wrapping_add(r * ldc);
                lo[r] = unsafe { _mm512_maskz_loadu_ps(mask_lo, row) };
                hi[r] = unsafe { _mm512_maskz_loadu_ps(mask_hi, row.wrapping_add(16)) };
            }
        }
        for kk in 0..t.depth {
            // A prefetch past the end of the panel is harmless; `wrapping_add` keeps the address
            // arithmetic defined there.
            let ahead = b.wrapping_add((kk + PREFETCH) * NR);
            _mm_prefetch::<_MM_HINT_T0>(ahead.cast());
            _mm_prefetch::<_MM_HINT_T0>(ahead.wrapping_add(16).cast());
            let (b0, b1) = unsafe { (weights(b.add(kk * NR)), weights(b.add(kk * NR + 16))) };
            let line = unsafe { a.add(kk * t.a_line) };
            for r in 0..R {
                let x = _mm512_set1_ps(unsafe { *line.add(r) });
                lo[r] = _mm512_fmadd_ps(x, b0, lo[r]);
                hi[r] = _mm512_fmadd_ps(x, b1, hi[r]);
            }
        }
        for r in 0..R {
            let row = c.wrapping_add(r * ldc);
            unsafe {
                _mm512_mask_storeu_ps(row, mask_lo, lo[r]);
                _mm512_mask_storeu_ps(row.wrapping_add(16), mask_hi, hi[r]);
            }
        }
    }
}

#[cfg(target_arch = "x86_64")]
mod avx2 {
    use std::arch::x86_64::*;

    use super::{F32Tile, Weight, PREFETCH};

    const NR: usize = 16;
    const STRIDE: usize = 8;

    /// # Safety
    /// The CPU has AVX2 and FMA, and `t.c` is valid for the tile's writes.
    pub(super) unsafe fn tile<W: Weight>(t: &F32Tile<W>) {
        t.check(6, NR, STRIDE);
        // SAFETY: the operands were checked above; the caller vouches for the CPU and `c`.
        unsafe { by_rows!(rows<_>, t, 1 2 3 4 5 6) }
    }

    /// Lane masks for the first `cols` of 16 columns, as two halves.
    #[target_feature(enable = "avx2")]
    fn masks(cols: usize) -> (__m256i, __m256i) {
        let cols = _mm256_set1_epi32(cols as i32);
        let lanes = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
        let lo = _mm256_cmpgt_epi32(cols, lanes);
        let hi = _mm256_cmpgt_epi32(cols, _mm256_add_epi32(lanes, _mm256_set1_epi32(8)));
        (lo, hi)
    }

    /// 8 weights from `p`, as f32.
    ///
    /// # Safety
    /// `p` is valid for 8 reads.
    #[target_feature(enable = "avx2")]
    #[inline]
    unsafe fn weights<W: Weight>(p: *const W) -> __m256 {
        // SAFETY: as the caller promises.
        unsafe {
            if W::BF16 {
                let bits = _mm256_cvtepu16_epi32(_mm_loadu_si128(p.cast()));
                _mm256_castsi256_ps(_mm256_slli_epi32::<16>(bits))
            } else {
                _mm256_loadu_ps(p.cast())
            }
        }
    }

    #[target_feature(enable = "avx2,fma")]
    unsafe fn rows<const R: usize, W: Weight>(t: &F32Tile<W>) {
        let (a, b, c, ldc) = (t.a.as_ptr(), t.b.as_ptr(), t.c, t.ldc);
        let (mask_lo, mask_hi) = masks(t.cols);
        // SAFETY (every access below): `start` holds 16 floats and `a`, `b` `depth` steps (checked
        // by `tile`); `c` rows are valid for `cols` floats, and lanes masked off past them are
        // neither read nor written (`vmaskmov` does not fault there).
        let mut lo = [unsafe { _mm256_loadu_ps(t.start.as_ptr()) }; R];
        let mut hi = [unsafe { _mm256_loadu_ps(t.start.as_ptr().add(8)) }; R];
        if t.accumulate {
            for r in 0..R {
                let row = c.wrapping_add(r * ldc);
                lo[r] = unsafe { _mm256_maskload_ps(row, mask_lo) };
                hi[r] = unsafe { _mm256_maskload_ps(row.wrapping_add(8), mask_hi) };
            }
        }
        for kk in 0..t.depth {
            // A prefetch past the end of the panel is harmless; `wrapping_add` keeps the address
            // arithmetic defined there.
            _mm_prefetch::<_MM_HINT_T0>(b.wrapping_add((kk + PREFETCH) * NR).cast());
            let (b0, b1) = unsafe { (weights(b.add(kk * NR)), weights(b.add(kk * NR + 8))) };
            let line = unsafe { a.add(kk * t.a_line) };
            for r in 0..R {
                let x = _mm256_set1_ps(unsafe { *line.add(r) });
                lo[r] = _mm256_fmadd_ps(x, b0, lo[r]);
                hi[r] = _mm256_fmadd_ps(x, b1, hi[r]);
            }
        }
        for r in 0..R {
            let row = c.wrapping_add(r * ldc);
            unsafe {
                _mm256_maskstore_ps(row, mask_lo, lo[r]);
                _mm256_maskstore_ps(row.wrapping_add(8), mask_hi, hi[r]);
            }
        }
    }
}

#[cfg(target_arch = "aarch64")]
mod neon {
    use std::arch::aarch64::*;

    use super::{F32Tile, Weight};

    // 8 rows × 3 vectors hold 24 of the 32 registers; the step's 3 weight vectors and the 2
    // vectors of 8 rows' inputs take 5 more, and each input lane feeds `fmla` by element, so no
    // register is spent on a broadcast. 24 independent sums cover the 4-cycle latency of 4
    // FMA pipes (16 needed) on Apple's and Neoverse V1's cores.
    pub(super) const MR: usize = 8;
    pub(super) const NR: usize = 12;

    /// # Safety
    /// `t.c` is valid for the tile's writes (NEON is in every aarch64 CPU).
    pub(super) unsafe fn tile<W: Weight>(t: &F32Tile<W>) {
        t.check(MR, NR, MR);
        // SAFETY: the operands were checked above; the caller vouches for `c`.
        unsafe { by_rows!(rows<_>, t, 1 2 3 4 5 6 7 8) }
    }

    /// `acc + w · line[L]` for the row whose input is lane L of `line`.
    #[inline(always)]
    fn fma_lane(acc: float32x4_t, w: float32x4_t, line: [float32x4_t; 2], r: usize) -> float32x4_t {
        // SAFETY: NEON is in every aarch64 CPU; `r` is a literal after unrolling (r < MR).
        unsafe {
            let v = line[r / 4];
            match r % 4 {
                0 => vfmaq_laneq_f32::<0>(acc, w, v),
                1 => vfmaq_laneq_f32::<1>(acc, w, v),
                2 => vfmaq_laneq_f32::<2>(acc, w, v),
                _ => vfmaq_laneq_f32::<3>(acc, w, v),
            }
        }
    }

    /// 4 weights from `p`, as f32 (bf16 through `shll` by 16, one instruction).
    ///
    /// # Safety
    /// `p` is valid for 4 reads.
    #[inline(always)]
    unsafe fn weights<W: Weight>(p: *const W) -> float32x4_t {
        // SAFETY: as the caller promises; NEON loads take any alignment.
        unsafe {
            if W::BF16 {
                vreinterpretq_f32_u32(vshll_n_u16::<16>(vld1_u16(p.cast())))
            } else {
                vld1q_f32(p.cast())
            }
        }
    }

    unsafe fn rows<const R: usize, W: Weight>(t: &F32Tile<W>) {
        let (a, b) = (t.a.as_ptr(), t.b.as_ptr());
        // SAFETY (every access below): `start` holds NR floats and `a`, `b` `depth` steps of MR
        // and NR values (checked by `tile`); NEON loads and stores take any alignment.
        let start: [float32x4_t; 3] =
            std::array::from_fn(|w| unsafe { vld1q_f32(t.start.as_ptr().add(4 * w)) });
        let mut acc = [start; R];
        if t.accumulate {
            for (r, acc) in acc.iter_mut().enumerate() {
                // SAFETY: row r of `c` holds `cols` floats, as the caller promises.
                let row: [f32; NR] = unsafe { t.padded_row(r) };
                *acc = std::array::from_fn(|w| unsafe { vld1q_f32(row.as_ptr().add(4 * w)) });
            }
        }
        for kk in 0..t.depth {
            let weights: [float32x4_t; 3] =
                std::array::from_fn(|w| unsafe { weights(b.add(kk * NR + 4 * w)) });
            let line: [float32x4_t; 2] =
                std::array::from_fn(|h| unsafe { vld1q_f32(a.add(kk * t.a_line + 4 * h)) });
            for (r, acc) in acc.iter_mut().enumerate() {
                for (acc, &w) in acc.iter_mut().zip(&weights) {
                    *acc = fma_lane(*acc, w, line, r);
                }
            }
        }
        for (r, acc) in acc.iter().enumerate() {
            let row = t.c.wrapping_add(r * t.ldc);
            // SAFETY: row r of `c` is valid for `cols` writes (the caller); `out` holds NR floats.
            unsafe {
                if t.cols == NR {
                    for (w, &v) in acc.iter().enumerate() {
                        vst1q_f32(row.add(4 * w), v);
                    }
                } else {
                    let mut out = [0f32; NR];
                    for (w, &v) in acc.iter().enumerate() {
                        vst1q_f32(out.as_mut_ptr().add(4 * w), v);
                    }
                    t.write_row(r, &out);
                }
            }
        }
    }
}

#[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
mod simd128 {
    use std::arch::wasm32::*;

    use super::{F32Tile, Weight};

    // simd128 has no multiply-add, so each product needs a register of its own: 5 × 8 and 6 × 8
    // spilled in V8 and ran 35–50% slower on a base-size model; 3 × 12 ran as 4 × 8.
    pub(super) const MR: usize = 4;
    pub(super) const NR: usize = 8;
    /// Vectors of 4 floats per row of the tile.
    const W: usize = NR / 4;

    /// # Safety
    /// `t.c` is valid for the tile's writes (the module is built with simd128, so the engine
    /// runs it).
    pub(super) unsafe fn tile<W: Weight>(t: &F32Tile<W>) {
        t.check(MR, NR, MR);
        // SAFETY: the operands were checked above; the caller vouches for `c`.
        unsafe { by_rows!(rows<_>, t, 1 2 3 4) }
    }

    unsafe fn rows<const R: usize, W: Weight>(t: &F32Tile<W>) {
        // SAFETY: as `tile_rows` requires, checked by `tile`.
        unsafe { tile_rows::<R, W>(t, |acc, x, w| f32x4_add(acc, f32x4_mul(x, w))) }
    }

    /// The kernel with `f32x4.relaxed_madd`: fused where the CPU has FMA (x86-64 with FMA3,
    /// ARM), a multiply and an add elsewhere, as the instruction allows. The tile stays 4 × 8: a
    /// fifth row fits V8's registers on paper, yet 5 × 8 ran the small model at 0.62× the
    /// plain module's speed in Chromium 156 on Zen 3, and 4 × 8 at 1.13×.
    #[cfg(target_feature = "relaxed-simd")]
    pub(super) mod relaxed {
        use std::arch::wasm32::*;

        pub(in super::super) use super::MR;
        use super::{tile_rows, F32Tile, Weight, NR};

        /// # Safety
        /// `t.c` is valid for the tile's writes (the module is built with relaxed-simd, so the
        /// engine runs it).
        pub(in super::super) unsafe fn tile<W: Weight>(t: &F32Tile<W>) {
            t.check(MR, NR, MR);
            // SAFETY: the operands were checked above; the caller vouches for `c`.
            unsafe { by_rows!(rows<_>, t, 1 2 3 4) }
        }

        unsafe fn rows<const R: usize, W: Weight>(t: &F32Tile<W>) {
            // SAFETY: as `tile_rows` requires, checked by `tile`.
            unsafe { tile_rows::<R, W>(t, |acc, x, w| f32x4_relaxed_madd(x, w, acc)) }
        }
    }

    /// `R` rows of a tile, each product added by `madd`.
    ///
    /// # Safety
    /// `t` was checked against (`MR`, `NR`, `MR`) and `R` ≤ its rows; `t.c` is valid for the
    /// tile's writes.
    #[inline(always)]
    unsafe fn tile_rows<const R: usize, W: Weight>(t: &F32Tile<W>, madd: impl Fn(v128, v128, v128) -> v128) {
        let (a, b) = (t.a.as_ptr(), t.b.as_ptr());
        // Weights as f32: bf16 zero-extended to 32 bits and shifted into the high half.
        let weights = |p: *const W| {
            // SAFETY: `p` is inside the panel, as below; v128 loads take any alignment.
            unsafe {
                if W::BF16 {
                    u32x4_shl(u32x4_load_extend_u16x4(p.cast()), 16)
                } else {
                    v128_load(p.cast())
                }
            }
        };
        // SAFETY (every access below): `start` holds NR floats and `a`, `b` `depth` steps of MR
        // and NR values (checked by the caller); v128 loads and stores take any alignment.
        let start: [v128; W] =
            std::array::from_fn(|w| unsafe { v128_load(t.start.as_ptr().add(4 * w).cast()) });
        let mut acc = [start; R];
        if t.accumulate {
            for (r, acc) in acc.iter_mut().enumerate() {
                // SAFETY: row r of `c` holds `cols` floats, as the caller promises.
                let row: [f32; NR] = unsafe { t.padded_row(r) };
                *acc = std::array::from_fn(|w| unsafe { v128_load(row.as_ptr().add(4 * w).cast()) });
            }
        }
        for kk in 0..t.depth {
            let weights: [v128; W] = std::array::from_fn(|w| weights(unsafe { b.add(kk * NR + 4 * w) }));
            let line = unsafe { a.add(kk * t.a_line) };
            for (r, acc) in acc.iter_mut().enumerate() {
                let x = unsafe { v128_load32_splat(line.add(r).cast()) };
                for (acc, &w) in acc.iter_mut().zip(&weights) {
                    *acc = madd(*acc, x, w);
                }
            }
        }
        for (r, acc) in acc.iter().enumerate() {
            let mut out = [0f32; NR];
            // SAFETY: `out` holds NR floats; row r of `c` is valid for `cols` writes (the caller).
            unsafe {
                for (w, &v) in acc.iter().enumerate() {
                    v128_store(out.as_mut_ptr().add(4 * w).cast(), v);
                }
                t.write_row(r, &out);
            }
        }
    }
}

mod portable {
    use super::{F32Tile, Weight};

    const MR: usize = 4;
    const NR: usize = 16;

    /// # Safety
    /// `t.c` is valid for the tile's writes.
    pub(super) unsafe fn tile<W: Weight>(t: &F32Tile<W>) {
        t.check(MR, NR, MR);
        let mut acc = [[0f32; NR]; MR];
        for (r, row) in acc.iter_mut().enumerate().take(t.rows) {
            if t.accumulate {
                // SAFETY: row r of `c` holds `cols` floats, as the caller promises.
                *row = unsafe { t.padded_row(r) };
            } else {
                row.copy_from_slice(&t.start[..NR]);
            }
        }
        for (kk, step) in t.b.chunks_exact(NR).take(t.depth).enumerate() {
            let line = &t.a[kk * t.a_line..][..MR];
            for (row, &x) in acc.iter_mut().zip(line) {
                for (o, &w) in row.iter_mut().zip(step) {
                    *o += x * w.value();
                }
            }
        }
        for (r, row) in acc.iter().enumerate().take(t.rows) {
            // SAFETY: as above, and no one else touches these floats during the call.
            unsafe { t.write_row(r, row) };
        }
    }
}
