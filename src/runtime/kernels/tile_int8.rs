//! The int8 microkernels. Weights are s8 per output channel (symmetric), inputs u8 per row with a
//! zero point (asymmetric); a tile sums u8 × s8 products over groups of 4 consecutive k in i32,
//! then scales back to f32 with the bias: `c = (acc − zp · Σw) · s_row · s_col + bias`.
//!
//! | level | tile | product of 4 u8 × 4 s8 into i32 |
//! | --- | --- | --- |
//! | AMX (products of enough rows; others as AVX-512 VNNI) | 32 × 32 | `tdpbusd` (16 × 64 by 64 × 16 per instruction; `amx`) |
//! | AVX-512 VNNI | 14 × 32 | `vpdpbusd` (512-bit) |
//! | AVX-VNNI | 6 × 16 | `vpdpbusd` (256-bit) |
//! | AVX2 (and AVX-512 without VNNI) | 5 × 16 | `vpmaddubsw` then `vpmaddwd` by ones |
//! | aarch64 i8mm | 8 × 8 | `usmmla` (u8 × s8, 2 × 8 by 8 × 2 per instruction) |
//! | aarch64 dotprod | 8 × 12 | `sdot` by element (s8 × s8: inputs moved to s8 by x − 128) |
//! | WebAssembly relaxed SIMD | 4 × 8 | `i32x4.relaxed_dot_i8x16_i7x16_add` (s8 × u7: inputs as x − 128, weights as w + 64) |
//! | WebAssembly SIMD | 5 × 4 | `i32x4.dot_i16x8_s` on u8 and s8 widened to i16 |
//! | portable | 4 × 16 | widened products the compiler vectorises |
//!
//! `vpmaddubsw` adds two u8 × s8 products in saturating i16: with weights up to ±127 a pair can
//! reach 64,770 and clip. Its kernel takes weights up to ±63 (a pair stays within 32,130), as ONNX
//! Runtime's `reduce_range` does on such CPUs. Relaxed SIMD's dot product is exact on every
//! engine only while its second operand's top bit is clear, so its kernel also takes ±63 (moved
//! to 1..=127 by + 64). The others take ±127.

use super::layout::{row_dwords, Input};
use super::math::{lane_max, lane_min, round_small};
use super::Level;

/// The operands of one tile.
pub(crate) struct I8Tile<'a> {
    pub rows: usize,
    pub cols: usize,
    /// Steps of 4 k.
    pub steps: usize,
    /// Each row's 4 u8 at each step, as the kernel's `input` holds them.
    pub a: &'a [u32],
    /// `steps` steps of `nr` columns × 4 s8, laid out as the kernel's `layout` says.
    pub b: &'a [i8],
    /// Per row (`mr`): the scale back to f32, the zero point, and the sum of its u8 inputs.
    pub row_scales: &'a [f32],
    pub zero_points: &'a [i32],
    pub row_sums: &'a [i32],
    /// Per column (`nr`): the scale back to f32, the sum of the quantized weights, the bias.
    pub col_scales: &'a [f32],
    pub col_sums: &'a [i32],
    pub bias: &'a [f32],
    /// The tile's first output; rows are `ldc` apart, and `cols` (≤ nr) columns are written.
    pub c: *mut f32,
    pub ldc: usize,
}

impl I8Tile<'_> {
    /// The AMX tile program's view of the operands: 32 rows of u8 inputs in [`Input::Rows`], one
    /// 32-column panel of the AVX-512 VNNI layout.
    #[cfg(any(test, target_arch = "x86_64"))]
    pub(super) fn operands(&self) -> super::amx::Operands<'_> {
        use super::amx::as_bytes;
        super::amx::Operands { a: as_bytes(self.a), b: as_bytes(self.b), steps: self.steps, rows: self.rows }
    }

    /// The checks a kernel on [`Input::Lines`] relies on before it touches memory through pointers.
    fn check(&self, mr: usize, nr: usize, a_stride: usize) {
        self.check_input(mr, nr, Input::Lines.tile_dwords(self.steps, mr, a_stride))
    }

    /// [`I8Tile::check`] for a tile whose input takes `a_dwords`.
    pub(super) fn check_input(&self, mr: usize, nr: usize, a_dwords: usize) {
        assert!(
            (1..=mr).contains(&self.rows)
                && (1..=nr).contains(&self.cols)
                && self.a.len() >= a_dwords
                && self.b.len() >= self.steps * nr * 4
                && self.row_scales.len() >= self.rows
                && self.zero_points.len() >= self.rows
                && self.row_sums.len() >= self.rows
                && self.col_scales.len() >= nr
                && self.col_sums.len() >= nr
                && self.bias.len() >= nr,
            "int8 tile: operands do not fit the kernel"
        );
    }

    /// Writes row `r`'s `cols` results from its i32 sums.
    ///
    /// # Safety
    /// Row r of `c` is valid for `cols` writes.
    #[inline(always)]
    pub(super) unsafe fn store(&self, r: usize, sums: &[i32]) {
        // SAFETY: as the caller promises.
        let c = unsafe { std::slice::from_raw_parts_mut(self.c.wrapping_add(r * self.ldc), self.cols) };
        let (zp, s) = (self.zero_points[r], self.row_scales[r]);
        for (j, out) in c.iter_mut().enumerate() {
            let exact = sums[j] - zp * self.col_sums[j];
            *out = exact as f32 * (s * self.col_scales[j]) + self.bias[j];
        }
    }
}

/// How a packed weight panel holds its columns' k's, and the packed input its rows' k's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum StepLayout {
    /// Steps of 4 k, column by column, each column's 4 k's together: the operand of `vpdpbusd`,
    /// `vpmaddubsw` and `sdot` (not the portable kernel's).
    #[cfg_attr(
        not(any(target_arch = "x86_64", target_arch = "wasm32", target_arch = "aarch64")),
        allow(dead_code)
    )]
    Quads,
    /// Steps of 4 k, k by k, each k's `nr` columns together: the operand of widening multiplies
    /// along columns.
    ByK,
    /// Steps of 8 k, pairs of columns, each column's 8 k's together: the 8 × 2 operand of
    /// `usmmla`. The input's lines come in pairs (k = 8·s.. and 8·s + 4..) with each row's 8
    /// bytes together, so that one vector holds the other 2 × 8 operand, two rows of 8 k.
    #[cfg_attr(not(target_arch = "aarch64"), allow(dead_code))]
    Pairs,
}

impl StepLayout {
    /// The k's a step of the packed weight holds; k is padded to a multiple of it.
    pub fn depth(self) -> usize {
        match self {
            StepLayout::Pairs => 8,
            StepLayout::Quads | StepLayout::ByK => 4,
        }
    }

    /// The offset in a panel of `nr` columns of column `j` at depth `kk`.
    pub fn offset(self, nr: usize, j: usize, kk: usize) -> usize {
        let (step, q) = (kk / 4, kk % 4);
        match self {
            StepLayout::Quads => step * nr * 4 + j * 4 + q,
            StepLayout::ByK => step * nr * 4 + q * nr + j,
            StepLayout::Pairs => (kk / 8) * nr * 8 + (j / 2) * 16 + (j % 2) * 8 + kk % 8,
        }
    }

    /// Where row `r`'s 4 bytes for k = 4·step.. sit among a tile's packed input dwords, lines
    /// of `a_stride` dwords.
    pub fn input_index(self, a_stride: usize, step: usize, r: usize) -> usize {
        match self {
            StepLayout::Pairs => (step / 2) * 2 * a_stride + 2 * r + step % 2,
            StepLayout::Quads | StepLayout::ByK => step * a_stride + r,
        }
    }
}

/// One instruction set's int8 microkernel and its tile shape.
#[derive(Debug)]
pub(crate) struct I8Kernel {
    pub mr: usize,
    pub nr: usize,
    /// Dwords per packed line of `a` ([`Input::Lines`]).
    pub a_stride: usize,
    /// The largest weight magnitude the kernel takes.
    pub weight_max: f32,
    /// How the packed weight and input hold their k's.
    pub layout: StepLayout,
    /// Whether the packed inputs hold x − 128 as s8 (the top bit of each u8 flipped).
    pub signed_inputs: bool,
    /// How a tile's packed input holds its rows.
    pub input: Input,
    /// Computes one tile.
    ///
    /// # Safety
    /// The CPU runs the kernel's instruction set, and `c` is valid for the tile's writes.
    pub tile: unsafe fn(&I8Tile),
}

static PORTABLE: I8Kernel = I8Kernel {
    mr: 4,
    nr: 16,
    a_stride: 4,
    weight_max: 127.0,
    layout: StepLayout::ByK,
    signed_inputs: false,
    input: Input::Lines,
    tile: portable::tile,
};
#[cfg(target_arch = "x86_64")]
static AVX2: I8Kernel = I8Kernel {
    mr: 5,
    nr: 16,
    a_stride: 8,
    weight_max: 63.0,
    layout: StepLayout::Quads,
    signed_inputs: false,
    input: Input::Lines,
    tile: avx2::tile::<false>,
};
#[cfg(target_arch = "x86_64")]
static AVX_VNNI: I8Kernel = I8Kernel {
    mr: 6,
    nr: 16,
    a_stride: 8,
    weight_max: 127.0,
    layout: StepLayout::Quads,
    signed_inputs: false,
    input: Input::Lines,
    tile: avx2::tile::<true>,
};
#[cfg(target_arch = "x86_64")]
static AVX512_VNNI: I8Kernel = I8Kernel {
    mr: 14,
    nr: 32,
    a_stride: 0,
    weight_max: 127.0,
    layout: StepLayout::Quads,
    signed_inputs: false,
    input: Input::Rows,
    tile: avx512_vnni::tile,
};

/// The AMX tile program on the unit.
#[cfg(target_arch = "x86_64")]
static AMX: I8Kernel = I8Kernel::tile_program(amx_tile);

/// The fewest rows for which the AMX program beats the AVX-512 VNNI kernel, measured with
/// `cargo bench --bench kernels -- gemm` (docs/log/2026-11-amx-bf16.md): below, a product stays in registers.
#[cfg(target_arch = "x86_64")]
pub(crate) const AMX_MIN_ROWS: usize = 16;

#[cfg(target_arch = "aarch64")]
static NEON_DOTPROD: I8Kernel = I8Kernel {
    mr: 8,
    nr: 12,
    a_stride: 8,
    weight_max: 127.0,
    layout: StepLayout::Quads,
    signed_inputs: false,
    input: Input::Lines,
    tile: neon_dotprod::tile,
};
#[cfg(target_arch = "aarch64")]
static NEON_I8MM: I8Kernel = I8Kernel {
    mr: 8,
    nr: 8,
    a_stride: 8,
    weight_max: 127.0,
    layout: StepLayout::Pairs,
    signed_inputs: false,
    input: Input::Lines,
    tile: neon_i8mm::tile,
};

#[cfg(all(target_arch = "wasm32", target_feature = "relaxed-simd"))]
static RELAXED_SIMD: I8Kernel = I8Kernel {
    mr: relaxed_simd::MR,
    nr: relaxed_simd::NR,
    a_stride: relaxed_simd::MR,
    weight_max: 63.0,
    layout: StepLayout::Quads,
    signed_inputs: true,
    input: Input::Lines,
    tile: relaxed_simd::tile,
};
#[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
static SIMD128: I8Kernel = I8Kernel {
    mr: 5,
    nr: 4,
    a_stride: 5,
    weight_max: 127.0,
    layout: StepLayout::Quads,
    signed_inputs: false,
    input: Input::Lines,
    tile: simd128::tile,
};

impl I8Kernel {
    /// The AMX tile program's shape around `tile` (the unit's, or the tests' model of it): 32 ×
    /// 32, inputs in tile rows, reading the AVX-512 VNNI kernel's packed weights (32-column
    /// panels, steps of 4 k by column), so that one packed copy serves both.
    #[cfg_attr(not(any(test, target_arch = "x86_64")), allow(dead_code))]
    pub(crate) const fn tile_program(tile: unsafe fn(&I8Tile)) -> I8Kernel {
        I8Kernel {
            mr: 32,
            nr: 32,
            a_stride: 0,
            weight_max: 127.0,
            layout: StepLayout::Quads,
            signed_inputs: false,
            input: Input::Rows,
            tile,
        }
    }

    /// Steps of 4 k that a panel of depth `k` takes: `k` padded to the layout's depth.
    pub fn steps(&self, k: usize) -> usize {
        k.div_ceil(self.layout.depth()) * self.layout.depth() / 4
    }

    /// The kernel that packs a level's weights, and computes its products (at `amx`, those too
    /// small for [`I8Kernel::tiles_for_level`]).
    pub fn for_level(level: Level) -> &'static I8Kernel {
        #[cfg(target_arch = "x86_64")]
        match level {
            Level::Avx512Vnni | Level::Avx512Bf16 | Level::Amx => return &AVX512_VNNI,
            Level::AvxVnni => return &AVX_VNNI,
            Level::Avx2 | Level::Avx512 => return &AVX2,
            _ => {}
        }
        // Plain NEON keeps the portable kernel, whose widening multiplies compile to NEON's
        // `smull`/`smlal` along columns.
        #[cfg(target_arch = "aarch64")]
        match level {
            Level::NeonI8mm => return &NEON_I8MM,
            Level::NeonDotprod => return &NEON_DOTPROD,
            _ => {}
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

    /// The tile program that computes a level's products of many rows on the weights
    /// [`I8Kernel::for_level`] packed, with the fewest rows it pays from: AMX at `amx`.
    pub fn tiles_for_level(level: Level) -> Option<(&'static I8Kernel, usize)> {
        #[cfg(target_arch = "x86_64")]
        if level == Level::Amx {
            return Some((&AMX, AMX_MIN_ROWS));
        }
        let _ = level;
        None
    }
}

/// The scale and zero point of a row whose values lie in [lo, hi] (lo ≤ 0 ≤ hi).
fn scale_and_zero_point(lo: f32, hi: f32) -> (f32, f32) {
    let scale = if hi > lo { (hi - lo) / 255.0 } else { 1.0 };
    (scale, (-lo / scale).round_ties_even().clamp(0.0, 255.0))
}

super::multiversion! {
    #[allow(clippy::too_many_arguments)]
    /// Quantizes `rows` rows of `a` (row stride `k`) to u8 with a scale and zero point per row,
    /// and lays them out for `kernel`'s `input`: in lines, `dst[layout.input_index(a_stride,
    /// step, r)]` holds row r's bytes for k = 4·step..4·step + 4 (as x − 128 where the kernel
    /// takes `signed_inputs`); in rows, `dst[r · row_dwords(steps) + step]` does.
    /// `sums` gets each row's sum of its u8 values. The range always includes 0, so zero stays
    /// exact.
    pub(crate) fn quantize_rows(a: &[f32], k: usize, rows: usize, kernel: &I8Kernel, dst: &mut [u32], scales: &mut [f32], zero_points: &mut [i32], sums: &mut [i32]) {
        let (a_stride, layout) = (kernel.a_stride, kernel.layout);
        let row_dwords = row_dwords(k.div_ceil(4));
        let flip = if kernel.signed_inputs { 0x8080_8080 } else { 0 };
        let mut bytes = vec![0u8; k.div_ceil(4) * 4];
        for r in 0..rows {
            let row = &a[r * k..r * k + k];
            let (lo, hi) = (lane_min(row, 0.0), lane_max(row, 0.0));
            let (scale, zero_point) = scale_and_zero_point(lo, hi);
            let inverse = 1.0 / scale;
            scales[r] = scale;
            zero_points[r] = zero_point as i32;
            for (byte, &v) in bytes.iter_mut().zip(row) {
                // `round_ties_even` here was a libm call per value, a fifth of an int8 layer's time.
                *byte = round_small((v * inverse + zero_point).clamp(0.0, 255.0)) as u8;
            }
            sums[r] = bytes.iter().map(|&b| i32::from(b)).sum();
            // Bytes past k multiply zero weights: whatever they hold.
            let quads = bytes.chunks_exact(4).map(|quad| u32::from_le_bytes([quad[0], quad[1], quad[2], quad[3]]) ^ flip);
            match kernel.input {
                Input::Lines => quads.enumerate().for_each(|(step, quad)| dst[layout.input_index(a_stride, step, r)] = quad),
                // A whole row at once: a copy the compiler makes one.
                Input::Rows => dst[r * row_dwords..].iter_mut().zip(quads).for_each(|(d, quad)| *d = quad),
            }
        }
    }
}

/// Weight steps (of 4 k) to prefetch ahead of use.
#[cfg(target_arch = "x86_64")]
const PREFETCH: usize = 24;

#[cfg(target_arch = "x86_64")]
mod avx512_vnni {
    use std::arch::x86_64::*;

    use super::{I8Tile, PREFETCH};

    const NR: usize = 32;

    /// # Safety
    /// The CPU has AVX-512F, BW and VNNI, and `t.c` is valid for the tile's writes.
    pub(super) unsafe fn tile(t: &I8Tile) {
        t.check_input(14, NR, super::Input::Rows.tile_dwords(t.steps, 14, 0));
        // SAFETY: the operands were checked above; the caller vouches for the CPU and `c`.
        unsafe { by_rows!(rows, t, 1 2 3 4 5 6 7 8 9 10 11 12 13 14) }
    }

    #[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
    unsafe fn rows<const R: usize>(t: &I8Tile) {
        let (a, b) = (t.a.as_ptr().cast::<i32>(), t.b.as_ptr());
        let row_dwords = super::row_dwords(t.steps);
        let mut lo = [_mm512_setzero_si512(); R];
        let mut hi = [_mm512_setzero_si512(); R];
        for step in 0..t.steps {
            // A prefetch past the end of the panel is harmless; `wrapping_add` keeps the address
            // arithmetic defined there.
            let ahead = b.wrapping_add((step + PREFETCH) * NR * 4);
            _mm_prefetch::<_MM_HINT_T0>(ahead.cast());
            _mm_prefetch::<_MM_HINT_T0>(ahead.wrapping_add(64).cast());
            // SAFETY: `a` holds R rows of `row_dwords` ≥ `steps` dwords and `b` `steps` steps of
            // 128 bytes (checked by `tile`).
            let (b0, b1, line) = unsafe {
                let step_b = b.add(step * NR * 4);
                (_mm512_loadu_si512(step_b.cast()), _mm512_loadu_si512(step_b.add(64).cast()), a.add(step))
            };
            for r in 0..R {
                let x = _mm512_set1_epi32(unsafe { *line.add(r * row_dwords) });
                lo[r] = _mm512_dpbusd_epi32(lo[r], x, b0);
                hi[r] = _mm512_dpbusd_epi32(hi[r], x, b1);
            }
        }
        let epilogue = Epilogue::new(t);
        for r in 0..R {
            // SAFETY: row r of `c` is valid for `cols` writes (the caller).
            unsafe { epilogue.store(t, r, lo[r], hi[r]) };
        }
    }

    /// The AMX program's sums written out as this kernel writes its own, so that both give the
    /// same floats: row r's 32 sums at `acc[32 r..]`.
    ///
    /// # Safety
    /// The CPU has AVX-512F, BW and VNNI; the tile was checked; its rows of `c` are valid for
    /// `cols` writes.
    #[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
    pub(super) unsafe fn store_sums(t: &I8Tile, acc: &[i32; 32 * 32]) {
        let epilogue = Epilogue::new(t);
        for r in 0..t.rows {
            let row = &acc[32 * r..32 * r + 32];
            // SAFETY: `row` holds 32 i32; row r of `c` is valid for `cols` writes (the caller).
            unsafe {
                let (lo, hi) = (
                    _mm512_loadu_si512(row.as_ptr().cast()),
                    _mm512_loadu_si512(row.as_ptr().add(16).cast()),
                );
                epilogue.store(t, r, lo, hi)
            };
        }
    }

    /// The tile's per-column terms in registers: `c = (acc − zp · Σw) · s_row · s_col + bias`.
    struct Epilogue {
        scale: [__m512; 2],
        sum: [__m512i; 2],
        bias: [__m512; 2],
        mask: [__mmask16; 2],
    }

    impl Epilogue {
        /// Inlined into functions compiled with AVX-512F and BW.
        #[inline(always)]
        fn new(t: &I8Tile) -> Self {
            let cols = t.cols;
            let mask_lo: __mmask16 = if cols >= 16 { 0xFFFF } else { ((1u32 << cols) - 1) as u16 };
            let mask_hi: __mmask16 = if cols <= 16 { 0 } else { ((1u32 << (cols - 16)) - 1) as u16 };
            // SAFETY: the column scales, sums and bias hold 32 values each (checked by the
            // kernels' `check`); the caller is compiled with AVX-512F.
            unsafe {
                let load = |s: &[f32], o: usize| _mm512_loadu_ps(s.as_ptr().add(o));
                let sums = t.col_sums.as_ptr();
                Epilogue {
                    scale: [load(t.col_scales, 0), load(t.col_scales, 16)],
                    sum: [_mm512_loadu_si512(sums.cast()), _mm512_loadu_si512(sums.add(16).cast())],
                    bias: [load(t.bias, 0), load(t.bias, 16)],
                    mask: [mask_lo, mask_hi],
                }
            }
        }

        /// Writes row r from its sums for columns 0..16 (`lo`) and 16..32 (`hi`).
        ///
        /// # Safety
        /// Row r of `c` is valid for `cols` writes; the caller is compiled with AVX-512F.
        #[inline(always)]
        unsafe fn store(&self, t: &I8Tile, r: usize, lo: __m512i, hi: __m512i) {
            // SAFETY: AVX-512F, as the caller promises.
            unsafe {
                let zp = _mm512_set1_epi32(t.zero_points[r]);
                let s = _mm512_set1_ps(t.row_scales[r]);
                let out = |acc, h: usize| {
                    let exact = _mm512_sub_epi32(acc, _mm512_mullo_epi32(zp, self.sum[h]));
                    _mm512_fmadd_ps(_mm512_cvtepi32_ps(exact), _mm512_mul_ps(s, self.scale[h]), self.bias[h])
                };
                let row = t.c.wrapping_add(r * t.ldc);
                // Masked lanes past `cols` are not written.
                _mm512_mask_storeu_ps(row, self.mask[0], out(lo, 0));
                _mm512_mask_storeu_ps(row.wrapping_add(16), self.mask[1], out(hi, 1));
            }
        }
    }
}

/// The `amx` level's tile: the tile program's sums on the unit, written out by the AVX-512 VNNI
/// kernel's epilogue.
///
/// # Safety
/// The CPU runs the `amx` level (which `amx::usable` and AVX-512 VNNI decide), and `t.c` is
/// valid for the tile's writes.
#[cfg(target_arch = "x86_64")]
unsafe fn amx_tile(t: &I8Tile) {
    t.check_input(32, 32, Input::Rows.tile_dwords(t.steps, 32, 0));
    // SAFETY: the level in force is `amx`, which only a usable unit supports.
    let mut unit = unsafe { super::amx::Tmm::configured() };
    super::amx::with_sums(|acc| {
        super::amx::sums(&mut unit, super::amx::Dot::U8S8, t.operands(), acc);
        // SAFETY: `amx` implies AVX-512 VNNI; the tile was checked; the caller vouches for `c`.
        unsafe { avx512_vnni::store_sums(t, acc) }
    })
}

#[cfg(target_arch = "x86_64")]
mod avx2 {
    use std::arch::x86_64::*;

    use super::{I8Tile, PREFETCH};

    const NR: usize = 16;
    const STRIDE: usize = 8;

    /// `VNNI`: the 256-bit `vpdpbusd` of AVX-VNNI, else `vpmaddubsw` and `vpmaddwd`.
    ///
    /// # Safety
    /// The CPU has AVX2 (and AVX-VNNI with `VNNI`), and `t.c` is valid for the tile's writes.
    pub(super) unsafe fn tile<const VNNI: bool>(t: &I8Tile) {
        // Without VNNI, 5 rows: 6 would need 17 of the 16 registers (12 sums, 2 weights, the
        // broadcast row, the ones and a product), and the spilled sum's store and reload each
        // step made the kernel up to a third slower, by how the heap happened to lie.
        t.check(if VNNI { 6 } else { 5 }, NR, STRIDE);
        // SAFETY: the operands were checked above; the caller vouches for the CPU and `c`.
        unsafe {
            if VNNI {
                by_rows!(rows_vnni, t, 1 2 3 4 5 6)
            } else {
                by_rows!(rows_madd, t, 1 2 3 4 5)
            }
        }
    }

    /// Adds row x's 4 u8 times each column's 4 s8 to `acc`, through i16 pair sums (which cannot
    /// saturate: weights are within ±63).
    #[inline(always)]
    fn madd(acc: __m256i, x: __m256i, w: __m256i) -> __m256i {
        // SAFETY: only inlined into functions compiled with AVX2.
        unsafe { _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(x, w), _mm256_set1_epi16(1))) }
    }

    #[target_feature(enable = "avx2")]
    unsafe fn rows_madd<const R: usize>(t: &I8Tile) {
        // SAFETY: as `run` requires, which `tile` checked.
        unsafe { run::<R>(t, madd) }
    }

    #[target_feature(enable = "avx2,avxvnni")]
    unsafe fn rows_vnni<const R: usize>(t: &I8Tile) {
        // SAFETY: as `run` requires, which `tile` checked.
        unsafe { run::<R>(t, |acc, x, w| _mm256_dpbusd_avx_epi32(acc, x, w)) }
    }

    /// The tile loop around one way to multiply-add 4 u8 × 4 s8.
    ///
    /// # Safety
    /// The CPU has AVX2 and what `dot` uses; the tile was checked; row r of `c` is valid for
    /// `cols` writes.
    #[inline(always)]
    unsafe fn run<const R: usize>(t: &I8Tile, dot: impl Fn(__m256i, __m256i, __m256i) -> __m256i) {
        let (a, b) = (t.a.as_ptr().cast::<i32>(), t.b.as_ptr());
        // SAFETY (every access below): `a` holds `steps` lines of 8 dwords and `b` `steps` steps
        // of 64 bytes (checked); `sums` holds 16 i32.
        let mut lo = [unsafe { _mm256_setzero_si256() }; R];
        let mut hi = lo;
        for step in 0..t.steps {
            // A prefetch past the end of the panel is harmless; `wrapping_add` keeps the address
            // arithmetic defined there.
            unsafe { _mm_prefetch::<_MM_HINT_T0>(b.wrapping_add((step + PREFETCH) * NR * 4).cast()) };
            let (b0, b1, line) = unsafe {
                let step_b = b.add(step * NR * 4);
                (
                    _mm256_loadu_si256(step_b.cast()),
                    _mm256_loadu_si256(step_b.add(32).cast()),
                    a.add(step * STRIDE),
                )
            };
            for r in 0..R {
                let x = unsafe { _mm256_set1_epi32(*line.add(r)) };
                lo[r] = dot(lo[r], x, b0);
                hi[r] = dot(hi[r], x, b1);
            }
        }
        let mut sums = [0i32; NR];
        for r in 0..R {
            unsafe {
                _mm256_storeu_si256(sums.as_mut_ptr().cast(), lo[r]);
                _mm256_storeu_si256(sums.as_mut_ptr().add(8).cast(), hi[r]);
                t.store(r, &sums);
            }
        }
    }
}

/// `sdot` and `usmmla` through `asm!`: their intrinsics are not stable in Rust 1.95. Each macro
/// is one instruction on registers, so the compiler still allocates and schedules around it.
#[cfg(target_arch = "aarch64")]
mod arm_asm {
    /// `acc += ` the 4 dot products of `w`'s 4-byte groups with the 4 bytes of lane `$lane` of
    /// `x`, all s8, summed into i32.
    macro_rules! sdot_lane {
        ($acc:expr, $w:expr, $x:expr, $lane:literal) => {{
            let mut acc: core::arch::aarch64::int32x4_t = $acc;
            // SAFETY: registers only (no memory, stack or flags); the enclosing function enables
            // `dotprod`, which its caller checked the CPU has.
            unsafe {
                core::arch::asm!(
                    concat!("sdot {acc:v}.4s, {w:v}.16b, {x:v}.4b[", $lane, "]"),
                    acc = inout(vreg) acc,
                    w = in(vreg) $w,
                    x = in(vreg) $x,
                    options(pure, nomem, nostack, preserves_flags)
                )
            };
            acc
        }};
    }

    /// `acc += x · wᵀ`: `x` two rows of 8 u8, `w` two columns of 8 s8, `acc` the 2 × 2 i32
    /// result row by row.
    macro_rules! usmmla {
        ($acc:expr, $x:expr, $w:expr) => {{
            let mut acc: core::arch::aarch64::int32x4_t = $acc;
            // SAFETY: registers only; the enclosing function enables `i8mm`, which its caller
            // checked the CPU has.
            unsafe {
                core::arch::asm!(
                    "usmmla {acc:v}.4s, {x:v}.16b, {w:v}.16b",
                    acc = inout(vreg) acc,
                    x = in(vreg) $x,
                    w = in(vreg) $w,
                    options(pure, nomem, nostack, preserves_flags)
                )
            };
            acc
        }};
    }

    pub(super) use {sdot_lane, usmmla};
}

#[cfg(target_arch = "aarch64")]
mod neon_dotprod {
    use std::arch::aarch64::*;

    use super::arm_asm::sdot_lane;
    use super::I8Tile;

    const MR: usize = 8;
    const NR: usize = 12;

    /// # Safety
    /// The CPU has the dot product (FEAT_DotProd), and `t.c` is valid for the tile's writes.
    pub(super) unsafe fn tile(t: &I8Tile) {
        t.check(MR, NR, MR);
        // SAFETY: the operands were checked above; the caller vouches for the CPU and `c`.
        unsafe { by_rows!(rows, t, 1 2 3 4 5 6 7 8) }
    }

    /// `acc + w · x` for the row whose 4 bytes are lane `r % 4` of `line[r / 4]`.
    #[inline(always)]
    fn dot(acc: int32x4_t, w: int8x16_t, line: [int8x16_t; 2], r: usize) -> int32x4_t {
        let x = line[r / 4];
        match r % 4 {
            0 => sdot_lane!(acc, w, x, 0),
            1 => sdot_lane!(acc, w, x, 1),
            2 => sdot_lane!(acc, w, x, 2),
            _ => sdot_lane!(acc, w, x, 3),
        }
    }

    // 8 rows × 3 vectors of 4 columns: 24 accumulators, 3 weight vectors and 2 input vectors of
    // the 32 registers, as the f32 tile. `sdot` takes s8 on both sides, so the u8 inputs are
    // moved to s8 by flipping their top bit (x − 128), and 128 · Σw goes back into each sum.
    #[target_feature(enable = "dotprod")]
    unsafe fn rows<const R: usize>(t: &I8Tile) {
        let (a, b) = (t.a.as_ptr(), t.b.as_ptr());
        let flip = vdupq_n_u32(0x8080_8080);
        let mut acc = [[vdupq_n_s32(0); 3]; R];
        for step in 0..t.steps {
            // SAFETY: `b` holds `steps` steps of NR · 4 = 48 bytes and `a` `steps` lines of MR
            // dwords (checked by `tile`); NEON loads take any alignment.
            let (weights, line) = unsafe {
                let w: [int8x16_t; 3] = std::array::from_fn(|v| vld1q_s8(b.add(step * NR * 4 + 16 * v)));
                let x: [int8x16_t; 2] = std::array::from_fn(|h| {
                    vreinterpretq_s8_u32(veorq_u32(vld1q_u32(a.add(step * MR + 4 * h)), flip))
                });
                (w, x)
            };
            for (r, acc) in acc.iter_mut().enumerate() {
                for (acc, &w) in acc.iter_mut().zip(&weights) {
                    *acc = dot(*acc, w, line, r);
                }
            }
        }
        let mut sums = [0i32; NR];
        for (r, acc) in acc.iter().enumerate() {
            // SAFETY: `sums` holds NR = 12 i32; row r of `c` is valid for `cols` writes (the
            // caller).
            unsafe {
                for (v, &s) in acc.iter().enumerate() {
                    vst1q_s32(sums.as_mut_ptr().add(4 * v), s);
                }
                for (sum, &w) in sums.iter_mut().zip(t.col_sums) {
                    *sum += 128 * w;
                }
                t.store(r, &sums);
            }
        }
    }
}

#[cfg(target_arch = "aarch64")]
mod neon_i8mm {
    use std::arch::aarch64::*;

    use super::arm_asm::usmmla;
    use super::I8Tile;

    const MR: usize = 8;
    const NR: usize = 8;
    /// Pairs of rows and of columns in a tile.
    const PAIRS: usize = 4;

    /// # Safety
    /// The CPU has the int8 matrix multiply (FEAT_I8MM), and `t.c` is valid for the tile's
    /// writes.
    pub(super) unsafe fn tile(t: &I8Tile) {
        t.check(MR, NR, MR);
        assert!(t.steps.is_multiple_of(2), "int8 tile: {} steps of 4 k for 8-k steps", t.steps);
        // SAFETY: the operands were checked above; the caller vouches for the CPU and `c`.
        unsafe { by_rows!(rows, t, 1 2 3 4 5 6 7 8) }
    }

    // 4 pairs of rows × 4 pairs of columns: 16 accumulators of 2 × 2 sums, 4 weight vectors
    // and 4 input vectors per 8 k, 24 of the 32 registers. Each `usmmla` does 32
    // multiply-adds, twice an `sdot`; u8 inputs and s8 weights are its operands as they are.
    #[target_feature(enable = "neon,i8mm")]
    unsafe fn rows<const R: usize>(t: &I8Tile) {
        let (a, b) = (t.a.as_ptr(), t.b.as_ptr());
        let pairs = R.div_ceil(2);
        let mut acc = [[vdupq_n_s32(0); PAIRS]; PAIRS];
        for step in 0..t.steps / 2 {
            // SAFETY: `b` holds `steps / 2` steps of NR · 8 = 64 bytes and `a` `steps / 2`
            // pairs of lines of 2 · MR dwords (checked by `tile`); NEON loads take any alignment.
            let (weights, inputs) = unsafe {
                let w: [int8x16_t; PAIRS] = std::array::from_fn(|q| vld1q_s8(b.add(step * NR * 8 + 16 * q)));
                let x: [uint8x16_t; PAIRS] =
                    std::array::from_fn(|p| vreinterpretq_u8_u32(vld1q_u32(a.add(step * 2 * MR + 4 * p))));
                (w, x)
            };
            for (acc, &x) in acc.iter_mut().zip(&inputs).take(pairs) {
                for (acc, &w) in acc.iter_mut().zip(&weights) {
                    *acc = usmmla!(*acc, x, w);
                }
            }
        }
        for (p, acc) in acc.iter().enumerate().take(pairs) {
            // Lanes of pair (p, q): (2p, 2q), (2p, 2q + 1), (2p + 1, 2q), (2p + 1, 2q + 1).
            let mut lanes = [0i32; 4 * PAIRS];
            // SAFETY: `lanes` holds 4 · PAIRS i32.
            unsafe {
                for (q, &s) in acc.iter().enumerate() {
                    vst1q_s32(lanes.as_mut_ptr().add(4 * q), s);
                }
            }
            for half in 0..2 {
                let r = 2 * p + half;
                if r < t.rows {
                    let sums: [i32; NR] = std::array::from_fn(|j| lanes[(j / 2) * 4 + half * 2 + j % 2]);
                    // SAFETY: row r < rows of `c` is valid for `cols` writes (the caller).
                    unsafe { t.store(r, &sums) };
                }
            }
        }
    }
}

#[cfg(all(target_arch = "wasm32", target_feature = "relaxed-simd"))]
mod relaxed_simd {
    use std::arch::wasm32::*;

    use super::I8Tile;

    // 8 accumulators, 2 weight vectors, the input and the two registers V8 takes for the dot on
    // x86-64 without VNNI (`pmaddubsw`, `pmaddwd` by a vector of ones): 13 of its 15 free xmm.
    // 3 × 12, 5 × 8 and 2 × 16 ran the base model within 2% of this (Chromium 156, Zen 3).
    pub(super) const MR: usize = 4;
    pub(super) const NR: usize = 8;
    /// Vectors of 4 columns per row of the tile.
    const W: usize = NR / 4;

    /// # Safety
    /// `t.c` is valid for the tile's writes (the module is built with relaxed-simd, so the
    /// engine runs it).
    pub(super) unsafe fn tile(t: &I8Tile) {
        t.check(MR, NR, MR);
        // SAFETY: the operands were checked above; the caller vouches for `c`.
        unsafe { by_rows!(rows, t, 1 2 3 4) }
    }

    // The dot multiplies s8 by 7-bit values; an operand with its top bit set gives
    // engine-defined results. So the weights (±63) go in as w + 64, in 1..=127, and the inputs
    // as s8 x − 128 (`signed_inputs`): each i32 lane sums Σ (x − 128)(w + 64), exactly, on
    // every engine (a pair of products stays within i16: 2 · 128 · 127 < 2^15).
    // Σ x·w = that − 64·Σx + 128·Σw + 8192·k, over the padded k, whose bytes are x = 0, w = 0.
    unsafe fn rows<const R: usize>(t: &I8Tile) {
        let (a, b) = (t.a.as_ptr(), t.b.as_ptr());
        let offset = i8x16_splat(64);
        let mut acc = [[i32x4_splat(0); W]; R];
        for step in 0..t.steps {
            // SAFETY: `b` holds `steps` steps of NR · 4 = 32 bytes, `a` `steps` lines of MR
            // dwords (checked by `tile`); v128 loads take any alignment.
            let (weights, line): ([v128; W], _) = unsafe {
                (
                    std::array::from_fn(|v| {
                        i8x16_add(v128_load(b.add(step * NR * 4 + 16 * v).cast()), offset)
                    }),
                    a.add(step * MR),
                )
            };
            for (r, acc) in acc.iter_mut().enumerate() {
                // Row r's 4 bytes in every lane.
                let x = unsafe { v128_load32_splat(line.add(r).cast()) };
                for (acc, &w) in acc.iter_mut().zip(&weights) {
                    *acc = i32x4_relaxed_dot_i8x16_i7x16_add(x, w, *acc);
                }
            }
        }
        let k = 4 * t.steps as i32;
        for (r, acc) in acc.iter().enumerate() {
            let mut sums = [0i32; NR];
            let row_term = 8192 * k - 64 * t.row_sums[r];
            // SAFETY: `sums` holds NR i32; row r of `c` is valid for `cols` writes (the caller).
            unsafe {
                for (v, &s) in acc.iter().enumerate() {
                    v128_store(sums.as_mut_ptr().add(4 * v).cast(), s);
                }
                for (sum, &w) in sums.iter_mut().zip(t.col_sums) {
                    *sum += 128 * w + row_term;
                }
                t.store(r, &sums);
            }
        }
    }
}

#[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
mod simd128 {
    use std::arch::wasm32::*;

    use super::I8Tile;

    const MR: usize = 5;
    const NR: usize = 4;

    /// # Safety
    /// `t.c` is valid for the tile's writes (the module is built with simd128, so the engine
    /// runs it).
    pub(super) unsafe fn tile(t: &I8Tile) {
        t.check(MR, NR, MR);
        // SAFETY: the operands were checked above; the caller vouches for `c`.
        unsafe { by_rows!(rows, t, 1 2 3 4 5) }
    }

    unsafe fn rows<const R: usize>(t: &I8Tile) {
        let (a, b) = (t.a.as_ptr(), t.b.as_ptr());
        // Each accumulator holds two columns' sums in pairs of lanes: `dot_i16x8` adds the
        // products of k = 0, 1 and of k = 2, 3 of each column (u8 · s8 is exact in i16's
        // product, summed in i32).
        let mut lo = [i32x4_splat(0); R];
        let mut hi = [i32x4_splat(0); R];
        for step in 0..t.steps {
            // SAFETY: `b` holds `steps` steps of NR · 4 = 16 bytes, `a` `steps` lines of MR
            // dwords (checked by `tile`); v128 loads take any alignment.
            let (w, line) = unsafe { (v128_load(b.add(step * NR * 4).cast()), a.add(step * MR)) };
            let (w01, w23) = (i16x8_extend_low_i8x16(w), i16x8_extend_high_i8x16(w));
            for r in 0..R {
                // Row r's 4 bytes twice, as u16: [x0 x1 x2 x3 x0 x1 x2 x3].
                let x = u16x8_extend_low_u8x16(unsafe { v128_load32_splat(line.add(r)) });
                lo[r] = i32x4_add(lo[r], i32x4_dot_i16x8(x, w01));
                hi[r] = i32x4_add(hi[r], i32x4_dot_i16x8(x, w23));
            }
        }
        for r in 0..R {
            let sums = i32x4_add(
                i32x4_shuffle::<0, 2, 4, 6>(lo[r], hi[r]),
                i32x4_shuffle::<1, 3, 5, 7>(lo[r], hi[r]),
            );
            let mut out = [0i32; NR];
            // SAFETY: `out` holds NR = 4 sums; row r of `c` is valid for `cols` writes (the caller).
            unsafe {
                v128_store(out.as_mut_ptr().cast(), sums);
                t.store(r, &out);
            }
        }
    }
}

mod portable {
    use super::I8Tile;

    const MR: usize = 4;
    const NR: usize = 16;

    /// # Safety
    /// `t.c` is valid for the tile's writes.
    pub(super) unsafe fn tile(t: &I8Tile) {
        t.check(MR, NR, MR);
        let mut acc = [[0i32; NR]; MR];
        for (line, step) in t.a.chunks_exact(MR).zip(t.b.chunks_exact(NR * 4)).take(t.steps) {
            let line: [u32; MR] = line.try_into().expect("chunks of MR");
            // Each k's 16 weights lie together (`StepLayout::ByK`), so each product runs along
            // the columns, and a u8 × s8 product is exact in i16 (|255 · −128| < 2^15): a 16-bit
            // multiply widened into the i32 sum is what SSE2 and NEON have (`pmullw`, `smlal`).
            let bytes = line.map(u32::to_le_bytes);
            for (q, w) in step.chunks_exact(NR).enumerate() {
                let w: [i16; NR] = std::array::from_fn(|j| i16::from(w[j]));
                for (row, x) in acc.iter_mut().zip(&bytes) {
                    let x = i16::from(x[q]);
                    for (o, &w) in row.iter_mut().zip(&w) {
                        *o += i32::from(x * w);
                    }
                }
            }
        }
        for (r, sums) in acc.iter().enumerate().take(t.rows) {
            // SAFETY: row r of `c` is valid for `cols` writes, as the caller promises.
            unsafe { t.store(r, sums) };
        }
    }
}
