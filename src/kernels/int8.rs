//! Int8 linear layers: weights quantized once per output channel (symmetric, s8), activations
//! quantized per row at run time (asymmetric, u8 with a zero point), products summed in i32 and
//! scaled back to f32 with the bias.
//!
//! On AVX-512 VNNI, `vpdpbusd` multiplies 64 u8 × s8 pairs and sums them by fours into 16 i32
//! lanes in one instruction: four times the multiply-adds of an f32 FMA. Elsewhere a plain-Rust
//! kernel over the same layout runs, which the compiler vectorises for AVX2 or leaves portable.

use rayon::prelude::*;

use super::packed::Aligned;
use super::SendPtr;

/// Output columns per panel.
const NR: usize = 32;
/// Rows per microkernel call.
const MR: usize = 14;
/// Dwords (4 bytes of 4 k's) per packed input step: MR rows padded to one cache line.
const A_STRIDE: usize = 16;
/// Weight steps (of 128 bytes) to prefetch ahead of use.
const PREFETCH: usize = 24;

/// A weight (n, k) quantized to s8 per output channel and packed: panel p holds columns
/// 32p..32p+32 as ⌈k/4⌉ steps of 32 columns × 4 consecutive k (128 bytes), zero-padded.
#[derive(Debug)]
pub(crate) struct PackedI8 {
    n: usize,
    k: usize,
    /// k rounded up to a multiple of 4.
    k4: usize,
    panels: Vec<i8>,
    /// Per output column: the scale back to f32, and the sum of its quantized weights.
    scales: Vec<f32>,
    sums: Vec<i32>,
}

impl PackedI8 {
    /// Quantizes `w` (n, k) row-major: each row (output channel) scaled so that its largest
    /// magnitude maps to 127.
    pub fn new(w: &[f32], n: usize, k: usize) -> Self {
        assert_eq!(w.len(), n * k);
        Self::quantized(n, k, |p, panel, scales, sums| {
            for j in 0..NR.min(n - p * NR) {
                let row = &w[(p * NR + j) * k..(p * NR + j + 1) * k];
                let max = row.iter().fold(0f32, |m, v| m.max(v.abs()));
                let scale = if max > 0.0 { max / 127.0 } else { 1.0 };
                scales[j] = scale;
                for (kk, &v) in row.iter().enumerate() {
                    let q = (v / scale).round_ties_even().clamp(-127.0, 127.0) as i8;
                    panel[(kk / 4) * NR * 4 + j * 4 + kk % 4] = q;
                    sums[j] += q as i32;
                }
            }
        })
    }

    /// Quantizes weights already packed for the f32 kernel, panel by panel (the same 32-column
    /// panels, so each step's 32 values sit side by side and the work vectorises).
    pub fn from_f32(packed: &super::packed::PackedF32) -> Self {
        Self::quantized(packed.n(), packed.k(), |p, panel, scales, sums| {
            quantize_panel(packed.panel(p), packed.k(), panel, scales, sums)
        })
    }

    /// Allocates the panels of (n, k) weights and has `quantize` fill each, in parallel, with its
    /// index, its int8 values, and its columns' scales and sums. Columns past n keep scale 1 and
    /// sum 0, as quantizing zero padding gives.
    fn quantized(
        n: usize,
        k: usize,
        quantize: impl Fn(usize, &mut [i8], &mut [f32], &mut [i32]) + Sync,
    ) -> Self {
        let k4 = k.div_ceil(4) * 4;
        let count = n.div_ceil(NR);
        let mut panels = vec![0i8; count * k4 * NR];
        let mut scales = vec![1f32; count * NR];
        let mut sums = vec![0i32; count * NR];
        panels
            .par_chunks_mut(k4 * NR)
            .zip(scales.par_chunks_mut(NR).zip(sums.par_chunks_mut(NR)))
            .enumerate()
            .for_each(|(p, (panel, (scales, sums)))| quantize(p, panel, scales, sums));
        Self { n, k, k4, panels, scales, sums }
    }

    pub fn n(&self) -> usize {
        self.n
    }

    pub fn k(&self) -> usize {
        self.k
    }

    /// `out` (m, n) = `a` (m, k) · Wᵀ + `bias`, with `a` quantized per row.
    ///
    /// # Safety
    /// `out` must be valid for m × n writes; all of them are written.
    pub unsafe fn matmul(&self, a: &[f32], m: usize, bias: Option<&[f32]>, out: *mut f32) {
        let (n, k, k4) = (self.n, self.k, self.k4);
        assert!(a.len() >= m * k && bias.is_none_or(|b| b.len() == n));
        let tiles = super::packed::tiles(m);
        let steps = k4 / 4;
        // Each tile: `steps` lines of 16 dwords (4 u8 of 4 k's per row), and its rows' scales
        // and zero points.
        let mut packed = Aligned::scratch(tiles.len() * steps * A_STRIDE);
        let mut row_scales = vec![0f32; tiles.len() * MR];
        let mut zero_points = vec![0i32; tiles.len() * MR];
        packed
            .as_mut_slice()
            .par_chunks_mut(steps * A_STRIDE)
            .zip(row_scales.par_chunks_mut(MR).zip(zero_points.par_chunks_mut(MR)))
            .zip(&tiles)
            .for_each(|((dst, (scales, zps)), &(row, rows))| {
                // SAFETY: f32 and u32 have the same size and alignment; every dword the kernel
                // reads is written below.
                let dst: &mut [u32] =
                    unsafe { std::slice::from_raw_parts_mut(dst.as_mut_ptr().cast(), dst.len()) };
                quantize_rows(&a[row * k..], k, rows, dst, scales, zps);
            });
        let (packed_rows, row_scales, zero_points) = (packed.as_slice(), &row_scales[..], &zero_points[..]);
        let vnni = vnni();
        let out_ptr = SendPtr(out);
        let count = n.div_ceil(NR);
        let blocks: Vec<&[(usize, usize)]> =
            tiles.chunks(super::packed::tiles_per_block(tiles.len())).collect();
        let group = super::packed::panels_per_task(count, blocks.len());
        let tasks: Vec<(usize, usize)> =
            (0..blocks.len()).flat_map(|b| (0..count.div_ceil(group)).map(move |g| (b, g))).collect();
        tasks.into_par_iter().for_each(|(b, g)| {
            for p in g * group..((g + 1) * group).min(count) {
                let cols = NR.min(n - p * NR);
                let mut bias_panel = [0f32; NR];
                if let Some(bias) = bias {
                    bias_panel[..cols].copy_from_slice(&bias[p * NR..p * NR + cols]);
                }
                let epilogue = Epilogue {
                    scales: &self.scales[p * NR..p * NR + NR],
                    sums: &self.sums[p * NR..p * NR + NR],
                    bias: &bias_panel,
                };
                let panel = &self.panels[p * k4 * NR..(p + 1) * k4 * NR];
                for (t, &(row, rows)) in blocks[b].iter().enumerate() {
                    let tile_index = b * blocks[0].len() + t;
                    let a_tile =
                        &packed_rows[tile_index * steps * A_STRIDE..(tile_index + 1) * steps * A_STRIDE];
                    let row_scale = &row_scales[tile_index * MR..tile_index * MR + MR];
                    let zero_point = &zero_points[tile_index * MR..tile_index * MR + MR];
                    // SAFETY: this task alone writes the columns of panel p of these rows.
                    let c = unsafe { out_ptr.get().add(row * n + p * NR) };
                    let tile = Tile { a: a_tile, b: panel, steps, rows, cols, row_scale, zero_point };
                    // SAFETY: `vnni` says the CPU has AVX-512 VNNI; `c` is valid for the tile.
                    unsafe {
                        if vnni {
                            tile_vnni(&tile, &epilogue, c, n);
                        } else {
                            tile_portable(&tile, &epilogue, c, n);
                        }
                    }
                }
            }
        });
        packed.recycle();
    }
}

super::multiversion! {
    /// One f32 panel (k steps of 32 columns) to s8 (⌈k/4⌉ steps of 32 columns × 4), with each
    /// column's scale and the sum of its quantized values.
    fn quantize_panel(src: &[f32], k: usize, dst: &mut [i8], scales: &mut [f32], sums: &mut [i32]) {
        let mut max = [0f32; NR];
        for step in src.chunks_exact(NR).take(k) {
            for (m, v) in max.iter_mut().zip(step) {
                *m = m.max(v.abs());
            }
        }
        let mut inverse = [0f32; NR];
        for j in 0..NR {
            scales[j] = if max[j] > 0.0 { max[j] / 127.0 } else { 1.0 };
            inverse[j] = 1.0 / scales[j];
        }
        let mut total = [0i32; NR];
        for (kk, step) in src.chunks_exact(NR).take(k).enumerate() {
            let (quad, lane) = (kk / 4, kk % 4);
            for j in 0..NR {
                let q = (step[j] * inverse[j]).round_ties_even().clamp(-127.0, 127.0) as i8;
                dst[quad * NR * 4 + j * 4 + lane] = q;
                total[j] += q as i32;
            }
        }
        sums.copy_from_slice(&total);
    }
}

/// Whether this CPU has AVX-512 with VNNI.
fn vnni() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        use std::sync::OnceLock;
        static VNNI: OnceLock<bool> = OnceLock::new();
        *VNNI.get_or_init(|| {
            std::arch::is_x86_feature_detected!("avx512f")
                && std::arch::is_x86_feature_detected!("avx512bw")
                && std::arch::is_x86_feature_detected!("avx512vnni")
        })
    }
    #[cfg(not(target_arch = "x86_64"))]
    false
}

/// Quantizes `rows` rows of `a` (row stride `k`) to u8 with a scale and zero point per row,
/// and lays them out for the microkernel: `dst[step * 16 + r]` holds row r's bytes for
/// k = 4·step..4·step+4. The range always includes 0, so zero stays exact.
fn quantize_rows(
    a: &[f32],
    k: usize,
    rows: usize,
    dst: &mut [u32],
    scales: &mut [f32],
    zero_points: &mut [i32],
) {
    #[cfg(target_arch = "x86_64")]
    if vnni() {
        // SAFETY: VNNI implies AVX-512F and BW.
        return unsafe { quantize_rows_avx512(a, k, rows, dst, scales, zero_points) };
    }
    quantize_rows_portable(a, k, rows, dst, scales, zero_points)
}

/// The scale and zero point of a row whose values lie in [lo, hi] (lo ≤ 0 ≤ hi).
fn scale_and_zero_point(lo: f32, hi: f32) -> (f32, f32) {
    let scale = if hi > lo { (hi - lo) / 255.0 } else { 1.0 };
    (scale, (-lo / scale).round_ties_even().clamp(0.0, 255.0))
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw")]
unsafe fn quantize_rows_avx512(
    a: &[f32],
    k: usize,
    rows: usize,
    dst: &mut [u32],
    scales: &mut [f32],
    zero_points: &mut [i32],
) {
    use std::arch::x86_64::*;
    assert!(a.len() >= rows * k && dst.len() >= k.div_ceil(4) * A_STRIDE);
    let mask = |i: usize| -> __mmask16 {
        let n = 16.min(k - i);
        if n == 16 {
            0xFFFF
        } else {
            ((1u32 << n) - 1) as u16
        }
    };
    for r in 0..rows {
        let row = a.as_ptr().add(r * k);
        let (mut lo, mut hi) = (_mm512_setzero_ps(), _mm512_setzero_ps());
        for i in (0..k).step_by(16) {
            let v = _mm512_maskz_loadu_ps(mask(i), row.add(i));
            lo = _mm512_min_ps(lo, v);
            hi = _mm512_max_ps(hi, v);
        }
        let (scale, zero_point) = scale_and_zero_point(_mm512_reduce_min_ps(lo), _mm512_reduce_max_ps(hi));
        scales[r] = scale;
        zero_points[r] = zero_point as i32;
        let (inverse, zp) = (_mm512_set1_ps(1.0 / scale), _mm512_set1_ps(zero_point));
        for i in (0..k).step_by(16) {
            let v = _mm512_maskz_loadu_ps(mask(i), row.add(i));
            // Rounds to nearest even (the default mode), then saturates to 0..=255.
            let q = _mm512_cvtps_epi32(_mm512_fmadd_ps(v, inverse, zp));
            let q = _mm512_max_epi32(q, _mm512_setzero_si512());
            let bytes: [u32; 4] = std::mem::transmute(_mm512_cvtusepi32_epi8(q));
            for (j, &quad) in bytes.iter().enumerate().take(16.min(k - i).div_ceil(4)) {
                dst[(i / 4 + j) * A_STRIDE + r] = quad;
            }
        }
    }
}

super::multiversion! {
    fn quantize_rows_portable(a: &[f32], k: usize, rows: usize, dst: &mut [u32], scales: &mut [f32], zero_points: &mut [i32]) {
        let mut bytes = vec![0u8; k.div_ceil(4) * 4];
        for r in 0..rows {
            let row = &a[r * k..r * k + k];
            // 16 lanes of minima and maxima, so that the reduction vectorises.
            let (mut lo, mut hi) = ([0f32; 16], [0f32; 16]);
            for chunk in row.chunks(16) {
                for (i, &v) in chunk.iter().enumerate() {
                    lo[i] = lo[i].min(v);
                    hi[i] = hi[i].max(v);
                }
            }
            let lo = lo.iter().fold(0f32, |a, &b| a.min(b));
            let hi = hi.iter().fold(0f32, |a, &b| a.max(b));
            let (scale, zero_point) = scale_and_zero_point(lo, hi);
            let inverse = 1.0 / scale;
            scales[r] = scale;
            zero_points[r] = zero_point as i32;
            for (byte, &v) in bytes.iter_mut().zip(row) {
                *byte = (v * inverse + zero_point).round_ties_even().clamp(0.0, 255.0) as u8;
            }
            // Bytes past k multiply zero weights: whatever they hold.
            for (step, quad) in bytes.chunks_exact(4).enumerate() {
                dst[step * A_STRIDE + r] = u32::from_le_bytes([quad[0], quad[1], quad[2], quad[3]]);
            }
        }
    }
}

/// One tile's operands: packed input steps, the weight panel, and the rows' quantization.
struct Tile<'a> {
    a: &'a [f32],
    b: &'a [i8],
    steps: usize,
    rows: usize,
    cols: usize,
    row_scale: &'a [f32],
    zero_point: &'a [i32],
}

/// The per-column part of the scale back to f32.
struct Epilogue<'a> {
    scales: &'a [f32],
    sums: &'a [i32],
    bias: &'a [f32],
}

/// Dispatches a tile to the VNNI microkernel compiled for its height.
#[cfg(target_arch = "x86_64")]
unsafe fn tile_vnni(t: &Tile, e: &Epilogue, c: *mut f32, ldc: usize) {
    macro_rules! rows {
        ($($r:literal)*) => {
            match t.rows {
                $($r => tile_vnni_rows::<$r>(t, e, c, ldc),)*
                _ => unreachable!("tiles have 1 to {MR} rows"),
            }
        };
    }
    rows!(1 2 3 4 5 6 7 8 9 10 11 12 13 14)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
unsafe fn tile_vnni_rows<const R: usize>(t: &Tile, e: &Epilogue, c: *mut f32, ldc: usize) {
    use std::arch::x86_64::*;
    let (a, b) = (t.a.as_ptr().cast::<i32>(), t.b.as_ptr());
    let mut lo = [_mm512_setzero_si512(); R];
    let mut hi = [_mm512_setzero_si512(); R];
    for step in 0..t.steps {
        _mm_prefetch::<_MM_HINT_T0>(b.add((step + PREFETCH) * NR * 4).cast());
        _mm_prefetch::<_MM_HINT_T0>(b.add((step + PREFETCH) * NR * 4 + 64).cast());
        let b0 = _mm512_loadu_si512(b.add(step * NR * 4).cast());
        let b1 = _mm512_loadu_si512(b.add(step * NR * 4 + 64).cast());
        let a = a.add(step * A_STRIDE);
        for r in 0..R {
            let x = _mm512_set1_epi32(*a.add(r));
            lo[r] = _mm512_dpbusd_epi32(lo[r], x, b0);
            hi[r] = _mm512_dpbusd_epi32(hi[r], x, b1);
        }
    }
    let cols = t.cols;
    let mask_lo: __mmask16 = if cols >= 16 { 0xFFFF } else { ((1u32 << cols) - 1) as u16 };
    let mask_hi: __mmask16 = if cols <= 16 { 0 } else { ((1u32 << (cols - 16)) - 1) as u16 };
    let load = |s: &[f32], o| _mm512_loadu_ps(s.as_ptr().add(o));
    let (scale_lo, scale_hi) = (load(e.scales, 0), load(e.scales, 16));
    let (bias_lo, bias_hi) = (load(e.bias, 0), load(e.bias, 16));
    let (sum_lo, sum_hi) =
        (_mm512_loadu_si512(e.sums.as_ptr().cast()), _mm512_loadu_si512(e.sums.as_ptr().add(16).cast()));
    for r in 0..R {
        let zp = _mm512_set1_epi32(t.zero_point[r]);
        let s = _mm512_set1_ps(t.row_scale[r]);
        let out = |acc, sum, scale, bias| {
            let exact = _mm512_sub_epi32(acc, _mm512_mullo_epi32(zp, sum));
            _mm512_fmadd_ps(_mm512_cvtepi32_ps(exact), _mm512_mul_ps(s, scale), bias)
        };
        _mm512_mask_storeu_ps(c.add(r * ldc), mask_lo, out(lo[r], sum_lo, scale_lo, bias_lo));
        _mm512_mask_storeu_ps(c.add(r * ldc + 16), mask_hi, out(hi[r], sum_hi, scale_hi, bias_hi));
    }
}

#[cfg(not(target_arch = "x86_64"))]
unsafe fn tile_vnni(_: &Tile, _: &Epilogue, _: *mut f32, _: usize) {
    unreachable!("VNNI is x86-64 only")
}

/// The same tile without VNNI: i32 sums of widened products, which the compiler vectorises.
unsafe fn tile_portable(t: &Tile, e: &Epilogue, c: *mut f32, ldc: usize) {
    let a: &[u32] = std::slice::from_raw_parts(t.a.as_ptr().cast(), t.a.len());
    let mut acc = [[0i32; NR]; MR];
    dot_panel(a, t.b, t.steps, &mut acc);
    for (r, row) in acc.iter().enumerate().take(t.rows) {
        for (j, &sum) in row.iter().enumerate().take(t.cols) {
            let exact = sum - t.zero_point[r] * e.sums[j];
            *c.add(r * ldc + j) = exact as f32 * (t.row_scale[r] * e.scales[j]) + e.bias[j];
        }
    }
}

super::multiversion! {
    fn dot_panel(a: &[u32], b: &[i8], steps: usize, acc: &mut [[i32; NR]; MR]) {
        for step in 0..steps {
            let b = &b[step * NR * 4..step * NR * 4 + NR * 4];
            for (r, acc) in acc.iter_mut().enumerate() {
                let x = a[step * A_STRIDE + r].to_le_bytes();
                for (j, acc) in acc.iter_mut().enumerate() {
                    let w = &b[j * 4..j * 4 + 4];
                    *acc += x[0] as i32 * w[0] as i32
                        + x[1] as i32 * w[1] as i32
                        + x[2] as i32 * w[2] as i32
                        + x[3] as i32 * w[3] as i32;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn int8_matmul_is_close_to_f32() {
        let mut seed = 11u64;
        let mut next = move || {
            seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            ((seed >> 33) as f32 / (1u64 << 31) as f32) - 0.5
        };
        for (m, k, n) in [(1, 4, 1), (13, 17, 33), (29, 64, 96), (100, 130, 31), (15, 3, 70)] {
            let a: Vec<f32> = (0..m * k).map(|i| if i % 7 == 0 { 0.0 } else { next() + 0.2 }).collect();
            let w: Vec<f32> = (0..n * k).map(|_| next()).collect();
            let bias: Vec<f32> = (0..n).map(|_| next()).collect();
            let packed = PackedI8::new(&w, n, k);
            let mut out = vec![f32::NAN; m * n];
            unsafe { packed.matmul(&a, m, Some(&bias), out.as_mut_ptr()) };
            for i in 0..m {
                for j in 0..n {
                    let want: f32 = bias[j] + (0..k).map(|kk| a[i * k + kk] * w[j * k + kk]).sum::<f32>();
                    // Each product is off by at most half a step of each operand.
                    let bound = 0.02 * (k as f32).sqrt() + 1e-3;
                    assert!(
                        (out[i * n + j] - want).abs() < bound,
                        "({m},{k},{n}) at ({i},{j}): {} vs {want}",
                        out[i * n + j]
                    );
                }
            }
        }
    }

    #[test]
    fn the_portable_kernel_agrees_with_vnni_exactly() {
        if !vnni() {
            return;
        }
        let (m, k, n) = (20, 40, 40);
        let a: Vec<f32> = (0..m * k).map(|i| ((i * 37) % 101) as f32 / 50.0 - 1.0).collect();
        let w: Vec<f32> = (0..n * k).map(|i| ((i * 53) % 97) as f32 / 48.0 - 1.0).collect();
        let packed = PackedI8::new(&w, n, k);
        let mut fast = vec![0f32; m * n];
        unsafe { packed.matmul(&a, m, None, fast.as_mut_ptr()) };
        // The same tiles through the portable kernel.
        let steps = packed.k4 / 4;
        let mut slow = vec![0f32; m * n];
        for t in 0..m.div_ceil(MR) {
            let rows = MR.min(m - t * MR);
            let mut dst = vec![0u32; steps * A_STRIDE];
            let (mut scales, mut zps) = ([0f32; MR], [0i32; MR]);
            quantize_rows(&a[t * MR * k..], k, rows, &mut dst, &mut scales, &mut zps);
            let a_tile: Vec<f32> = dst.iter().map(|&d| f32::from_bits(d)).collect();
            for p in 0..n.div_ceil(NR) {
                let cols = NR.min(n - p * NR);
                let e = Epilogue {
                    scales: &packed.scales[p * NR..p * NR + NR],
                    sums: &packed.sums[p * NR..p * NR + NR],
                    bias: &[0.0; NR],
                };
                let panel = &packed.panels[p * packed.k4 * NR..(p + 1) * packed.k4 * NR];
                let tile =
                    Tile { a: &a_tile, b: panel, steps, rows, cols, row_scale: &scales, zero_point: &zps };
                unsafe { tile_portable(&tile, &e, slow.as_mut_ptr().add(t * MR * n + p * NR), n) };
            }
        }
        for (x, y) in fast.iter().zip(&slow) {
            assert!((x - y).abs() <= 1e-5 * x.abs().max(1.0), "{x} vs {y}");
        }
    }
}

#[cfg(test)]
mod from_packed {
    #[test]
    fn quantizing_packed_weights_equals_quantizing_dense_ones() {
        let (n, k) = (70, 45);
        let w: Vec<f32> = (0..n * k).map(|i| ((i * 31) % 89) as f32 / 40.0 - 1.1).collect();
        let Some(packed) = super::super::packed::PackedF32::new(&w, n, k) else { return };
        let (a, b) = (super::PackedI8::new(&w, n, k), super::PackedI8::from_f32(&packed));
        assert!(
            a.panels == b.panels && a.scales == b.scales && a.sums == b.sums,
            "the two quantizations differ"
        );
    }
}

#[cfg(test)]
mod speed {
    use candle_core::quantized::{GgmlDType, QMatMul, QTensor};
    use candle_core::{Device, Module, Tensor};

    /// The int8 candidates side by side, interleaved, best of 5 rounds on 2 threads (this VM is
    /// noisy): candle's QMatMul with Q8_0 blocks, our VNNI kernel, and our f32 kernel. Figures are
    /// effective GFLOP/s (2·m·n·k over the time).
    #[test]
    #[ignore = "a timing probe, run by hand"]
    fn candidates() {
        let pool = rayon::ThreadPoolBuilder::new().num_threads(2).build().unwrap();
        for (m, k, n) in [(800, 768, 2304), (800, 768, 3072), (800, 3072, 768), (16, 768, 2304)] {
            let a: Vec<f32> = (0..m * k).map(|i| ((i * 7) % 13) as f32 / 13.0 - 0.5).collect();
            let w: Vec<f32> = (0..n * k).map(|i| ((i * 5) % 11) as f32 / 11.0 - 0.5).collect();
            let ours = super::PackedI8::new(&w, n, k);
            let f32_packed = super::super::packed::PackedF32::new(&w, n, k).unwrap();
            let weight = Tensor::from_vec(w.clone(), (n, k), &Device::Cpu).unwrap();
            let candle = QMatMul::from_qtensor(QTensor::quantize(&weight, GgmlDType::Q8_0).unwrap()).unwrap();
            let x = Tensor::from_vec(a.clone(), (m, k), &Device::Cpu).unwrap();
            let mut out = vec![0f32; m * n];
            let flop = 2.0 * (m * n * k) as f64;
            let time = |f: &mut dyn FnMut()| {
                let t = std::time::Instant::now();
                for _ in 0..5 {
                    f();
                }
                flop * 5.0 / t.elapsed().as_secs_f64() / 1e9
            };
            let mut best = [0f64; 3];
            for _ in 0..5 {
                best[0] = best[0].max(time(&mut || pool.install(|| candle.forward(&x).map(drop).unwrap())));
                best[1] = best[1].max(time(&mut || {
                    pool.install(|| unsafe { ours.matmul(&a, m, None, out.as_mut_ptr()) })
                }));
                best[2] = best[2].max(time(&mut || {
                    pool.install(|| unsafe { f32_packed.matmul(&a, m, None, out.as_mut_ptr()) })
                }));
            }
            println!(
                "{m}x{k}x{n}: candle QMatMul Q8_0 {:.0}, ours int8 (VNNI) {:.0}, ours f32 {:.0} effective GFLOP/s",
                best[0], best[1], best[2]
            );
        }
    }
}
