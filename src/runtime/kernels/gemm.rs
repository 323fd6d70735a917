//! The one GEMM driver of the fused engine: `c (m, n) = a (m, k) · Bᵀ`, started from zero, a bias
//! or what `c` holds. B is packed into panels of `nr` output columns laid out k-major (at load for
//! weights, once per sequence and head for attention's keys and values), so that a microkernel
//! streams each panel in order while an `mr × nr` tile of `c` stays in registers.
//!
//! The driver cuts the work once for every element type and instruction set: rows into tiles of
//! at most `mr` (packed k-major, so each step of the kernel reads one line), tiles into blocks,
//! panels into groups, depth into chunks, and (block, group) tasks over the threads. The
//! microkernels, one per [`Level`] and precision, live in `tile_f32`, `tile_int8` and `tile_bf16`,
//! and the AMX unit's tile program in `amx`.

use std::ops::Range;

use rayon::prelude::*;

use super::layout::{row_dwords, Aligned, Input};
use super::tile_bf16::{offset, to_bf16, Bf16Kernel, Bf16Tile};
use super::tile_f32::{F32Kernel, F32Tile, Weight};
use super::tile_int8::{I8Kernel, I8Tile};
use super::{multiversion, Level, SendPtr};

/// Depth of one pass over f32 weights: up to 768 (base-size hidden) in one go.
const KC: usize = 768;

/// Splits `m` rows into the fewest tiles of at most `mr` rows, of balanced heights (16 rows in
/// tiles of 14 make two of 8, not 14 and 2), as (first row, rows).
pub(crate) fn tiles(m: usize, mr: usize) -> Vec<(usize, usize)> {
    balanced_or_whole(m, mr, true)
}

/// `m` rows in tiles of `mr`, balanced as [`tiles`] cuts them, or whole ones with what is left
/// last (for a tile program that computes 16 rows at a time: 100 rows as 32, 32, 32 and 4 run 7
/// row blocks, as 25 × 4 they run 8).
pub(crate) fn balanced_or_whole(m: usize, mr: usize, balanced: bool) -> Vec<(usize, usize)> {
    if !balanced {
        return (0..m).step_by(mr.max(1)).map(|row| (row, mr.min(m - row))).collect();
    }
    let count = m.div_ceil(mr);
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

/// Bytes of packed input a tile program's row block may take: three quarters of L2 (2 MiB a core
/// on every AMX Xeon so far).
const TILE_BLOCK_BYTES: usize = 1536 * 1024;

/// Rows per block of a product whose packed input rows take `row_bytes` bytes. A tile program's
/// loads come from L1 and L2 alone: its blocks take up to 512 rows (16 tiles of 32), as many as
/// [`TILE_BLOCK_BYTES`] hold: 512 for int8 at K = 768 and 3072 and for bf16 at K = 768, 256 for
/// bf16 at K = 3072. Each weight panel is read from L3 or memory once per block, and from L2 by
/// twice as many tiles as in the blocks of 256 rows the products had before: `classify` on SST-2
/// dev (base model) ran 4 to 15% faster in bf16 and 2% in int8 so (docs/log/2026-11-amx-bf16.md).
/// The register kernels' blocks take 56 rows.
fn block_rows(program: bool, row_bytes: usize) -> usize {
    if program {
        (TILE_BLOCK_BYTES / row_bytes.max(1)).clamp(32, 512) / 32 * 32
    } else {
        56
    }
}

/// How one product's work is cut into tasks.
pub(crate) struct Plan {
    pub tiles: Vec<(usize, usize)>,
    tiles_per_block: usize,
    panels: usize,
    panels_per_task: usize,
}

impl Plan {
    pub fn new(m: usize, n: usize, mr: usize, nr: usize) -> Self {
        Self::with_tiles(tiles(m, mr), m, n, mr, nr, 56)
    }

    /// The plan over given tiles of `m` rows, in blocks of about `block_rows` past 224.
    fn with_tiles(
        tiles: Vec<(usize, usize)>,
        m: usize,
        n: usize,
        mr: usize,
        nr: usize,
        block_rows: usize,
    ) -> Self {
        // Up to 224 rows form one block, so each weight is read once: short inputs are bound by
        // how fast the weights stream in. Longer inputs take blocks of `block_rows` (56 for the
        // register kernels), whose packed input stays in L1 and L2 while a task streams a group of
        // panels.
        // The blocks are evened out (25 tiles in blocks of at most 8 make blocks of 7, 7, 7 and 4,
        // not 8, 8, 8 and 1).
        let most = if m <= 224 { tiles.len().max(1) } else { block_rows.div_ceil(mr) };
        let blocks = tiles.len().div_ceil(most);
        let tiles_per_block = tiles.len().div_ceil(blocks.max(1)).max(1);
        let panels = n.div_ceil(nr);
        // Groups of at most 256 columns, and few enough columns that each thread gets 8 tasks:
        // the tasks are the unit of balance, and with 12 tasks for 2 threads (a 768-wide product
        // of 800 rows) the last one left a thread idle for a tenth of the product.
        let groups = (8 * rayon::current_num_threads()).div_ceil(blocks.max(1));
        let panels_per_task = panels.div_ceil(groups).clamp(1, (256 / nr).max(1));
        Self { tiles, tiles_per_block, panels, panels_per_task }
    }

    /// Calls `task(tiles, panels)` for every (block of tiles, group of panels), on the threads;
    /// tiles come as indices into [`Plan::tiles`].
    pub fn run(&self, task: impl Fn(Range<usize>, Range<usize>) + Sync) {
        let blocks = self.tiles.len().div_ceil(self.tiles_per_block);
        let groups = self.panels.div_ceil(self.panels_per_task);
        let work = |i: usize| {
            let (b, g) = (i / groups, i % groups);
            let tiles = b * self.tiles_per_block..((b + 1) * self.tiles_per_block).min(self.tiles.len());
            let panels = g * self.panels_per_task..((g + 1) * self.panels_per_task).min(self.panels);
            task(tiles, panels)
        };
        (0..blocks * groups).into_par_iter().for_each(work);
    }
}

/// The one choice between a level's tile program and its register kernel: the program from its
/// row count on. The kernel, and whether it is the program.
pub(crate) fn pick<K>(
    kernel: &'static K,
    tiles: Option<(&'static K, usize)>,
    m: usize,
) -> (&'static K, bool) {
    match tiles {
        Some((tiles, min_rows)) if m >= min_rows => (tiles, true),
        _ => (kernel, false),
    }
}

impl Plan {
    /// The plan of an int8 or bf16 product: a tile program's whole tiles in its own row blocks,
    /// a register kernel's balanced ones.
    fn for_kernel(program: bool, m: usize, n: usize, mr: usize, nr: usize, row_bytes: usize) -> Self {
        let block = block_rows(program, row_bytes);
        Self::with_tiles(balanced_or_whole(m, mr, !program), m, n, mr, nr, block)
    }

    /// Calls `tile(t, p, cols, bias)` for every tile t and panel p, in the tasks [`Plan::run`]
    /// cuts: `cols` is panel p's columns (at most `nr` ≤ 32), `bias` their `nr` values of `bias`
    /// (zero past them, and without one).
    fn run_tiles(
        &self,
        n: usize,
        nr: usize,
        bias: Option<&[f32]>,
        tile: impl Fn(usize, usize, usize, &[f32]) + Sync,
    ) {
        self.run_panels(n, nr, bias, |tiles, p, cols, bias| tiles.for_each(|t| tile(t, p, cols, bias)));
    }

    /// As [`Plan::run_tiles`], with each task's tiles of one panel together: `panel(tiles, p,
    /// cols, bias)`.
    fn run_panels(
        &self,
        n: usize,
        nr: usize,
        bias: Option<&[f32]>,
        panel: impl Fn(Range<usize>, usize, usize, &[f32]) + Sync,
    ) {
        self.run(|tiles, panels| {
            for p in panels {
                let cols = nr.min(n - p * nr);
                let mut bias_panel = [0f32; 32];
                if let Some(bias) = bias {
                    bias_panel[..cols].copy_from_slice(&bias[p * nr..p * nr + cols]);
                }
                panel(tiles.clone(), p, cols, &bias_panel[..nr]);
            }
        });
    }
}

/// Where B's entry (column j, step kk) sits in a source matrix.
#[derive(Clone, Copy)]
pub(crate) enum Source<'a> {
    /// (n, k) with rows `ld` apart: weights (out, in), and attention's keys.
    Rows { data: &'a [f32], ld: usize },
    /// (k, n) with rows `ld` apart: attention's values.
    Columns { data: &'a [f32], ld: usize },
}

multiversion! {
    /// Packs `n` columns of depth `k` from `source` into `dst`: panel p holds columns
    /// p·nr..p·nr + nr as k steps of nr, zero past n.
    pub(crate) fn pack_panels(source: Source, n: usize, k: usize, nr: usize, dst: &mut [f32]) {
        assert!(dst.len() >= n.div_ceil(nr) * k * nr, "pack_panels: {} floats for ({n}, {k})", dst.len());
        for (p, panel) in dst.chunks_mut(k * nr).take(n.div_ceil(nr)).enumerate() {
            let cols = nr.min(n - p * nr);
            match source {
                // Attention's keys, turned from rows into columns 16 × 16 at a time, as
                // `multiply_f32` packs its rows: whole rows in, whole lines out. Key by key, each
                // of a key's k values was a store to another line, and packing took 4% of a
                // base model's int8 forward.
                Source::Rows { data, ld } => {
                    for j0 in (0..cols).step_by(16) {
                        let width = 16.min(cols - j0);
                        for k0 in (0..k).step_by(16) {
                            let depth = 16.min(k - k0);
                            let mut block = [[0f32; 16]; 16];
                            load_block(&mut block, data, ld, p * nr + j0, width, k0, depth);
                            for kk in 0..depth {
                                let step = &mut panel[(k0 + kk) * nr + j0..][..width];
                                for (j, slot) in step.iter_mut().enumerate() {
                                    *slot = block[j][kk];
                                }
                            }
                        }
                    }
                }
                Source::Columns { data, ld } => {
                    for kk in 0..k {
                        panel[kk * nr..kk * nr + cols].copy_from_slice(&data[kk * ld + p * nr..][..cols]);
                    }
                }
            }
            if cols < nr {
                for step in panel.chunks_mut(nr) {
                    step[cols..].fill(0.0);
                }
            }
        }
    }
}

/// Copies `rows` (≤ 16) rows of `data`, `ld` apart from row `first`, their values k0..k0 + depth
/// (depth ≤ 16), into the first lines of `block`: the load half of packing through a 16 × 16 block,
/// which `multiply_f32`'s rows and `pack_panels`' keys share. Lines past `rows` and values past
/// `depth` keep what they held.
#[inline(always)]
fn load_block(
    block: &mut [[f32; 16]; 16],
    data: &[f32],
    ld: usize,
    first: usize,
    rows: usize,
    k0: usize,
    depth: usize,
) {
    for (r, line) in block.iter_mut().enumerate().take(rows) {
        let source = &data[(first + r) * ld + k0..][..depth];
        // A whole line as one fixed-size copy: as a slice copy it was a call to memmove.
        match <&[f32; 16]>::try_from(source) {
            Ok(whole) => *line = *whole,
            Err(_) => line[..depth].copy_from_slice(source),
        }
    }
}

/// Packed panels that take part in one product: columns `n`, steps `0..depth` of panels
/// `stride` floats apart.
#[derive(Clone, Copy)]
pub(crate) struct Panels<'a, W = f32> {
    pub data: &'a [W],
    pub stride: usize,
    pub n: usize,
    pub depth: usize,
}

/// Rows `row..row + rows` (at most 16) of `a` (`lda` apart), steps `0..depth`, as `depth` lines
/// of `stride` floats into `dst`: the input of an f32 tile, each value as products with `W`
/// weights see it ([`Weight::input`]).
pub(crate) fn pack_lines<W: Weight>(
    a: &[f32],
    lda: usize,
    (row, rows): (usize, usize),
    depth: usize,
    stride: usize,
    dst: &mut [f32],
) {
    assert!(rows <= 16 && stride <= 16, "pack_lines: {rows} rows in lines of {stride} floats");
    // Through a 16 × 16 block, 16 steps at a time: rows are copied in whole and lines written
    // out whole. Element by element, each write of a row landed on another cache line, and
    // packing took a sixth of a long input's attention.
    // Block rows past the tile's stay zero: their lanes feed accumulators that are never
    // stored, and zero keeps them finite.
    let mut block = [[0f32; 16]; 16];
    for k0 in (0..depth).step_by(16) {
        let width = 16.min(depth - k0);
        load_block(&mut block, a, lda, row, rows, k0, width);
        for (kk, step) in dst[k0 * stride..].chunks_exact_mut(stride).take(width).enumerate() {
            for (slot, line) in step.iter_mut().zip(&block) {
                *slot = W::input(line[kk]);
            }
        }
    }
}

/// `c (m, n) = bias + a (m, depth) · Bᵀ`, on the threads, where row i of `a` starts at
/// `a[i * lda]` and B's panels are `b` (f32, or bf16 against inputs rounded to bf16 as they are
/// packed): the f32 linears' product, f32 weights or bf16 ones widened.
///
/// # Safety
/// `c` must be valid for writes of m rows of n floats, `ldc` apart, and no other thread may
/// touch them during the call.
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn multiply_f32<W: Weight>(
    kernel: &F32Kernel,
    a: &[f32],
    lda: usize,
    m: usize,
    b: Panels<W>,
    bias: Option<&[f32]>,
    c: *mut f32,
    ldc: usize,
) {
    let (mr, nr, stride) = (kernel.mr, kernel.nr, kernel.a_stride);
    let depth = b.depth;
    assert!(m == 0 || a.len() >= (m - 1) * lda + depth, "multiply_f32: a is too short");
    assert!(b.data.len() >= b.n.div_ceil(nr).saturating_sub(1) * b.stride + depth * nr);
    assert!(bias.is_none_or(|bias| bias.len() >= b.n), "multiply_f32: bias is too short");
    let plan = Plan::new(m, b.n, mr, nr);
    // The rows packed k-major tile by tile, in the spare that fits them: asked for nothing, the
    // pool gave its smallest, which was then replaced with a fresh one while the spare that
    // fitted stayed pooled beside it (peak RSS at 16k tokens, f32: 2,659 MiB).
    let mut packed = Aligned::scratch(plan.tiles.len() * depth * stride);
    let chunks: Vec<&mut [f32]> = packed.as_mut_slice().chunks_mut((depth * stride).max(1)).collect();
    chunks
        .into_par_iter()
        .zip(&plan.tiles)
        .for_each(|(dst, &(row, rows))| pack_lines::<W>(a, lda, (row, rows), depth, stride, dst));
    let packed_rows = packed.as_slice();
    let (c, kernel_tile) = (SendPtr(c), W::tile(kernel));
    plan.run(|tiles, panels| {
        for k0 in (0..depth).step_by(KC) {
            let chunk = KC.min(depth - k0);
            for p in panels.clone() {
                let cols = nr.min(b.n - p * nr);
                let mut first = [0f32; 32];
                // The first chunk of steps starts from the bias (or zeros), the others from `c`.
                let accumulate = k0 > 0;
                if let (Some(bias), false) = (bias, accumulate) {
                    first[..cols].copy_from_slice(&bias[p * nr..p * nr + cols]);
                }
                let panel = &b.data[p * b.stride + k0 * nr..][..chunk * nr];
                for t in tiles.clone() {
                    let (row, rows) = plan.tiles[t];
                    let tile = F32Tile {
                        rows,
                        a: &packed_rows[(t * depth + k0) * stride..][..chunk * stride],
                        a_line: stride,
                        b: panel,
                        depth: chunk,
                        start: &first[..nr],
                        accumulate,
                        // The pointer stays inside `c`: row < m, p·nr < n.
                        c: c.get().wrapping_add(row * ldc + p * nr),
                        ldc,
                        cols,
                    };
                    // SAFETY: the kernel is one this CPU runs (engines are made for a supported
                    // level); the tile's operands hold `chunk` steps; this task alone writes
                    // these rows of panel p's columns, inside `c` as the caller promises.
                    unsafe { kernel_tile(&tile) };
                }
            }
        }
    });
    packed.recycle();
}

/// A weight (n, k) packed for the f32 microkernel of one level.
#[derive(Debug)]
pub(crate) struct PackedF32 {
    level: Level,
    kernel: &'static F32Kernel,
    n: usize,
    k: usize,
    panels: Aligned,
}

impl PackedF32 {
    /// Packs `w` (n, k) row-major for `level`'s kernel.
    pub fn new(level: Level, w: &[f32], n: usize, k: usize) -> Self {
        assert_eq!(w.len(), n * k, "PackedF32: weight of {} floats is not ({n}, {k})", w.len());
        let kernel = F32Kernel::for_level(level);
        let nr = kernel.nr;
        let mut panels = Aligned::zeros(n.div_ceil(nr) * k * nr);
        panels.as_mut_slice().par_chunks_mut((k * nr).max(1)).enumerate().for_each(|(p, panel)| {
            let cols = nr.min(n - p * nr);
            pack_panels(Source::Rows { data: &w[p * nr * k..], ld: k }, cols, k, nr, panel)
        });
        Self { level, kernel, n, k, panels }
    }

    pub fn dims(&self) -> (usize, usize) {
        (self.n, self.k)
    }

    /// The level whose kernel the weight is packed for.
    pub fn level(&self) -> Level {
        self.level
    }

    /// The weight again as (n, k) row-major, for quantizing.
    pub fn unpack(&self) -> Vec<f32> {
        let (n, k, nr) = (self.n, self.k, self.kernel.nr);
        let panels = self.panels.as_slice();
        let mut w = vec![0f32; n * k];
        w.par_chunks_mut(k.max(1)).enumerate().for_each(|(j, row)| {
            let panel = &panels[(j / nr) * k * nr..];
            for (kk, v) in row.iter_mut().enumerate() {
                *v = panel[kk * nr + j % nr];
            }
        });
        w
    }

    /// `out` (m, n) = `a` (m, k) · Wᵀ + `bias`, on the threads.
    ///
    /// # Safety
    /// `out` must be valid for m × n writes; all of them are written.
    pub unsafe fn matmul(&self, a: &[f32], m: usize, bias: Option<&[f32]>, out: *mut f32) {
        let (n, k) = (self.n, self.k);
        let panels = Panels { data: self.panels.as_slice(), stride: k * self.kernel.nr, n, depth: k };
        // SAFETY: the caller gives m × n floats at `out`, rows n apart.
        unsafe { multiply_f32(self.kernel, a, k, m, panels, bias, out, n) };
    }
}

/// A weight (n, k) quantized to s8 per output channel and packed for the int8 microkernel of one
/// level: panel p holds columns p·nr..p·nr + nr as steps of nr columns × 4 (or 8) consecutive k,
/// in the kernel's [`StepLayout`](super::tile_int8::StepLayout).
#[derive(Debug)]
pub(crate) struct PackedI8 {
    kernel: &'static I8Kernel,
    /// A tile program that reads the same panels, for products of at least this many rows.
    tiles: Option<(&'static I8Kernel, usize)>,
    n: usize,
    k: usize,
    /// k rounded up to a multiple of the layout's step depth (4 or 8).
    k_padded: usize,
    panels: Aligned<i8>,
    /// Per output column: the scale back to f32, and the sum of its quantized weights.
    scales: Vec<f32>,
    sums: Vec<i32>,
}

impl PackedI8 {
    /// Quantizes `w` (n, k) row-major for `level`'s kernel: each row (output channel) scaled so
    /// that its largest magnitude maps to the kernel's largest weight.
    pub fn new(level: Level, w: &[f32], n: usize, k: usize) -> Self {
        Self::for_kernels(I8Kernel::for_level(level), I8Kernel::tiles_for_level(level), w, n, k)
    }

    /// [`PackedI8::new`] for `kernel`, and `tiles` above its row count.
    pub(crate) fn for_kernels(
        kernel: &'static I8Kernel,
        tiles: Option<(&'static I8Kernel, usize)>,
        w: &[f32],
        n: usize,
        k: usize,
    ) -> Self {
        assert_eq!(w.len(), n * k, "PackedI8: weight of {} floats is not ({n}, {k})", w.len());
        if let Some((tiles, _)) = tiles {
            assert!(
                (tiles.nr, tiles.layout, tiles.weight_max) == (kernel.nr, kernel.layout, kernel.weight_max),
                "PackedI8: a tile program must read the panels its kernel packs"
            );
        }
        let (nr, layout) = (kernel.nr, kernel.layout);
        let k_padded = kernel.steps(k) * 4;
        let count = n.div_ceil(nr);
        let mut panels = Aligned::zeros(count * k_padded * nr);
        // Columns past n keep scale 1 and sum 0, as quantizing zero padding gives.
        let mut scales = vec![1f32; count * nr];
        let mut sums = vec![0i32; count * nr];
        let top = kernel.weight_max;
        panels
            .as_mut_slice()
            .par_chunks_mut((k_padded * nr).max(1))
            .zip(scales.par_chunks_mut(nr).zip(sums.par_chunks_mut(nr)))
            .enumerate()
            .for_each(|(p, (panel, (scales, sums)))| {
                for j in 0..nr.min(n - p * nr) {
                    let row = &w[(p * nr + j) * k..][..k];
                    let max = row.iter().fold(0f32, |m, v| m.max(v.abs()));
                    let scale = if max > 0.0 { max / top } else { 1.0 };
                    scales[j] = scale;
                    for (kk, &v) in row.iter().enumerate() {
                        let q = super::math::round_small((v / scale).clamp(-top, top)) as i8;
                        panel[layout.offset(nr, j, kk)] = q;
                        sums[j] += i32::from(q);
                    }
                }
            });
        Self { kernel, tiles, n, k, k_padded, panels, scales, sums }
    }

    pub fn dims(&self) -> (usize, usize) {
        (self.n, self.k)
    }

    /// Steps of 4 k per panel.
    pub(crate) fn steps(&self) -> usize {
        self.k_padded / 4
    }

    /// Panel p's weights, its columns' scales and their sums: the operands an [`I8Tile`] takes.
    pub(crate) fn panel(&self, p: usize) -> (&[i8], &[f32], &[i32]) {
        let (nr, len) = (self.kernel.nr, self.k_padded * self.kernel.nr);
        (
            &self.panels.as_slice()[p * len..(p + 1) * len],
            &self.scales[p * nr..(p + 1) * nr],
            &self.sums[p * nr..(p + 1) * nr],
        )
    }

    /// `out` (m, n) = `a` (m, k) · Wᵀ + `bias`, with `a` quantized per row, on the threads.
    ///
    /// # Safety
    /// `out` must be valid for m × n writes; all of them are written.
    pub unsafe fn matmul(&self, a: &[f32], m: usize, bias: Option<&[f32]>, out: *mut f32) {
        let (n, k) = (self.n, self.k);
        let (kernel, program) = pick(self.kernel, self.tiles, m);
        let (mr, nr) = (kernel.mr, kernel.nr);
        assert!(a.len() >= m * k && bias.is_none_or(|b| b.len() == n), "PackedI8::matmul: operand sizes");
        let steps = self.steps();
        let plan = Plan::for_kernel(program, m, n, mr, nr, row_dwords(steps) * 4);
        let inputs = QuantizedRows::new(kernel, &plan.tiles, a, k, steps);
        let out = SendPtr(out);
        plan.run_tiles(n, nr, bias, |t, p, cols, bias| {
            // The pointer stays inside `out`: the tile's rows < m, p·nr < n.
            let c = out.get().wrapping_add(plan.tiles[t].0 * n + p * nr);
            let tile = inputs.tile(t, self.panel(p), bias, cols, c, n);
            // SAFETY: the kernel is one this CPU runs; this task alone writes these rows of panel
            // p's columns, inside `out` as the caller promises.
            unsafe { (kernel.tile)(&tile) };
        });
    }
}

/// Rows quantized to u8 for an int8 kernel, tile by tile as it reads them: each tile's packed
/// input (4 k's to a dword, in lines or rows), and its rows' scales, zero points and sums. What
/// the quantizing leaves unwritten (rows past a tile's, bytes past k) is whatever the pooled
/// buffer held: products no output keeps, or sums with zero weights.
pub(crate) struct QuantizedRows {
    kernel: &'static I8Kernel,
    /// (first row, rows) of each tile.
    tiles: Vec<(usize, usize)>,
    steps: usize,
    tile_dwords: usize,
    inputs: Aligned<u32>,
    /// `mr` per tile.
    scales: Vec<f32>,
    zero_points: Vec<i32>,
    sums: Vec<i32>,
}

impl QuantizedRows {
    /// The rows of `a` (k values each, k apart) in `tiles`, for `kernel`'s panels of `steps`
    /// steps, tiles on the threads.
    pub(crate) fn new(
        kernel: &'static I8Kernel,
        tiles: &[(usize, usize)],
        a: &[f32],
        k: usize,
        steps: usize,
    ) -> Self {
        let mr = kernel.mr;
        let tile_dwords = kernel.input.tile_dwords(steps, mr, kernel.a_stride);
        let mut inputs = Aligned::<u32>::scratch(tiles.len() * tile_dwords);
        let mut scales = vec![0f32; tiles.len() * mr];
        let mut zero_points = vec![0i32; tiles.len() * mr];
        let mut sums = vec![0i32; tiles.len() * mr];
        inputs
            .as_mut_slice()
            .par_chunks_mut(tile_dwords.max(1))
            .zip(scales.par_chunks_mut(mr).zip(zero_points.par_chunks_mut(mr)))
            .zip(sums.par_chunks_mut(mr))
            .zip(tiles)
            .for_each(|(((dst, (scales, zps)), sums), &(row, rows))| {
                super::tile_int8::quantize_rows(&a[row * k..], k, rows, kernel, dst, scales, zps, sums)
            });
        Self { kernel, tiles: tiles.to_vec(), steps, tile_dwords, inputs, scales, zero_points, sums }
    }

    /// The tiles' (first row, rows).
    pub(crate) fn tiles(&self) -> &[(usize, usize)] {
        &self.tiles
    }

    /// Tile t's product with one panel of weights (`PackedI8::panel`) plus `bias` (nr values),
    /// `cols` of its columns written from `c`, rows `ldc` apart.
    pub(crate) fn tile<'a>(
        &'a self,
        t: usize,
        (b, col_scales, col_sums): (&'a [i8], &'a [f32], &'a [i32]),
        bias: &'a [f32],
        cols: usize,
        c: *mut f32,
        ldc: usize,
    ) -> I8Tile<'a> {
        let (mr, td) = (self.kernel.mr, self.tile_dwords);
        I8Tile {
            rows: self.tiles[t].1,
            cols,
            steps: self.steps,
            a: &self.inputs.as_slice()[t * td..(t + 1) * td],
            b,
            row_scales: &self.scales[t * mr..t * mr + mr],
            zero_points: &self.zero_points[t * mr..t * mr + mr],
            row_sums: &self.sums[t * mr..t * mr + mr],
            col_scales,
            col_sums,
            bias,
            c,
            ldc,
        }
    }
}

impl Drop for QuantizedRows {
    /// The packed inputs go back to the pool.
    fn drop(&mut self) {
        std::mem::take(&mut self.inputs).recycle();
    }
}

/// A weight (n, k) rounded to bf16 and packed for one level: panel p holds columns p·nr..p·nr +
/// nr as steps of 2 k, each column's 2 k together for a bf16 kernel, each k's columns together
/// where the level has none and its f32 kernel reads them, widening in its registers. Half the
/// memory of [`PackedF32`].
#[derive(Debug)]
pub(crate) struct PackedBf16 {
    compute: Bf16Compute,
    n: usize,
    k: usize,
    nr: usize,
    panels: Aligned<u16>,
}

/// How a level computes bf16 products, decided when the weight is packed.
#[derive(Debug, Clone, Copy)]
enum Bf16Compute {
    /// A bf16 kernel, and a tile program that reads the same panels for products of at least so
    /// many rows.
    Native { kernel: &'static Bf16Kernel, tiles: Option<(&'static Bf16Kernel, usize)> },
    /// The level's f32 kernel on the bf16 panels, widening each vector of weights as it loads
    /// it, on inputs rounded to bf16 as they are packed: the bf16 kernels' products, summed in
    /// f32 by the f32 kernel's multiply-adds.
    Widened(&'static F32Kernel),
}

impl PackedBf16 {
    /// Rounds `w` (n, k) row-major to bf16 for `level`.
    pub fn new(level: Level, w: &[f32], n: usize, k: usize) -> Self {
        match Bf16Kernel::for_level(level) {
            Some(kernel) => Self::for_kernels(kernel, Bf16Kernel::tiles_for_level(level), w, n, k),
            None => {
                let kernel = F32Kernel::for_level(level);
                Self::pack(Bf16Compute::Widened(kernel), kernel.nr, false, w, n, k)
            }
        }
    }

    /// [`PackedBf16::new`] for `kernel`, and `tiles` above its row count.
    pub(crate) fn for_kernels(
        kernel: &'static Bf16Kernel,
        tiles: Option<(&'static Bf16Kernel, usize)>,
        w: &[f32],
        n: usize,
        k: usize,
    ) -> Self {
        if let Some((tiles, _)) = tiles {
            assert!(
                (tiles.nr, tiles.pairs) == (kernel.nr, kernel.pairs),
                "PackedBf16: a tile program must read the panels its kernel packs"
            );
        }
        Self::pack(Bf16Compute::Native { kernel, tiles }, kernel.nr, kernel.pairs, w, n, k)
    }

    /// bf16 values per panel of `nr` columns: `k` padded to whole steps of 2.
    fn panel_len(k: usize, nr: usize) -> usize {
        k.div_ceil(2) * 2 * nr
    }

    fn pack(compute: Bf16Compute, nr: usize, pairs: bool, w: &[f32], n: usize, k: usize) -> Self {
        assert_eq!(w.len(), n * k, "PackedBf16: weight of {} floats is not ({n}, {k})", w.len());
        let panel = Self::panel_len(k, nr);
        let mut panels = Aligned::zeros(n.div_ceil(nr) * panel);
        panels.as_mut_slice().par_chunks_mut(panel.max(1)).enumerate().for_each(|(p, panel)| {
            for j in 0..nr.min(n - p * nr) {
                for (kk, &v) in w[(p * nr + j) * k..][..k].iter().enumerate() {
                    panel[offset(nr, pairs, j, kk)] = to_bf16(v);
                }
            }
        });
        Self { compute, n, k, nr, panels }
    }

    pub fn dims(&self) -> (usize, usize) {
        (self.n, self.k)
    }

    /// `out` (m, n) = `a` (m, k) rounded to bf16 · Wᵀ + `bias`, on the threads.
    ///
    /// # Safety
    /// `out` must be valid for m × n writes; all of them are written.
    pub unsafe fn matmul(&self, a: &[f32], m: usize, bias: Option<&[f32]>, out: *mut f32) {
        assert!(
            a.len() >= m * self.k && bias.is_none_or(|b| b.len() == self.n),
            "PackedBf16::matmul: operand sizes"
        );
        match self.compute {
            Bf16Compute::Native { kernel, tiles } => {
                let (kernel, program) = pick(kernel, tiles, m);
                // SAFETY: as the caller promises.
                unsafe { self.matmul_native(kernel, program, a, m, bias, out) }
            }
            Bf16Compute::Widened(kernel) => {
                let (n, k) = (self.n, self.k);
                let stride = Self::panel_len(k, self.nr);
                let panels = Panels { data: self.panels.as_slice(), stride, n, depth: k };
                // SAFETY: the caller gives m × n floats at `out`, rows n apart.
                unsafe { multiply_f32(kernel, a, k, m, panels, bias, out, n) }
            }
        }
    }

    /// # Safety
    /// As [`PackedBf16::matmul`].
    unsafe fn matmul_native(
        &self,
        kernel: &Bf16Kernel,
        program: bool,
        a: &[f32],
        m: usize,
        bias: Option<&[f32]>,
        out: *mut f32,
    ) {
        let (n, k) = (self.n, self.k);
        let (mr, nr) = (kernel.mr, kernel.nr);
        let steps = k.div_ceil(2);
        let plan = Plan::for_kernel(program, m, n, mr, nr, row_dwords(steps) * 4);
        // Each tile's rows rounded to bf16, row by row as every bf16 kernel reads them. What the
        // rounding leaves unwritten (rows past a tile's) is whatever the pooled buffer held:
        // products no output keeps (the padding past k it zeroes: old bits there could be NaN).
        let tile_dwords = Input::Rows.tile_dwords(steps, mr, 0);
        let mut packed = Aligned::<u32>::scratch(plan.tiles.len() * tile_dwords);
        packed
            .as_mut_slice()
            .par_chunks_mut(tile_dwords.max(1))
            .zip(&plan.tiles)
            .for_each(|(dst, &(row, rows))| super::tile_bf16::round_rows(&a[row * k..], k, rows, dst));
        let panel = Self::panel_len(k, nr);
        let (out, inputs, weights) = (SendPtr(out), packed.as_slice(), self.panels.as_slice());
        plan.run_panels(n, nr, bias, |tiles, p, cols, bias| {
            let tiles: Vec<Bf16Tile> = tiles
                .map(|t| {
                    let (row, rows) = plan.tiles[t];
                    Bf16Tile {
                        rows,
                        cols,
                        steps,
                        a: &inputs[t * tile_dwords..(t + 1) * tile_dwords],
                        b: &weights[p * panel..(p + 1) * panel],
                        bias,
                        // The pointer stays inside `out`: row < m, p·nr < n.
                        c: out.get().wrapping_add(row * n + p * nr),
                        ldc: n,
                    }
                })
                .collect();
            // SAFETY: the kernel is one this CPU runs; this task alone writes these tiles' rows of
            // panel p's columns, inside `out` as the caller promises.
            unsafe { (kernel.tiles)(&tiles) };
        });
        packed.recycle();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime::kernels::{noise, tested_levels};

    /// Shapes that leave partial tiles, partial panels, several depth chunks (k > KC), several
    /// row blocks (m > 224) and single rows or columns.
    const SHAPES: [(usize, usize, usize); 8] = [
        (1, 3, 1),
        (13, 17, 33),
        (29, 64, 96),
        (15, 1, 70),
        (230, 40, 31),
        (7, 800, 17),
        (300, 5, 65),
        (6, 16, 16),
    ];

    #[test]
    fn f32_products_equal_f64_ones_at_every_level() {
        for level in tested_levels("f32 GEMM") {
            let kernel = F32Kernel::for_level(level);
            for (i, &(m, k, n)) in SHAPES.iter().enumerate() {
                // Rows of `a` 3 floats wider than k, to read through a stride.
                let lda = k + 3;
                let a = noise(m * lda, i as u64);
                let w = noise(n * k, 100 + i as u64);
                let bias = noise(n, 200 + i as u64);
                let dot = |r: usize, j: usize| -> f64 {
                    (0..k).map(|kk| a[r * lda + kk] as f64 * w[j * k + kk] as f64).sum()
                };
                let mut panels = vec![f32::NAN; n.div_ceil(kernel.nr) * k * kernel.nr];
                pack_panels(Source::Rows { data: &w, ld: k }, n, k, kernel.nr, &mut panels);
                let b = Panels { data: &panels, stride: k * kernel.nr, n, depth: k };
                for with_bias in [false, true] {
                    let mut c = noise(m * n, 300 + i as u64);
                    // SAFETY: `c` holds m × n floats, n apart.
                    unsafe {
                        multiply_f32(kernel, &a, lda, m, b, with_bias.then_some(&bias[..]), c.as_mut_ptr(), n)
                    };
                    for r in 0..m {
                        for j in 0..n {
                            let start = if with_bias { bias[j] as f64 } else { 0.0 };
                            let want = start + dot(r, j);
                            let got = c[r * n + j] as f64;
                            assert!(
                                (got - want).abs() <= 1e-5 * (k as f64).sqrt().max(1.0),
                                "{level:?} ({m},{k},{n}) bias {with_bias} at ({r},{j}): {got} vs {want}"
                            );
                        }
                    }
                }
                // The packed weight's own product, and its way back to rows.
                let packed = PackedF32::new(level, &w, n, k);
                assert_eq!(packed.unpack(), w, "{level:?}: unpack");
                let a = noise(m * k, 400 + i as u64);
                let mut c = vec![f32::NAN; m * n];
                // SAFETY: `c` holds m × n floats.
                unsafe { packed.matmul(&a, m, Some(&bias), c.as_mut_ptr()) };
                for r in 0..m {
                    for j in 0..n {
                        let want = bias[j] as f64
                            + (0..k).map(|kk| a[r * k + kk] as f64 * w[j * k + kk] as f64).sum::<f64>();
                        assert!((c[r * n + j] as f64 - want).abs() <= 1e-5 * (k as f64).sqrt().max(1.0));
                    }
                }
            }
        }
    }

    #[test]
    fn panels_from_columns() {
        // Attention's values: B given as (k, n) rows.
        let (k, n, m) = (70, 20, 9);
        let v = noise(k * n, 1);
        let a = noise(m * k, 2);
        for level in tested_levels("f32 GEMM over value panels") {
            let kernel = F32Kernel::for_level(level);
            let mut panels = vec![0f32; n.div_ceil(kernel.nr) * k * kernel.nr];
            pack_panels(Source::Columns { data: &v, ld: n }, n, k, kernel.nr, &mut panels);
            let b = Panels { data: &panels, stride: k * kernel.nr, n, depth: k };
            let mut c = vec![0f32; m * n];
            // SAFETY: `c` holds m × n floats.
            unsafe { multiply_f32(kernel, &a, k, m, b, None, c.as_mut_ptr(), n) };
            for r in 0..m {
                for j in 0..n {
                    let want: f64 = (0..k).map(|d| a[r * k + d] as f64 * v[d * n + j] as f64).sum();
                    assert!((c[r * n + j] as f64 - want).abs() < 1e-5, "{level:?} at ({r},{j})");
                }
            }
        }
    }

    #[test]
    fn int8_products_stay_within_the_quantization_bound_at_every_level() {
        for level in tested_levels("int8 GEMM") {
            let top = I8Kernel::for_level(level).weight_max;
            for (i, &(m, k, n)) in SHAPES.iter().enumerate() {
                // Inputs with exact zeros, shifted so that rows are mostly positive (as after GELU).
                let a: Vec<f32> = noise(m * k, i as u64)
                    .into_iter()
                    .enumerate()
                    .map(|(j, v)| if j % 7 == 0 { 0.0 } else { v + 0.2 })
                    .collect();
                let w = noise(n * k, 100 + i as u64);
                let bias = noise(n, 200 + i as u64);
                let packed = PackedI8::new(level, &w, n, k);
                let mut c = vec![f32::NAN; m * n];
                // SAFETY: `c` holds m × n floats.
                unsafe { packed.matmul(&a, m, Some(&bias), c.as_mut_ptr()) };
                for r in 0..m {
                    let row = &a[r * k..r * k + k];
                    let (lo, hi) = row.iter().fold((0f32, 0f32), |(l, h), &v| (l.min(v), h.max(v)));
                    // Each input is off by at most half its row's step, each weight by half its
                    // column's: |Δ(a·w)| ≤ Σ |a|·δw + |w|·δa + δa·δw.
                    let da = (hi - lo) as f64 / 255.0 / 2.0;
                    for j in 0..n {
                        let col = &w[j * k..j * k + k];
                        let dw = col.iter().fold(0f32, |m, v| m.max(v.abs())) as f64 / top as f64 / 2.0;
                        let bound: f64 = row
                            .iter()
                            .zip(col)
                            .map(|(&x, &y)| (x as f64).abs() * dw + (y as f64).abs() * da + da * dw)
                            .sum::<f64>()
                            * 1.01
                            + 1e-5;
                        let want = bias[j] as f64
                            + row.iter().zip(col).map(|(&x, &y)| x as f64 * y as f64).sum::<f64>();
                        let got = c[r * n + j] as f64;
                        assert!(
                            (got - want).abs() <= bound,
                            "{level:?} ({m},{k},{n}) at ({r},{j}): {got} vs {want}, bound {bound}"
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn bf16_products_equal_f64_ones_of_the_rounded_operands_at_every_level() {
        let round = |x: f32| <u16 as Weight>::input(x) as f64;
        let shapes = SHAPES.iter().chain(&[(64, 100, 40), (33, 64, 33), (40, 31, 70)]);
        for level in tested_levels("bf16 GEMM") {
            for (i, &(m, k, n)) in shapes.clone().enumerate() {
                let a = noise(m * k, i as u64);
                let w = noise(n * k, 100 + i as u64);
                let bias = noise(n, 200 + i as u64);
                let packed = PackedBf16::new(level, &w, n, k);
                let mut c = vec![f32::NAN; m * n];
                // SAFETY: `c` holds m × n floats.
                unsafe { packed.matmul(&a, m, Some(&bias), c.as_mut_ptr()) };
                for r in 0..m {
                    for j in 0..n {
                        let products = (0..k).map(|kk| round(a[r * k + kk]) * round(w[j * k + kk]));
                        let want = bias[j] as f64 + products.clone().sum::<f64>();
                        // Each product is exact in f32; each of the k sums rounds once.
                        let bound =
                            k as f64 * f32::EPSILON as f64 * products.map(f64::abs).sum::<f64>() + 1e-6;
                        let got = c[r * n + j] as f64;
                        assert!(
                            (got - want).abs() <= bound,
                            "{level:?} ({m},{k},{n}) at ({r},{j}): {got} vs {want}, bound {bound}"
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn bf16_weights_read_by_an_f32_kernel_give_its_products_of_the_rounded_operands_bit_for_bit() {
        // Widening in the registers changes where the f32 values come from, not the arithmetic:
        // the f32 kernel on rounded inputs and rounded weights must give the same bits.
        let round = |v: &[f32]| v.iter().map(|&x| <u16 as Weight>::input(x)).collect::<Vec<_>>();
        let levels = tested_levels("bf16 on the f32 kernel");
        for level in levels.into_iter().filter(|&l| Bf16Kernel::for_level(l).is_none()) {
            for (i, &(m, k, n)) in SHAPES.iter().chain(&[(64, 100, 40), (40, 31, 70)]).enumerate() {
                let a = noise(m * k, 300 + i as u64);
                let w = noise(n * k, 400 + i as u64);
                let bias = noise(n, 500 + i as u64);
                let (mut got, mut want) = (vec![f32::NAN; m * n], vec![f32::NAN; m * n]);
                // SAFETY: both outputs hold m × n floats.
                unsafe {
                    PackedBf16::new(level, &w, n, k).matmul(&a, m, Some(&bias), got.as_mut_ptr());
                    PackedF32::new(level, &round(&w), n, k).matmul(
                        &round(&a),
                        m,
                        Some(&bias),
                        want.as_mut_ptr(),
                    );
                }
                let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
                assert!(
                    bits(&got) == bits(&want),
                    "{level:?} ({m},{k},{n}): bf16 panels differ from f32 ones"
                );
            }
        }
    }

    #[test]
    fn int8_kernels_of_one_weight_range_give_the_same_sums() {
        // The 127-range kernels (portable, AVX-VNNI, AVX-512 VNNI) compute the same integer sums
        // through different instructions and tile shapes, so their outputs are equal.
        let (m, k, n) = (37, 70, 45);
        let a = noise(m * k, 5);
        let w = noise(n * k, 6);
        let run = |level: Level| {
            let mut c = vec![0f32; m * n];
            // SAFETY: `c` holds m × n floats.
            unsafe { PackedI8::new(level, &w, n, k).matmul(&a, m, None, c.as_mut_ptr()) };
            c
        };
        let wide: Vec<Level> = tested_levels("int8 kernels against each other")
            .into_iter()
            .filter(|&l| I8Kernel::for_level(l).weight_max == 127.0)
            .collect();
        let reference = run(Level::Portable);
        for level in wide {
            assert_eq!(run(level), reference, "{level:?} differs from the portable kernel");
        }
    }
}
