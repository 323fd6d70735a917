//! An f32 GEMM for fixed weights on AVX-512: `x Wᵀ + b` with W packed once, at load, into
//! panels of 32 output columns laid out k-major, so the microkernel streams each panel in order
//! and keeps a 14 × 32 tile of the output in 28 registers. General-purpose GEMMs repack the
//! weights on every call and reached about 60% of this CPU's FMA peak on the encoder's shapes.

use rayon::prelude::*;

use super::SendPtr;

/// Output columns per panel: two 16-lane vectors.
const NR: usize = 32;
/// Rows per microkernel call: 14 × 2 accumulators, plus 2 weight vectors and 1 broadcast, fill
/// 31 of the 32 vector registers.
const MR: usize = 14;
/// Depth of one pass over the weights: up to 768 (base-size hidden) in one go.
const KC: usize = 768;
/// Weight steps (of 128 bytes) to prefetch ahead of use.
const PREFETCH: usize = 24;
/// Tiles of one task. An input of up to 16 tiles (224 rows) is one block, so each weight is read
/// once: short inputs are bound by how fast the weights stream in. Longer inputs take blocks of 4
/// tiles, whose packed input stays in L1 and L2 while the task streams a group of panels.
pub(crate) fn tiles_per_block(tiles: usize) -> usize {
    if tiles <= 16 {
        tiles.max(1)
    } else {
        4
    }
}

/// Panels of one task: 8 (256 columns) when the rows give enough tasks, else few enough that the
/// threads get 8 tasks each.
pub(crate) fn panels_per_task(panels: usize, blocks: usize) -> usize {
    if blocks > 1 {
        8
    } else {
        panels.div_ceil(8 * rayon::current_num_threads()).max(1)
    }
}

/// Splits `m` rows into the fewest tiles of at most MR rows, of balanced heights (16 rows make
/// two tiles of 8, not 14 and 2), as (first row, rows).
pub(crate) fn tiles(m: usize) -> Vec<(usize, usize)> {
    let count = m.div_ceil(MR);
    let (base, extra) = (m / count.max(1), m % count.max(1));
    let mut start = 0;
    (0..count)
        .map(|t| {
            let rows = base + usize::from(t < extra);
            start += rows;
            (start - rows, rows)
        })
        .collect()
}

/// Floats per packed input step: MR rows padded to one 64-byte cache line.
const A_STRIDE: usize = 16;

/// A buffer of f32 whose first element sits on a 64-byte boundary, so that vector loads of
/// whole lines never straddle two (large `Vec`s start 16 bytes into a page).
#[derive(Debug)]
pub(crate) struct Aligned {
    data: Vec<f32>,
    offset: usize,
    len: usize,
}

impl Aligned {
    pub fn zeros(len: usize) -> Self {
        Self::from_vec(vec![0f32; len + 16], len)
    }

    /// `len` floats in `data`, which must hold at least `len + 16`.
    fn from_vec(data: Vec<f32>, len: usize) -> Self {
        let offset = data.as_ptr().align_offset(64).min(15);
        Self { data, offset, len }
    }

    /// A buffer of `len` floats from the pool of spare ones, contents unspecified (every use
    /// overwrites what it reads); [`Aligned::recycle`] gives it back.
    pub fn scratch(len: usize) -> Self {
        let spare = SPARE.lock().ok().and_then(|mut spare| {
            let i = spare.iter().position(|v| v.len() >= len + 16)?;
            Some(spare.swap_remove(i))
        });
        Self::from_vec(spare.unwrap_or_else(|| vec![0f32; len + 16]), len)
    }

    pub fn recycle(self) {
        if let Ok(mut spare) = SPARE.lock() {
            if spare.len() < 8 {
                spare.push(self.data);
            }
        }
    }

    pub fn as_slice(&self) -> &[f32] {
        &self.data[self.offset..self.offset + self.len]
    }

    pub fn as_mut_slice(&mut self) -> &mut [f32] {
        &mut self.data[self.offset..self.offset + self.len]
    }
}

/// Packing buffers between calls: fresh multi-megabyte allocations cost page faults and zeroing.
static SPARE: std::sync::Mutex<Vec<Vec<f32>>> = std::sync::Mutex::new(Vec::new());

/// A weight (n, k) packed for [`PackedF32::matmul`]: panel p holds columns 32p..32p+32 as
/// k rows of 32, zero-padded past n.
#[derive(Debug)]
pub(crate) struct PackedF32 {
    n: usize,
    k: usize,
    panels: Aligned,
}

impl PackedF32 {
    /// Packs `w` (n, k) row-major; `None` where this CPU lacks AVX-512.
    pub fn new(w: &[f32], n: usize, k: usize) -> Option<Self> {
        if super::level() != super::Level::Avx512 || w.len() != n * k {
            return None;
        }
        let count = n.div_ceil(NR);
        let mut panels = Aligned::zeros(count * k * NR);
        panels.as_mut_slice().par_chunks_mut(k * NR).enumerate().for_each(|(p, panel)| {
            for j in 0..NR.min(n - p * NR) {
                let row = &w[(p * NR + j) * k..(p * NR + j + 1) * k];
                for (kk, &v) in row.iter().enumerate() {
                    panel[kk * NR + j] = v;
                }
            }
        });
        Some(Self { n, k, panels })
    }

    pub fn n(&self) -> usize {
        self.n
    }

    /// Panel `p`: k steps of 32 columns.
    pub fn panel(&self, p: usize) -> &[f32] {
        &self.panels.as_slice()[p * self.k * NR..(p + 1) * self.k * NR]
    }

    pub fn k(&self) -> usize {
        self.k
    }

    /// `out` (m, n) = `a` (m, k) · Wᵀ + `bias`.
    ///
    /// # Safety
    /// `out` must be valid for m × n writes; all of them are written.
    pub unsafe fn matmul(&self, a: &[f32], m: usize, bias: Option<&[f32]>, out: *mut f32) {
        let (n, k) = (self.n, self.k);
        assert!(a.len() >= m * k && bias.is_none_or(|b| b.len() == n));
        let tiles = tiles(m);
        // The input, packed once for every task, tile by tile, k-major.
        let mut packed_buffer = Aligned::scratch(tiles.len() * A_STRIDE * k);
        packed_buffer.as_mut_slice().par_chunks_mut(A_STRIDE * k).zip(&tiles).for_each(
            |(dst, &(row, rows))| {
                // SAFETY: packed weights, and so this call, exist only where AVX-512 was detected.
                unsafe { pack_rows(&a[row * k..], k, rows, dst) };
            },
        );
        let packed = packed_buffer.as_slice();
        let depths: Vec<(usize, usize)> = (0..k).step_by(KC).map(|k0| (k0, KC.min(k - k0))).collect();
        let blocks: Vec<&[(usize, usize)]> =
            tiles.chunks(super::packed::tiles_per_block(tiles.len())).collect();
        // Panels per task: enough tasks (8 per thread) to balance the threads.
        let count = n.div_ceil(NR);
        let group = super::packed::panels_per_task(count, blocks.len());
        let tasks: Vec<(usize, usize)> =
            (0..blocks.len()).flat_map(|b| (0..count.div_ceil(group)).map(move |g| (b, g))).collect();
        let out_ptr = SendPtr(out);
        tasks.into_par_iter().for_each(|(b, g)| {
            let first_tile = b * blocks[0].len();
            for &(k0, depth) in &depths {
                for p in g * group..((g + 1) * group).min(count) {
                    let cols = NR.min(n - p * NR);
                    let mut start = [0f32; NR];
                    if let (Some(bias), 0) = (bias, k0) {
                        start[..cols].copy_from_slice(&bias[p * NR..p * NR + cols]);
                    }
                    let panel = &self.panels.as_slice()[(p * k + k0) * NR..(p * k + k0 + depth) * NR];
                    for (t, &(row, rows)) in blocks[b].iter().enumerate() {
                        let tile = first_tile + t;
                        let a_tile = &packed[(tile * k + k0) * A_STRIDE..(tile * k + k0 + depth) * A_STRIDE];
                        // SAFETY: AVX-512 was detected when packing; this task alone writes the
                        // columns of panel p of these rows.
                        unsafe {
                            microkernel(
                                rows,
                                a_tile.as_ptr(),
                                panel.as_ptr(),
                                depth,
                                start.as_ptr(),
                                k0 > 0,
                                out_ptr.get().add(row * n + p * NR),
                                n,
                                cols,
                            );
                        }
                    }
                }
            }
        });
        packed_buffer.recycle();
    }
}

/// Copies one tile of `rows` (≤ MR) rows of `a` (row stride `k`) into `dst` k-major, one line
/// per step (`dst[kk * A_STRIDE + r]`), rows past `rows` zero: 16 × 16 blocks transposed in
/// registers.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn pack_rows(a: &[f32], k: usize, rows: usize, dst: &mut [f32]) {
    use std::arch::x86_64::*;
    assert!(rows <= MR && a.len() >= (rows - 1) * k + k && dst.len() >= k * A_STRIDE);
    for k0 in (0..k).step_by(16) {
        let width = 16.min(k - k0);
        let mask: __mmask16 = if width == 16 { 0xFFFF } else { ((1u32 << width) - 1) as u16 };
        let mut block = [_mm512_setzero_ps(); 16];
        for (r, v) in block.iter_mut().enumerate().take(rows) {
            *v = _mm512_maskz_loadu_ps(mask, a.as_ptr().add(r * k + k0));
        }
        let columns = transpose16(block);
        for (j, column) in columns.iter().enumerate().take(width) {
            _mm512_storeu_ps(dst.as_mut_ptr().add((k0 + j) * A_STRIDE), *column);
        }
    }
}

#[cfg(not(target_arch = "x86_64"))]
unsafe fn pack_rows(_: &[f32], _: usize, _: usize, _: &mut [f32]) {
    unreachable!("packed weights exist only on AVX-512")
}

/// The transpose of a 16 × 16 block held as 16 row vectors: unpack pairs of rows, then pairs of
/// pairs, then exchange 128-bit lanes twice.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
fn transpose16(r: [std::arch::x86_64::__m512; 16]) -> [std::arch::x86_64::__m512; 16] {
    use std::arch::x86_64::*;
    let pd = _mm512_castps_pd;
    let ps = _mm512_castpd_ps;
    let mut t = [_mm512_setzero_ps(); 16];
    for i in 0..8 {
        t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
        t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
    }
    let mut u = [_mm512_setzero_ps(); 16];
    for g in 0..4 {
        let b = 4 * g;
        u[b] = ps(_mm512_unpacklo_pd(pd(t[b]), pd(t[b + 2])));
        u[b + 1] = ps(_mm512_unpackhi_pd(pd(t[b]), pd(t[b + 2])));
        u[b + 2] = ps(_mm512_unpacklo_pd(pd(t[b + 1]), pd(t[b + 3])));
        u[b + 3] = ps(_mm512_unpackhi_pd(pd(t[b + 1]), pd(t[b + 3])));
    }
    let mut v = [_mm512_setzero_ps(); 16];
    for h in 0..2 {
        let b = 8 * h;
        for i in 0..4 {
            v[b + i] = _mm512_shuffle_f32x4::<0x88>(u[b + i], u[b + 4 + i]);
            v[b + 4 + i] = _mm512_shuffle_f32x4::<0xDD>(u[b + i], u[b + 4 + i]);
        }
    }
    let mut w = [_mm512_setzero_ps(); 16];
    for i in 0..8 {
        w[i] = _mm512_shuffle_f32x4::<0x88>(v[i], v[8 + i]);
        w[8 + i] = _mm512_shuffle_f32x4::<0xDD>(v[i], v[8 + i]);
    }
    w
}

/// One tile: `rows` (≤ 14) rows of packed input times `depth` rows of one weight panel, added to
/// `start` (the bias) or, with `accumulate`, to what `c` holds; the first `cols` columns are written.
#[allow(clippy::too_many_arguments)]
unsafe fn microkernel(
    rows: usize,
    a: *const f32,
    b: *const f32,
    depth: usize,
    start: *const f32,
    accumulate: bool,
    c: *mut f32,
    ldc: usize,
    cols: usize,
) {
    #[cfg(target_arch = "x86_64")]
    {
        macro_rules! rows {
            ($($r:literal)*) => {
                match rows {
                    $($r => tile_avx512::<$r>(a, b, depth, start, accumulate, c, ldc, cols),)*
                    _ => unreachable!("tiles have 1 to {MR} rows"),
                }
            };
        }
        rows!(1 2 3 4 5 6 7 8 9 10 11 12 13 14)
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = (rows, a, b, depth, start, accumulate, c, ldc, cols);
        unreachable!("packed weights exist only on AVX-512")
    }
}

/// The microkernel for tiles of `R` rows: 2R accumulators in registers for the whole depth.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
#[allow(clippy::too_many_arguments)]
unsafe fn tile_avx512<const R: usize>(
    a: *const f32,
    b: *const f32,
    depth: usize,
    start: *const f32,
    accumulate: bool,
    c: *mut f32,
    ldc: usize,
    cols: usize,
) {
    use std::arch::x86_64::*;
    let mask_lo: __mmask16 = if cols >= 16 { 0xFFFF } else { ((1u32 << cols) - 1) as u16 };
    let mask_hi: __mmask16 = if cols <= 16 { 0 } else { ((1u32 << (cols - 16)) - 1) as u16 };
    let (start_lo, start_hi) = (_mm512_loadu_ps(start), _mm512_loadu_ps(start.add(16)));
    let mut lo = [start_lo; R];
    let mut hi = [start_hi; R];
    if accumulate {
        for r in 0..R {
            lo[r] = _mm512_maskz_loadu_ps(mask_lo, c.add(r * ldc));
            hi[r] = _mm512_maskz_loadu_ps(mask_hi, c.add(r * ldc + 16));
        }
    }
    for kk in 0..depth {
        // Short tiles stream the weights faster than memory delivers them: ask for them early.
        _mm_prefetch::<_MM_HINT_T0>(b.add((kk + PREFETCH) * NR).cast());
        _mm_prefetch::<_MM_HINT_T0>(b.add((kk + PREFETCH) * NR + 16).cast());
        let b0 = _mm512_loadu_ps(b.add(kk * NR));
        let b1 = _mm512_loadu_ps(b.add(kk * NR + 16));
        let a = a.add(kk * A_STRIDE);
        for r in 0..R {
            let x = _mm512_set1_ps(*a.add(r));
            lo[r] = _mm512_fmadd_ps(x, b0, lo[r]);
            hi[r] = _mm512_fmadd_ps(x, b1, hi[r]);
        }
    }
    for r in 0..R {
        _mm512_mask_storeu_ps(c.add(r * ldc), mask_lo, lo[r]);
        _mm512_mask_storeu_ps(c.add(r * ldc + 16), mask_hi, hi[r]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn packing_transposes_tiles() {
        if super::super::level() != super::super::Level::Avx512 {
            return;
        }
        for (rows, k) in [(14, 40), (3, 16), (1, 5), (14, 33)] {
            let a: Vec<f32> = (0..rows * k).map(|i| i as f32).collect();
            let mut dst = vec![f32::NAN; k * A_STRIDE];
            unsafe { pack_rows(&a, k, rows, &mut dst) };
            for kk in 0..k {
                for r in 0..A_STRIDE {
                    let want = if r < rows { a[r * k + kk] } else { 0.0 };
                    assert_eq!(dst[kk * A_STRIDE + r], want, "rows {rows}, k {k}: ({kk}, {r})");
                }
            }
        }
    }

    #[test]
    fn matches_a_plain_matmul_on_awkward_shapes() {
        let mut seed = 7u64;
        let mut next = move || {
            seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            ((seed >> 33) as f32 / (1u64 << 31) as f32) - 0.5
        };
        for (m, k, n) in [(1, 3, 1), (13, 17, 33), (29, 64, 96), (200, 40, 31), (15, 1, 70)] {
            let a: Vec<f32> = (0..m * k).map(|_| next()).collect();
            let w: Vec<f32> = (0..n * k).map(|_| next()).collect();
            let bias: Vec<f32> = (0..n).map(|_| next()).collect();
            let Some(packed) = PackedF32::new(&w, n, k) else { return };
            let mut out = vec![f32::NAN; m * n];
            unsafe { packed.matmul(&a, m, Some(&bias), out.as_mut_ptr()) };
            for i in 0..m {
                for j in 0..n {
                    let want: f32 = bias[j] + (0..k).map(|kk| a[i * k + kk] * w[j * k + kk]).sum::<f32>();
                    assert!((out[i * n + j] - want).abs() < 1e-4, "({m},{k},{n}) at ({i},{j})");
                }
            }
        }
    }
}

#[cfg(test)]
mod speed {
    use super::*;

    /// Best-of-rounds GFLOP/s of ours against the gemm crate, interleaved (this VM is noisy).
    #[test]
    #[ignore = "a timing probe, run by hand"]
    fn gflops() {
        let pool = rayon::ThreadPoolBuilder::new().num_threads(2).build().unwrap();
        for (m, k, n) in
            [(800, 768, 2304), (800, 768, 3072), (800, 3072, 768), (800, 768, 768), (16, 768, 2304)]
        {
            let a = vec![0.5f32; m * k];
            let w = vec![0.25f32; n * k];
            let packed = PackedF32::new(&w, n, k).unwrap();
            let mut out = vec![0f32; m * n];
            let flop = 2.0 * (m * n * k) as f64;
            let time = |f: &mut dyn FnMut()| {
                let t = std::time::Instant::now();
                for _ in 0..10 {
                    f();
                }
                flop * 10.0 / t.elapsed().as_secs_f64() / 1e9
            };
            let pool1 = rayon::ThreadPoolBuilder::new().num_threads(1).build().unwrap();
            let mut best = [0f64; 4];
            for _ in 0..5 {
                best[0] = best[0].max(time(&mut || {
                    pool1.install(|| unsafe { packed.matmul(&a, m, None, out.as_mut_ptr()) })
                }));
                best[1] = best[1].max(time(&mut || {
                    pool.install(|| unsafe { packed.matmul(&a, m, None, out.as_mut_ptr()) })
                }));
                best[2] = best[2].max(time(&mut || {
                    pool1.install(|| crate::kernels::linear::gemm(&a, &w, &mut out, m, k, n, false))
                }));
                best[3] = best[3].max(time(&mut || {
                    pool.install(|| crate::kernels::linear::gemm(&a, &w, &mut out, m, k, n, false))
                }));
            }
            let (theirs, ours) = (
                best[3],
                vec![format!(
                    "1 thread {:.0}, 2 threads {:.0}, gemm crate 1 thread {:.0}",
                    best[0], best[1], best[2]
                )],
            );
            println!("{m}x{k}x{n}: gemm crate {theirs:.0}; packed {}", ours.join(", "));
        }
    }
}

#[cfg(test)]
mod tile_speed {
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx512f")]
    unsafe fn probe(a: *const f32, b: *const f32, depth: usize, c: *mut f32) {
        use std::arch::x86_64::*;
        let mut lo = [_mm512_setzero_ps(); 14];
        let mut hi = [_mm512_setzero_ps(); 14];
        for kk in 0..depth {
            let b0 = _mm512_loadu_ps(b.add(kk * 32));
            let b1 = _mm512_loadu_ps(b.add(kk * 32 + 16));
            let a = a.add(kk * 14);
            for r in 0..14 {
                let x = _mm512_set1_ps(*a.add(r));
                lo[r] = _mm512_fmadd_ps(x, b0, lo[r]);
                hi[r] = _mm512_fmadd_ps(x, b1, hi[r]);
            }
        }
        for r in 0..14 {
            _mm512_storeu_ps(c.add(r * 32), lo[r]);
            _mm512_storeu_ps(c.add(r * 32 + 16), hi[r]);
        }
    }

    #[test]
    #[ignore = "a timing probe, run by hand"]
    fn tile_in_l1() {
        let (depth, iters) = (192, 100_000);
        let a = vec![0.5f32; super::A_STRIDE * depth];
        let b = vec![0.25f32; depth * super::NR];
        let start = [0f32; super::NR];
        let mut c = vec![0f32; super::MR * super::NR];
        let flop = 2.0 * (super::MR * super::NR * depth * iters) as f64;
        let (mut ours, mut bare) = (0f64, 0f64);
        for _ in 0..5 {
            let t = std::time::Instant::now();
            for _ in 0..iters {
                unsafe {
                    super::microkernel(
                        super::MR,
                        a.as_ptr(),
                        b.as_ptr(),
                        depth,
                        start.as_ptr(),
                        true,
                        c.as_mut_ptr(),
                        super::NR,
                        super::NR,
                    )
                };
            }
            ours = ours.max(flop / t.elapsed().as_secs_f64() / 1e9);
            let t = std::time::Instant::now();
            for _ in 0..iters {
                unsafe { probe(a.as_ptr(), b.as_ptr(), depth, c.as_mut_ptr()) };
            }
            bare = bare.max(flop / t.elapsed().as_secs_f64() / 1e9);
        }
        println!("tile in L1: kernel {ours:.0} GFLOP/s, bare loop {bare:.0}");
    }
}
