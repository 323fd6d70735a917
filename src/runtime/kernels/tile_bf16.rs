//! The bf16 microkernels: weights kept in bf16 (half of f32's memory), each product's inputs
//! rounded to bf16 per element (to nearest, ties to even), products summed in f32:
//! `c = round(a) · Wᵀ + bias`.
//!
//! | level | tile | product of 2 bf16 × 2 bf16 into f32 |
//! | --- | --- | --- |
//! | AMX (products of enough rows; others as AVX-512 BF16) | 32 × 32 | `tdpbf16ps` (16 × 32 by 32 × 16 per instruction; `amx`) |
//! | AVX-512 BF16 | 14 × 32 | `vdpbf16ps` (512-bit) |
//! | every other level | the level's f32 tile | none: each vector of weights widened to f32 (a shift) as it is loaded |
//!
//! Without bf16 instructions the weights still take half the memory, and a product runs the
//! level's f32 kernel on the bf16 panels (`tile_f32::Weight`), its inputs rounded as they are
//! packed: f32's work, a shift per vector of weights, and half the weight bytes to read
//! (docs/log/2026-11-amx-bf16.md gives the figures).

use super::layout::{row_dwords, Input};
use super::Level;

/// The operands of one tile. Only x86 has bf16 kernels (elsewhere the tests' model unit runs
/// them); other targets widen for their f32 tile.
#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
pub(crate) struct Bf16Tile<'a> {
    pub rows: usize,
    pub cols: usize,
    /// Steps of 2 k.
    pub steps: usize,
    /// The tile's rows as the kernel's `input` says, two bf16 to a dword (the lower k in the low
    /// half).
    pub a: &'a [u32],
    /// `steps` steps of `nr` columns × 2 bf16, as the kernel's `pairs` says.
    pub b: &'a [u16],
    /// Per column (`nr`): the bias.
    pub bias: &'a [f32],
    /// The tile's first output; rows are `ldc` apart, and `cols` (≤ nr) columns are written.
    pub c: *mut f32,
    pub ldc: usize,
}

#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
impl Bf16Tile<'_> {
    /// The checks every kernel relies on before it touches memory through pointers.
    pub(super) fn check(&self, kernel: &Bf16Kernel) {
        assert!(
            (1..=kernel.mr).contains(&self.rows)
                && (1..=kernel.nr).contains(&self.cols)
                && self.a.len() >= Input::Rows.tile_dwords(self.steps, kernel.mr, 0)
                && self.b.len() >= self.steps * kernel.nr * 2
                && self.bias.len() >= kernel.nr,
            "bf16 tile: operands do not fit the kernel"
        );
    }

    /// The tile program's view of the operands.
    #[cfg(any(test, target_arch = "x86_64"))]
    pub(super) fn operands(&self) -> super::amx::Operands<'_> {
        use super::amx::as_bytes;
        super::amx::Operands { a: as_bytes(self.a), b: as_bytes(self.b), steps: self.steps, rows: self.rows }
    }

    /// Writes row `r`'s `cols` sums plus the bias: the model unit's epilogue in the tests (the
    /// kernels write theirs with AVX-512).
    ///
    /// # Safety
    /// Row r of `c` is valid for `cols` writes.
    #[cfg(test)]
    pub(super) unsafe fn store(&self, r: usize, sums: &[f32]) {
        // SAFETY: as the caller promises.
        let c = unsafe { std::slice::from_raw_parts_mut(self.c.wrapping_add(r * self.ldc), self.cols) };
        for ((out, &sum), &bias) in c.iter_mut().zip(sums).zip(self.bias) {
            *out = sum + bias;
        }
    }
}

/// One instruction set's bf16 microkernel and its tile shape.
#[derive(Debug)]
pub(crate) struct Bf16Kernel {
    pub mr: usize,
    pub nr: usize,
    /// Whether a step of a weight panel holds each column's 2 k together (the operand of
    /// `vdpbf16ps` and `tdpbf16ps`), as every bf16 kernel's does (see [`offset`]).
    pub pairs: bool,
    /// Computes tiles of one panel (each its own rows, all at one depth).
    ///
    /// # Safety
    /// The CPU runs the kernel's instruction set, and each tile's `c` is valid for its writes.
    pub tiles: unsafe fn(&[Bf16Tile]),
}

impl Bf16Kernel {
    /// The AMX tile program's shape around `tiles` (the unit's, or the tests' model of it): 32 ×
    /// 32, inputs in tile rows, on the AVX-512 BF16 kernel's panels (32 columns, 2 k per column).
    #[cfg_attr(not(any(test, target_arch = "x86_64")), allow(dead_code))]
    pub(crate) const fn tile_program(tiles: unsafe fn(&[Bf16Tile])) -> Bf16Kernel {
        Bf16Kernel { mr: 32, nr: 32, pairs: true, tiles }
    }

    /// The kernel that packs a level's weights, and computes its products (at `amx`, those too
    /// small for [`Bf16Kernel::tiles_for_level`]); none at a level without bf16 instructions.
    pub fn for_level(level: Level) -> Option<&'static Bf16Kernel> {
        #[cfg(target_arch = "x86_64")]
        if matches!(level, Level::Avx512Bf16 | Level::Amx) {
            return Some(&AVX512_BF16);
        }
        let _ = level;
        None
    }

    /// The tile program for a level's products of many rows, on the weights
    /// [`Bf16Kernel::for_level`] packed, with the fewest rows it pays from: AMX at `amx`.
    pub fn tiles_for_level(level: Level) -> Option<(&'static Bf16Kernel, usize)> {
        #[cfg(target_arch = "x86_64")]
        if level == Level::Amx {
            return Some((&AMX, AMX_MIN_ROWS));
        }
        let _ = level;
        None
    }
}

#[cfg(target_arch = "x86_64")]
static AVX512_BF16: Bf16Kernel = Bf16Kernel { mr: 14, nr: 32, pairs: true, tiles: avx512_bf16::tiles };
/// The AMX tile program on the AVX-512 BF16 kernel's panels (32 columns, 2 k per column).
#[cfg(target_arch = "x86_64")]
static AMX: Bf16Kernel = Bf16Kernel::tile_program(amx_tiles);

/// The fewest rows for which the AMX program beats the AVX-512 BF16 kernel, measured with
/// `cargo bench --bench kernels -- gemm` (docs/log/2026-11-amx-bf16.md).
#[cfg(target_arch = "x86_64")]
const AMX_MIN_ROWS: usize = 8;

/// `x` in bf16, rounded to nearest with ties to even, as `vcvtneps2bf16` does (a NaN stays a
/// NaN).
#[inline(always)]
pub(crate) fn to_bf16(x: f32) -> u16 {
    let bits = x.to_bits();
    let rounded = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16) as u16;
    // A select, not a branch, so that loops over it vectorise.
    if x.is_nan() {
        ((bits >> 16) | 0x40) as u16
    } else {
        rounded
    }
}

/// The offset in a panel of `nr` columns of column `j` at depth `kk`: each column's 2 k together
/// (`pairs`), else each k's `nr` columns together, which widened is an f32 kernel's panel.
pub(crate) fn offset(nr: usize, pairs: bool, j: usize, kk: usize) -> usize {
    let (step, half) = (kk / 2, kk % 2);
    if pairs {
        step * nr * 2 + j * 2 + half
    } else {
        step * nr * 2 + half * nr + j
    }
}

/// The f32 a bf16 stands for, exactly.
#[inline(always)]
pub(crate) fn from_bf16(x: u16) -> f32 {
    f32::from_bits(u32::from(x) << 16)
}

super::multiversion! {
    /// Rounds `rows` rows of `a` (row stride `k`) to bf16 and lays them out in [`Input::Rows`],
    /// 2 k to a dword (zero past k, to whole tile rows): `dst[r · row_dwords(steps) + step]`.
    pub(crate) fn round_rows(a: &[f32], k: usize, rows: usize, dst: &mut [u32]) {
        let steps = k.div_ceil(2);
        let row_dwords = row_dwords(steps);
        // Each row rounded into whole pairs first, a loop the compiler vectorises.
        let mut halves = vec![0u16; steps * 2];
        for r in 0..rows {
            for (h, &v) in halves.iter_mut().zip(&a[r * k..r * k + k]) {
                *h = to_bf16(v);
            }
            let pairs = halves.chunks_exact(2).map(|p| u32::from(p[0]) | u32::from(p[1]) << 16);
            // The row's padding too: the buffer is reused, and old bits there could be NaN, which
            // times a zero weight is NaN.
            let row = &mut dst[r * row_dwords..(r + 1) * row_dwords];
            row.iter_mut().zip(pairs).for_each(|(d, pair)| *d = pair);
            row[steps..].fill(0);
        }
    }
}

/// The `amx` level's bf16 tiles: the tile program's f32 sums on the unit, plus the bias.
///
/// # Safety
/// The CPU runs the `amx` level, and each tile's `c` is valid for its writes.
#[cfg(target_arch = "x86_64")]
unsafe fn amx_tiles(tiles: &[Bf16Tile]) {
    use super::amx::{column_sums, Dot, Tmm};
    tiles.iter().for_each(|t| t.check(&AMX));
    // SAFETY: the level in force is `amx`, which only a usable unit supports.
    let mut unit = unsafe { Tmm::configured() };
    column_sums(&mut unit, Dot::Bf16, tiles.iter().map(Bf16Tile::operands), |i, acc| {
        // SAFETY: `amx` implies AVX-512; the tile was checked; the caller vouches for `c`.
        unsafe { avx512_bf16::store_sums(&tiles[i], acc) }
    })
}

/// Weight steps (of 2 k) to prefetch ahead of use.
#[cfg(target_arch = "x86_64")]
const PREFETCH: usize = 24;

#[cfg(target_arch = "x86_64")]
mod avx512_bf16 {
    use std::arch::x86_64::*;

    use super::{Bf16Tile, AVX512_BF16, PREFETCH};

    const NR: usize = 32;

    /// # Safety
    /// The CPU has AVX-512F, BW and BF16, and each tile's `c` is valid for its writes.
    pub(super) unsafe fn tiles(tiles: &[Bf16Tile]) {
        // SAFETY: as the caller promises.
        tiles.iter().for_each(|t| unsafe { tile(t) })
    }

    /// # Safety
    /// As [`tiles`], for one.
    unsafe fn tile(t: &Bf16Tile) {
        t.check(&AVX512_BF16);
        // SAFETY: the operands were checked above; the caller vouches for the CPU and `c`.
        unsafe { by_rows!(rows, t, 1 2 3 4 5 6 7 8 9 10 11 12 13 14) }
    }

    #[target_feature(enable = "avx512f,avx512bw,avx512bf16")]
    unsafe fn rows<const R: usize>(t: &Bf16Tile) {
        let (a, b) = (t.a.as_ptr().cast::<i32>(), t.b.as_ptr());
        let row_dwords = super::row_dwords(t.steps);
        let mut lo = [_mm512_setzero_ps(); R];
        let mut hi = [_mm512_setzero_ps(); R];
        for step in 0..t.steps {
            // A prefetch past the end of the panel is harmless; `wrapping_add` keeps the address
            // arithmetic defined there.
            let ahead = b.wrapping_add((step + PREFETCH) * NR * 2);
            _mm_prefetch::<_MM_HINT_T0>(ahead.cast());
            _mm_prefetch::<_MM_HINT_T0>(ahead.wrapping_add(32).cast());
            // SAFETY: `a` holds R rows of `row_dwords` ≥ `steps` dwords and `b` `steps` steps of
            // 64 bf16 (checked by `tile`). A vector of 32 bf16 is a vector of 16 dwords
            // reinterpreted.
            let (b0, b1, line) = unsafe {
                let step_b = b.add(step * NR * 2);
                (
                    std::mem::transmute::<__m512i, __m512bh>(_mm512_loadu_si512(step_b.cast())),
                    std::mem::transmute::<__m512i, __m512bh>(_mm512_loadu_si512(step_b.add(32).cast())),
                    a.add(step),
                )
            };
            for r in 0..R {
                // SAFETY: as above; row r's 2 bf16 in every dword.
                let x = unsafe {
                    std::mem::transmute::<__m512i, __m512bh>(_mm512_set1_epi32(*line.add(r * row_dwords)))
                };
                lo[r] = _mm512_dpbf16_ps(lo[r], x, b0);
                hi[r] = _mm512_dpbf16_ps(hi[r], x, b1);
            }
        }
        for r in 0..R {
            // SAFETY: row r of `c` is valid for `cols` writes (the caller).
            unsafe { store_row(t, r, lo[r], hi[r]) };
        }
    }

    /// The AMX program's f32 sums (as bits, row r's 32 at `acc[32 r..]`) written out as this
    /// kernel writes its own: a scalar loop here cost a quarter of the program's time.
    ///
    /// # Safety
    /// The CPU has AVX-512F; the tile was checked; its rows of `c` are valid for `cols` writes.
    #[target_feature(enable = "avx512f")]
    pub(super) unsafe fn store_sums(t: &Bf16Tile, acc: &[i32; 32 * 32]) {
        for r in 0..t.rows {
            // SAFETY: `acc` holds 32 rows of 32 lanes; row r of `c` as the caller promises.
            unsafe {
                let row = acc.as_ptr().add(32 * r);
                let (lo, hi) = (_mm512_loadu_ps(row.cast()), _mm512_loadu_ps(row.add(16).cast()));
                store_row(t, r, lo, hi)
            };
        }
    }

    /// Row r's sums for columns 0..16 (`lo`) and 16..32 (`hi`) plus the bias, masked to `cols`.
    ///
    /// # Safety
    /// Row r of `c` is valid for `cols` writes; the caller is compiled with AVX-512F.
    #[inline(always)]
    unsafe fn store_row(t: &Bf16Tile, r: usize, lo: __m512, hi: __m512) {
        let cols = t.cols;
        let mask_lo: __mmask16 = if cols >= 16 { 0xFFFF } else { ((1u32 << cols) - 1) as u16 };
        let mask_hi: __mmask16 = if cols <= 16 { 0 } else { ((1u32 << (cols - 16)) - 1) as u16 };
        // SAFETY: the bias holds 32 values (checked by `check`); masked lanes are not written.
        unsafe {
            let bias = t.bias.as_ptr();
            let row = t.c.wrapping_add(r * t.ldc);
            _mm512_mask_storeu_ps(row, mask_lo, _mm512_add_ps(lo, _mm512_loadu_ps(bias)));
            _mm512_mask_storeu_ps(
                row.wrapping_add(16),
                mask_hi,
                _mm512_add_ps(hi, _mm512_loadu_ps(bias.add(16))),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rounding_to_bf16_is_to_nearest_with_ties_to_even() {
        // 1 + 2^-8 lies halfway between 1 and 1 + 2^-7: to the even one, 1. 1 + 3·2^-8 lies
        // halfway between 1 + 2^-7 and 1 + 2^-6: to 1 + 2^-6.
        assert_eq!(from_bf16(to_bf16(1.0 + 2f32.powi(-8))), 1.0);
        assert_eq!(from_bf16(to_bf16(1.0 + 3.0 * 2f32.powi(-8))), 1.0 + 2f32.powi(-6));
        assert_eq!(from_bf16(to_bf16(-1.0 - 2f32.powi(-8) - 2f32.powi(-12))), -1.0 - 2f32.powi(-7));
        assert_eq!(from_bf16(to_bf16(f32::INFINITY)), f32::INFINITY);
        assert!(from_bf16(to_bf16(f32::NAN)).is_nan());
        // Past bf16's largest finite value, to infinity, as the instruction does.
        assert_eq!(from_bf16(to_bf16(f32::MAX)), f32::INFINITY);
    }
}
