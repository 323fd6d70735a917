//! Multi-head self-attention with RoFormer's rotation, fused: from the packed projections
//! (tokens, 3 × hidden) straight to the merged context (tokens, hidden), with no head split or
//! merge copies, no mask tensor and no (seq × seq) score matrix.
//!
//! Tokens form sequences (`Segments`): back to back without padding (varlen), or padded rows
//! of equal length with a key mask. Each task takes one block of queries of one head of one
//! sequence and walks the keys block by block with an online softmax (flash attention), so
//! memory grows linearly with the sequence length.
//!
//! The two products (Q·Kᵀ and P·V) run at the model's precision ([`Products`]): in f32, exact,
//! for an f32 model; in bf16 with f32 sums for a bf16 one; for an int8 one, Q·Kᵀ on the level's
//! int8 kernel where that measured faster (from [`INT8_SCORES_FROM`] tokens) and P·V in bf16.
//! bf16 runs on the level's bf16 kernel where it has one (`vdpbf16ps`, AMX's `tdpbf16ps`), and
//! elsewhere on its f32 kernel reading keys and values kept in bf16 (half the bytes), each widened
//! as it is loaded. The online softmax stays in f32 at every precision.

use std::ops::Range;

use candle_core::Tensor;
use rayon::prelude::*;

use super::gemm::{balanced_or_whole, pack_lines, pack_panels, pick, tiles, PackedI8, QuantizedRows, Source};
use super::layout::{row_dwords, Aligned, Input, Spare};
use super::tile_bf16::{from_bf16, offset, round_rows, to_bf16, Bf16Kernel, Bf16Tile};
use super::tile_f32::{F32Kernel, F32Tile, Weight};
use super::tile_int8::I8Kernel;
use super::{math, multiversion, tensor, Level, SendPtr, View};
use crate::error::{candle_bail, Result};
use crate::runtime::quantization::Quantization;

/// Queries per task, and keys per step of the online softmax (rounded down to a multiple of the
/// kernel's nr, so that each block of keys starts on a panel: 504 for NEON's 12).
const QUERY_BLOCK: usize = 128;
const KEY_BLOCK: usize = 512;

/// int8 models take int8 scores in calls whose longest sequence holds at least this many tokens
/// ([`Route::new`]): below, they measured no faster.
const INT8_SCORES_FROM: usize = 1024;

/// The precision of attention's two products, the model's: chosen with its linears' precision
/// ([`Products::for_quantization`]), and held by its attention layers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) enum Products {
    /// f32 products: exact, for f32 models.
    #[default]
    F32,
    /// Queries, keys, values and softmax weights rounded to bf16 (to nearest, ties to even),
    /// products summed in f32: for bf16 models.
    Bf16,
    /// Q·Kᵀ in int8 where the level's int8 products are the faster and the sequences long enough
    /// for them to pay (keys less their mean over the sequence, which moves every score of a
    /// query alike; u8 with zero points on the side the kernel takes as rows, s8 on its panels'),
    /// else as [`Products::Bf16`]'s; P·V as [`Products::Bf16`]'s: for int8 models.
    Int8,
}

impl Products {
    /// The products of a model whose linear layers are in `quantization`: the one place that
    /// decides, for a model loaded quantized and one quantized after loading alike.
    pub fn for_quantization(quantization: Quantization) -> Products {
        match quantization {
            Quantization::None => Products::F32,
            Quantization::Int8 => Products::Int8,
            Quantization::Bf16 => Products::Bf16,
        }
    }
}

/// How a call computes its products: decided once from the level and the precision.
#[derive(Clone, Copy)]
struct Route {
    /// The kernel of P·V, and of Q·Kᵀ where `scores` is `None`.
    kernel: Kernel,
    /// Q·Kᵀ on the level's int8 kernels.
    scores: Option<I8Kernels>,
    /// The softmax's exponential within 2 ulp ([`math::exp`]), for f32 models, whose attention
    /// stays exact; else within 1e-4 ([`math::exp_nonpositive_coarse`], at under half the work),
    /// far inside what bf16 or int8 products and linears stray by.
    exact: bool,
}

/// A level's int8 kernel, and its tile program from so many rows (AMX).
type I8Kernels = (&'static I8Kernel, Option<(&'static I8Kernel, usize)>);

/// The kernel of attention's products.
#[derive(Clone, Copy)]
enum Kernel {
    /// The level's f32 kernel on f32 panels.
    F32(&'static F32Kernel),
    /// The level's f32 kernel on bf16 panels, widened as they load, inputs rounded as packed.
    Widened(&'static F32Kernel),
    /// The level's bf16 kernel, and its tile program from so many rows (AMX).
    Native { kernel: &'static Bf16Kernel, tiles: Option<(&'static Bf16Kernel, usize)> },
}

impl Route {
    /// The route of a call whose longest sequence holds `longest` tokens.
    fn new(level: Level, products: Products, longest: usize) -> Route {
        let kernel = match (products, Bf16Kernel::for_level(level)) {
            (Products::F32, _) => Kernel::F32(F32Kernel::for_level(level)),
            (_, Some(kernel)) => Kernel::Native { kernel, tiles: Bf16Kernel::tiles_for_level(level) },
            // AVX-512 without bf16 instructions keeps f32 products, the faster there: the int8 layer
            // at 2,048 and 8,192 tokens ran 1 to 13% slower widened at `avx512-vnni`, and 3 to 11%
            // faster at `avx2` (docs/log/2026-12-attention-precision.md).
            (_, None) if matches!(level, Level::Avx512 | Level::Avx512Vnni) => {
                Kernel::F32(F32Kernel::for_level(level))
            }
            (_, None) => Kernel::Widened(F32Kernel::for_level(level)),
        };
        // int8 scores where they measured faster than bf16 or f32 ones: the int8 layer at 2,048 to
        // 8,192 tokens ran up to 22% faster with them at `avx512-vnni` and 17% at `avx512-bf16`; at `avx2`
        // they tied, and at `avx512` (without VNNI) they were 7% slower. Unmeasured levels keep
        // bf16 products. Below `INT8_SCORES_FROM` tokens they gained too little to pay for their
        // coarser scores (docs/log/2026-12-attention-precision.md).
        let int8_scores = matches!(level, Level::Avx512Vnni | Level::Avx512Bf16 | Level::Amx);
        let scores = (products == Products::Int8 && int8_scores && longest >= INT8_SCORES_FROM)
            .then(|| (I8Kernel::for_level(level), I8Kernel::tiles_for_level(level)));
        Route { kernel, scores, exact: products == Products::F32 }
    }

    /// Columns per panel of the packed keys and values.
    fn nr(self) -> usize {
        match self.kernel {
            Kernel::F32(kernel) | Kernel::Widened(kernel) => kernel.nr,
            Kernel::Native { kernel, .. } => kernel.nr,
        }
    }

    /// The softmax weights P·V reads, where it runs on an f32 kernel: widened products take
    /// them rounded to bf16.
    fn weights(self) -> Weights {
        match self.kernel {
            Kernel::Widened(_) => Weights::Bf16,
            _ if self.exact => Weights::Exact,
            _ => Weights::Coarse,
        }
    }

    /// The f32 kernel whose Q·Kᵀ reads the keys as input lines ([`Heads::key_lines`]): the f32
    /// kernels' route without int8 scores.
    fn key_lines(self) -> Option<&'static F32Kernel> {
        match (self.kernel, self.scores) {
            (Kernel::F32(kernel) | Kernel::Widened(kernel), None) => Some(kernel),
            _ => None,
        }
    }

    /// Whether int8 scores come a line per key (K·Qᵀ: the keys the int8 kernel's rows, the task's
    /// queries its panels), where P·V runs on an f32 kernel, which reads its input so; else a row
    /// per query, as the bf16 kernels read theirs.
    fn int8_lines(self) -> bool {
        self.scores.is_some() && !matches!(self.kernel, Kernel::Native { .. })
    }

    /// Keys per step of the online softmax: a multiple of the panels' columns (and of the int8
    /// keys' panels, where scores come a row per query), so that each block of keys starts on a
    /// panel of each.
    fn key_block(self) -> usize {
        let nr = self.nr();
        let step = match self.scores {
            Some((kernel, _)) if !self.int8_lines() => nr * kernel.nr / gcd(nr, kernel.nr),
            _ => nr,
        };
        KEY_BLOCK / step * step
    }
}

fn gcd(a: usize, b: usize) -> usize {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

/// How tokens form sequences.
pub(crate) struct Segments<'a> {
    /// (first token, length) of each sequence.
    pub spans: &'a [(usize, usize)],
    /// Per token: 0 where it may be attended to, f32::MIN where it is padding. transformers adds
    /// the dtype's minimum too, so rows whose every key is masked come out alike (uniform).
    pub key_bias: Option<&'a [f32]>,
    /// Whether each query sees only itself and earlier keys.
    pub causal: bool,
}

/// The attention of `qkv` (tokens, 3 × heads × head_dim): queries, keys and values side by side,
/// its products in `products`. `rotation` covers the longest sequence.
#[allow(clippy::too_many_arguments)]
pub(crate) fn attention(
    level: Level,
    products: Products,
    qkv: &Tensor,
    segments: &Segments,
    rotation: &Rotation,
    heads: usize,
    head_dim: usize,
    rotary_value: bool,
) -> Result<Tensor> {
    let longest = segments.spans.iter().map(|s| s.1).max().unwrap_or(0);
    let route = Route::new(level, products, longest);
    attention_by(route, qkv, segments, rotation, heads, head_dim, rotary_value)
}

/// [`attention`] by the route a level and a precision take (or, in the tests, another one).
#[allow(clippy::too_many_arguments)]
fn attention_by(
    route: Route,
    qkv: &Tensor,
    segments: &Segments,
    rotation: &Rotation,
    heads: usize,
    head_dim: usize,
    rotary_value: bool,
) -> Result<Tensor> {
    let (tokens, width) = qkv.dims2()?;
    let hidden = heads * head_dim;
    if width != 3 * hidden {
        candle_bail!("attention: qkv width {width} is not 3 × {hidden}")
    }
    let longest = segments.spans.iter().map(|s| s.1).max().unwrap_or(0);
    if rotation.len < longest
        || rotation.cos.len() != rotation.len * head_dim
        || segments.spans.iter().any(|&(s, l)| s + l > tokens)
    {
        candle_bail!("attention: sequences {:?} do not fit {tokens} tokens and the tables", segments.spans)
    }
    let qkv = View::new(qkv)?;
    let qkv = qkv.slice();

    // Rotated (and, for queries, scaled) copies of q and k — and of v when it rotates too.
    let rotated_width = if rotary_value { 3 * hidden } else { 2 * hidden };
    let scale = 1.0 / (head_dim as f32).sqrt();
    if segments.spans.iter().map(|s| s.1).sum::<usize>() != tokens {
        candle_bail!("attention: sequences {:?} do not cover the {tokens} tokens", segments.spans)
    }
    // SAFETY: the spans cover every token once (checked above), and each token's row of
    // `rotated_width` is written in full by its own task.
    let rotated = unsafe {
        super::written_by(tokens * rotated_width, |rotated| {
            let rotated_ptr = SendPtr(rotated);
            segments.spans.par_iter().for_each(|&(start, len)| {
                (0..len).into_par_iter().with_min_len(16).for_each(|pos| {
                    let t = start + pos;
                    let row = std::slice::from_raw_parts_mut(
                        rotated_ptr.get().add(t * rotated_width),
                        rotated_width,
                    );
                    let (c, s) = (
                        &rotation.cos[pos * head_dim..][..head_dim],
                        &rotation.sin[pos * head_dim..][..head_dim],
                    );
                    rotate(&qkv[t * width..t * width + rotated_width], row, c, s, head_dim, hidden, scale);
                });
            });
        })
    };

    let (values, value_width) = if rotary_value { (&rotated[..], rotated_width) } else { (qkv, width) };
    let heads_of = Heads { segments, rotated: &rotated, rotated_width, values, value_width, heads, head_dim };
    let out = match route.kernel {
        Kernel::F32(kernel) => heads_of.run::<f32>(route, |block, context| block.run_f32(kernel, context)),
        Kernel::Widened(kernel) => {
            heads_of.run::<u16>(route, |block, context| block.run_f32(kernel, context))
        }
        Kernel::Native { kernel, tiles } => {
            heads_of.run::<u16>(route, |block, context| block.run_bf16(kernel, tiles, context))
        }
    };
    tensor(out, &[tokens, hidden])
}

/// What every (sequence, head) pair reads: the rotated queries and keys, and the values.
struct Heads<'a> {
    segments: &'a Segments<'a>,
    rotated: &'a [f32],
    rotated_width: usize,
    values: &'a [f32],
    value_width: usize,
    heads: usize,
    head_dim: usize,
}

/// A value of a packed key or value panel: f32, or bf16 bits.
trait PanelValue: Weight + Spare {
    /// Values per panel of `nr` columns of depth `k`.
    fn panel_len(k: usize, nr: usize) -> usize;

    /// Packs `n` columns of depth `k` from `source` into panels of `nr` columns: with each
    /// column's 2 k together (`pairs`, what the bf16 kernels read) or each k's `nr` columns
    /// together (what the f32 kernels read, widening bf16).
    fn pack(source: Source, n: usize, k: usize, nr: usize, pairs: bool, dst: &mut [Self]);
}

impl PanelValue for f32 {
    fn panel_len(k: usize, nr: usize) -> usize {
        k * nr
    }

    /// Through the GEMM's own packing, which moves whole lines.
    fn pack(source: Source, n: usize, k: usize, nr: usize, _pairs: bool, dst: &mut [f32]) {
        pack_panels(source, n, k, nr, dst)
    }
}

impl PanelValue for u16 {
    /// Whole steps of 2 k, as the bf16 kernels read them (zero past k).
    fn panel_len(k: usize, nr: usize) -> usize {
        k.div_ceil(2) * 2 * nr
    }

    fn pack(source: Source, n: usize, k: usize, nr: usize, pairs: bool, dst: &mut [u16]) {
        // The padding (columns past n, the step past an odd k) must be zero, and the buffer is a
        // pooled one: a NaN left there times a zero weight is NaN.
        if !n.is_multiple_of(nr) || !k.is_multiple_of(2) {
            dst.fill(0);
        }
        match source {
            Source::Rows { data, ld } => pack_bf16_rows(data, ld, n, k, nr, pairs, dst),
            Source::Columns { data, ld } => pack_bf16_columns(data, ld, n, k, nr, pairs, dst),
        }
    }
}

/// Source rows to read ahead of the one packed: a (sequence, head)'s keys and values are a few
/// lines of each row, rows kilobytes apart, which the hardware's prefetchers did not fetch in
/// time (the loads had taken most of the packing's time, itself 2.6% of a bf16 layer at 8k).
const PACK_AHEAD: usize = 8;

/// Asks for the lines of `data[at..at + len]` (clipped to `data`) ahead of their use.
#[inline(always)]
fn prefetch(data: &[f32], at: usize, len: usize) {
    #[cfg(target_arch = "x86_64")]
    for line in (at..(at + len).min(data.len())).step_by(16) {
        // SAFETY: SSE is part of x86_64; a prefetch reads nothing and cannot fault, and the
        // address lies inside `data`.
        unsafe {
            use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
            _mm_prefetch::<_MM_HINT_T0>(data.as_ptr().add(line).cast());
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (data, at, len);
}

multiversion! {
    /// [`PanelValue::pack`] of `n` rows of depth `k`, `ld` apart (attention's keys), one row
    /// after the other.
    fn pack_bf16_rows(data: &[f32], ld: usize, n: usize, k: usize, nr: usize, pairs: bool, dst: &mut [u16]) {
        let len = u16::panel_len(k, nr);
        for (p, panel) in dst.chunks_mut(len).take(n.div_ceil(nr)).enumerate() {
            for j in 0..nr.min(n - p * nr) {
                let row = (p * nr + j) * ld;
                prefetch(data, row + PACK_AHEAD * ld, k);
                for (kk, &v) in data[row..][..k].iter().enumerate() {
                    panel[offset(nr, pairs, j, kk)] = to_bf16(v);
                }
            }
        }
    }
}

multiversion! {
    /// [`PanelValue::pack`] of `k` rows of `n` columns, `ld` apart (attention's values): a step's
    /// two rows at a time, each read once for every panel.
    fn pack_bf16_columns(data: &[f32], ld: usize, n: usize, k: usize, nr: usize, pairs: bool, dst: &mut [u16]) {
        let len = u16::panel_len(k, nr);
        let zeros = vec![0f32; n];
        for step in 0..k.div_ceil(2) {
            let row = |kk: usize| if kk < k { &data[kk * ld..][..n] } else { &zeros[..] };
            prefetch(data, (2 * step + PACK_AHEAD) * ld, n);
            prefetch(data, (2 * step + 1 + PACK_AHEAD) * ld, n);
            let (even, odd) = (row(2 * step), row(2 * step + 1));
            for (p, panel) in dst.chunks_mut(len).take(n.div_ceil(nr)).enumerate() {
                let cols = nr.min(n - p * nr);
                let out = &mut panel[step * 2 * nr..][..2 * nr];
                let (even, odd) = (&even[p * nr..][..cols], &odd[p * nr..][..cols]);
                if pairs {
                    for ((o, &e), &d) in out.chunks_exact_mut(2).zip(even).zip(odd) {
                        o[0] = to_bf16(e);
                        o[1] = to_bf16(d);
                    }
                } else {
                    let (first, second) = out.split_at_mut(nr);
                    first.iter_mut().zip(even).for_each(|(o, &e)| *o = to_bf16(e));
                    second.iter_mut().zip(odd).for_each(|(o, &d)| *o = to_bf16(d));
                }
            }
        }
    }
}

/// Every (sequence, head)'s keys and values packed as panels, and where each sits.
struct Packed<W> {
    panels: Aligned<W>,
    /// The keys as the f32 kernel's input lines, where the route reads them so (and `panels`
    /// then holds only values).
    key_lines: Aligned<f32>,
    /// Per (sequence, head) pair: where its parts sit.
    parts: Vec<Parts>,
    /// The (sequence, head) pairs, sequence-major.
    pairs: Vec<(usize, usize)>,
    /// Per pair, its keys in int8, where the route's scores are (and `panels` then holds none).
    int8_keys: Vec<Int8Keys>,
}

/// A (sequence, head)'s keys in int8, less their mean, as the route's scores read them.
enum Int8Keys {
    /// s8 panels, a column per key, for scores a row per query ([`Int8Scores`]).
    Panels { kernels: I8Kernels, keys: PackedI8 },
    /// u8 rows with zero points, tile by tile within each block of keys (`tiles_per_block` to a
    /// whole block), for scores a line per key ([`Int8Lines`]).
    Rows { kernel: &'static I8Kernel, keys: QuantizedRows, tiles_per_block: usize },
}

/// Where a (sequence, head) pair's packed keys and values sit: its key panels and value panels
/// in [`Packed::panels`], its key lines in [`Packed::key_lines`] (each range empty where the
/// route takes none).
struct Parts {
    keys: Range<usize>,
    values: Range<usize>,
    lines: Range<usize>,
}

/// Floats of a block of `keys` keys as `kernel`'s input lines: its tiles of `mr` keys
/// ([`tiles`]), each `head_dim` lines.
fn key_block_lines(kernel: &F32Kernel, keys: usize, head_dim: usize) -> usize {
    tiles(keys, kernel.mr).len() * head_dim * kernel.a_stride
}

/// `buffer` cut into consecutive parts of the given lengths, from its start.
fn split_into<T>(mut buffer: &mut [T], lengths: impl Iterator<Item = usize>) -> Vec<&mut [T]> {
    lengths
        .map(|len| {
            let (part, rest) = std::mem::take(&mut buffer).split_at_mut(len);
            buffer = rest;
            part
        })
        .collect()
}

impl Heads<'_> {
    /// (keys, values) sizes of a sequence of `len` in `W` panels of the route.
    fn sizes<W: PanelValue>(&self, len: usize, route: Route) -> (usize, usize) {
        let (d, nr) = (self.head_dim, route.nr());
        let panels = route.scores.is_none() && route.key_lines().is_none();
        let keys = if panels { len.div_ceil(nr) * W::panel_len(d, nr) } else { 0 };
        (keys, d.div_ceil(nr) * W::panel_len(len, nr))
    }

    /// Floats of a sequence of `len`'s keys as the f32 kernel's input lines, where the route reads
    /// them so: per block of keys, its tiles of `mr` keys ([`tiles`]), each `head_dim` lines.
    fn key_lines_len(&self, len: usize, route: Route) -> usize {
        route.key_lines().map_or(0, |kernel| {
            let block = route.key_block();
            (0..len)
                .step_by(block)
                .map(|k0| key_block_lines(kernel, block.min(len - k0), self.head_dim))
                .sum()
        })
    }

    /// A (sequence, head)'s keys as the f32 kernel's input lines (rounded as products with `W`
    /// see them): Q·Kᵀ computed as K·Qᵀ, so that its output lies key by key, with a lane per
    /// query, where P·V reads its input lines.
    fn key_lines<W: Weight>(
        &self,
        (s, h): (usize, usize),
        kernel: &F32Kernel,
        key_block: usize,
        dst: &mut [f32],
    ) {
        let (start, len) = self.segments.spans[s];
        let (d, hidden) = (self.head_dim, self.heads * self.head_dim);
        let keys = &self.rotated[start * self.rotated_width + hidden + h * d..];
        let mut lines = dst.chunks_exact_mut(d * kernel.a_stride);
        for k0 in (0..len).step_by(key_block) {
            for (row, rows) in tiles(key_block.min(len - k0), kernel.mr) {
                let dst = lines.next().expect("key lines sized by key_lines_len");
                pack_lines::<W>(keys, self.rotated_width, (k0 + row, rows), d, kernel.a_stride, dst);
            }
        }
    }

    /// A (sequence, head)'s keys quantized for the route's int8 kernels, less their mean: the
    /// scores of a query all move by its product with the mean, which the softmax does not see,
    /// and the keys' common part no longer takes up their range.
    fn int8_keys(&self, (s, h): (usize, usize), route: Route) -> Int8Keys {
        let (start, len) = self.segments.spans[s];
        let (d, hidden) = (self.head_dim, self.heads * self.head_dim);
        let mut keys = vec![0f32; len * d];
        let mut mean = vec![0f64; d];
        for (t, row) in keys.chunks_exact_mut(d).enumerate() {
            row.copy_from_slice(&self.rotated[(start + t) * self.rotated_width + hidden + h * d..][..d]);
            mean.iter_mut().zip(&*row).for_each(|(m, &v)| *m += f64::from(v));
        }
        let mean: Vec<f32> = mean.iter().map(|m| (m / len.max(1) as f64) as f32).collect();
        keys.chunks_exact_mut(d).for_each(|row| row.iter_mut().zip(&mean).for_each(|(v, m)| *v -= m));
        let (kernel, tiles) = route.scores.expect("int8 keys on a route with int8 scores");
        if !route.int8_lines() {
            return Int8Keys::Panels {
                kernels: (kernel, tiles),
                keys: PackedI8::for_kernels(kernel, tiles, &keys, len, d),
            };
        }
        // Tiles that never cross a block of keys, so that each block's scores are its own tiles.
        let key_block = route.key_block();
        let (kernel, program) = pick(kernel, tiles, key_block.min(len));
        let tiles_per_block = balanced_or_whole(key_block, kernel.mr, !program).len();
        let key_tiles: Vec<(usize, usize)> = (0..len)
            .step_by(key_block)
            .flat_map(|k0| {
                let block = balanced_or_whole(key_block.min(len - k0), kernel.mr, !program);
                block.into_iter().map(move |(row, rows)| (k0 + row, rows))
            })
            .collect();
        let keys = QuantizedRows::new(kernel, &key_tiles, &keys, d, kernel.steps(d));
        Int8Keys::Rows { kernel, keys, tiles_per_block }
    }

    /// Keys and values packed once per sequence and head, for every block of queries: keys as
    /// (len, head_dim) weights, values as (head_dim, len).
    fn pack<W: PanelValue>(&self, route: Route) -> Packed<W> {
        let (nr, d) = (route.nr(), self.head_dim);
        let spans = self.segments.spans;
        let pairs: Vec<(usize, usize)> =
            (0..spans.len()).flat_map(|s| (0..self.heads).map(move |h| (s, h))).collect();
        let int8_keys = match route.scores {
            Some(_) => pairs.par_iter().map(|&pair| self.int8_keys(pair, route)).collect(),
            None => Vec::new(),
        };
        let mut parts = Vec::with_capacity(pairs.len());
        let (mut total, mut total_lines) = (0, 0);
        for &(s, _) in &pairs {
            let len = spans[s].1;
            let ((k_size, v_size), l_size) = (self.sizes::<W>(len, route), self.key_lines_len(len, route));
            parts.push(Parts {
                keys: total..total + k_size,
                values: total + k_size..total + k_size + v_size,
                lines: total_lines..total_lines + l_size,
            });
            total += k_size + v_size;
            total_lines += l_size;
        }
        let mut key_lines = Aligned::<f32>::scratch(total_lines);
        if let Some(kernel) = route.key_lines() {
            let key_block = route.key_block();
            split_into(key_lines.as_mut_slice(), parts.iter().map(|p| p.lines.len()))
                .into_par_iter()
                .zip(&pairs)
                .for_each(|(dst, &pair)| self.key_lines::<W>(pair, kernel, key_block, dst));
        }
        let mut panels = Aligned::<W>::scratch(total);
        let panel_parts =
            split_into(panels.as_mut_slice(), parts.iter().map(|p| p.keys.len() + p.values.len()));
        let hidden = self.heads * d;
        panel_parts.into_par_iter().zip(&pairs).zip(&parts).for_each(|((part, &(s, h)), at)| {
            let (start, len) = spans[s];
            let (keys, vals) = part.split_at_mut(at.keys.len());
            let k_src = Source::Rows {
                data: &self.rotated[start * self.rotated_width + hidden + h * d..],
                ld: self.rotated_width,
            };
            let v_src = Source::Columns {
                data: &self.values[start * self.value_width + 2 * hidden + h * d..],
                ld: self.value_width,
            };
            let pairs = matches!(route.kernel, Kernel::Native { .. });
            if !keys.is_empty() {
                W::pack(k_src, len, d, nr, pairs, keys);
            }
            W::pack(v_src, d, len, nr, pairs, vals);
        });
        Packed { panels, key_lines, parts, pairs, int8_keys }
    }

    /// Packs the keys and values, runs `block` on every block of queries of every (sequence,
    /// head), on the threads, and gathers the contexts into (tokens, hidden).
    fn run<W: PanelValue>(&self, route: Route, block: impl Fn(&Block<W>, &mut [f32]) + Sync) -> Vec<f32> {
        let packed = self.pack::<W>(route);
        let (nr, key_block, d, spans) = (route.nr(), route.key_block(), self.head_dim, self.segments.spans);
        let tokens: usize = spans.iter().map(|s| s.1).sum();
        let hidden = self.heads * d;
        let mut out = super::fresh(tokens * hidden);
        let out_ptr = SendPtr(out.as_mut_ptr());
        let tasks: Vec<(usize, usize, usize)> = packed
            .pairs
            .iter()
            .enumerate()
            .flat_map(|(i, &(s, _))| (0..spans[s].1).step_by(QUERY_BLOCK).map(move |q| (i, s, q)))
            .collect();
        let (panels, key_lines) = (packed.panels.as_slice(), packed.key_lines.as_slice());
        tasks.into_par_iter().for_each(|(i, s, q0)| {
            let (start, len) = spans[s];
            let (h, at) = (packed.pairs[i].1, &packed.parts[i]);
            let rows = QUERY_BLOCK.min(len - q0);
            let job = Block {
                queries: &self.rotated[(start + q0) * self.rotated_width + h * d..],
                query_stride: self.rotated_width,
                keys: &panels[at.keys.clone()],
                key_lines: &key_lines[at.lines.clone()],
                values: &panels[at.values.clone()],
                int8_keys: packed.int8_keys.get(i),
                nr,
                key_block,
                weights: route.weights(),
                head_dim: d,
                len,
                q0,
                rows,
                key_bias: self.segments.key_bias.map(|b| &b[start..start + len]),
                causal: self.segments.causal,
            };
            let mut context = vec![0f32; rows * d];
            block(&job, &mut context);
            for (i, row) in context.chunks(d).enumerate() {
                // SAFETY: this task alone writes these columns of these rows, inside `out`'s
                // capacity of tokens × hidden.
                let dst = unsafe {
                    std::slice::from_raw_parts_mut(
                        out_ptr.get().wrapping_add((start + q0 + i) * hidden + h * d),
                        d,
                    )
                };
                dst.copy_from_slice(row);
            }
        });
        packed.panels.recycle();
        packed.key_lines.recycle();
        // SAFETY: the tasks covered every (token, head) cell: each span's rows, all heads.
        unsafe { out.set_len(tokens * hidden) };
        out
    }
}

multiversion! {
    /// Rotates interleaved pairs of every head of q and k (and v), scaling q, into `dst`.
    /// `cos` and `sin` come per element (`Rotation`), so each output is one product with x and
    /// one with its pair partner, which vectorises.
    fn rotate(src: &[f32], dst: &mut [f32], cos: &[f32], sin: &[f32], head_dim: usize, hidden: usize, scale: f32) {
        for (part, (src, dst)) in src.chunks(hidden).zip(dst.chunks_mut(hidden)).enumerate() {
            let factor = if part == 0 { scale } else { 1.0 };
            for (src, dst) in src.chunks(head_dim).zip(dst.chunks_mut(head_dim)) {
                let pairs = dst.chunks_exact_mut(2).zip(src.chunks_exact(2));
                for ((d, x), (c, s)) in pairs.zip(cos.chunks_exact(2).zip(sin.chunks_exact(2))) {
                    d[0] = (x[0] * c[0] + x[1] * s[0]) * factor;
                    d[1] = (x[1] * c[1] + x[0] * s[1]) * factor;
                }
            }
        }
    }
}

/// The rotation tables per element rather than per pair: at position p, element 2i has
/// (cos θᵢ, −sin θᵢ) and element 2i + 1 (cos θᵢ, sin θᵢ), so that
/// `out[j] = x[j] · cos[j] + x[j ^ 1] · sin[j]`, which vectorises. A pass builds them once for
/// all its layers (`Mask::Segments`).
#[derive(Debug)]
pub(crate) struct Rotation {
    cos: Vec<f32>,
    sin: Vec<f32>,
    /// Positions covered.
    len: usize,
}

impl Rotation {
    /// From (positions, head_dim / 2) tables.
    pub fn new(cos: &Tensor, sin: &Tensor) -> Result<Self> {
        let (len, half) = cos.dims2()?;
        if sin.dims2()? != (len, half) {
            candle_bail!("rotation: cos {:?} and sin {:?} differ", cos.dims(), sin.dims())
        }
        let expand = |table: &Tensor, sign: f32| -> Result<Vec<f32>> {
            let table = View::new(table)?;
            Ok(table.slice().iter().flat_map(|&v| [sign * v, v]).collect())
        };
        Ok(Self { cos: expand(cos, 1.0)?, sin: expand(sin, -1.0)?, len })
    }
}

/// One task: `rows` queries from `q0` of one head of one sequence, against all its keys.
struct Block<'a, W> {
    /// The first query's rotated, scaled row; queries are `query_stride` apart.
    queries: &'a [f32],
    query_stride: usize,
    /// The sequence's keys and values of this head, packed as panels of `nr` columns (keys for
    /// the bf16 kernels).
    keys: &'a [W],
    /// The keys as the f32 kernel's input lines ([`Heads::key_lines`]), for the f32 kernels.
    key_lines: &'a [f32],
    values: &'a [W],
    /// The keys in int8, where the scores are int8 products (and `keys` is empty).
    int8_keys: Option<&'a Int8Keys>,
    nr: usize,
    /// Keys per step of the online softmax ([`Route::key_block`]).
    key_block: usize,
    /// The weights the softmax leaves for P·V on an f32 kernel ([`Route::weights`]).
    weights: Weights,
    head_dim: usize,
    len: usize,
    q0: usize,
    rows: usize,
    key_bias: Option<&'a [f32]>,
    causal: bool,
}

/// The online softmax's running state over one task's rows: each row's maximum and sum so far.
struct Running {
    max: Vec<f32>,
    sum: Vec<f32>,
}

impl Running {
    fn new(rows: usize) -> Self {
        Self { max: vec![f32::NEG_INFINITY; rows], sum: vec![0f32; rows] }
    }

    /// The state that a step of keys `k0..k0 + cols` of `block` reads and updates besides its
    /// scores.
    fn step<'a, W>(
        &'a mut self,
        block: &'a Block<W>,
        k0: usize,
        cols: usize,
        context: &'a mut [f32],
    ) -> Step<'a> {
        Step {
            bias: block.key_bias.map(|b| &b[k0..k0 + cols]),
            causal: block.causal,
            first_query: block.q0,
            first_key: k0,
            max: &mut self.max,
            sum: &mut self.sum,
            context,
            d: block.head_dim,
        }
    }
}

/// One step of the online softmax, besides its scores: the block's masking (padding keys, and
/// the causal mask from its first query and key), and the task's running maxima and sums and its
/// context so far.
struct Step<'a> {
    bias: Option<&'a [f32]>,
    causal: bool,
    first_query: usize,
    first_key: usize,
    max: &'a mut [f32],
    sum: &'a mut [f32],
    context: &'a mut [f32],
    d: usize,
}

impl Step<'_> {
    /// Query i's block is done: its maximum is now `new_max` and its block's weights sum to
    /// `block_sum`; what its sum and context held is rescaled to the new maximum.
    #[inline(always)]
    fn advance(&mut self, i: usize, new_max: f32, block_sum: f32) {
        let correction = math::exp(self.max[i] - new_max);
        self.sum[i] = self.sum[i] * correction + block_sum;
        self.max[i] = new_max;
        self.context[i * self.d..][..self.d].iter_mut().for_each(|c| *c *= correction);
    }
}

impl<W> Block<'_, W> {
    /// The task's queries, `query_stride` apart in the rotated rows, gathered `head_dim` apart,
    /// as int8 quantizing reads them.
    fn gathered_queries(&self) -> Vec<f32> {
        let d = self.head_dim;
        let mut queries = vec![0f32; self.rows * d];
        for (r, row) in queries.chunks_exact_mut(d).enumerate() {
            row.copy_from_slice(&self.queries[r * self.query_stride..][..d]);
        }
        queries
    }
}

impl<W: PanelValue> Block<'_, W> {
    /// Per block of `key_block` keys, whether to compute it: a block whose every key is padding,
    /// or after the last query under the causal mask, adds weights of exactly 0 (e^(s + f32::MIN
    /// − max) underflows) and leaves the running maximum alone, so skipping it changes no bit.
    /// That holds while every query keeps a key it sees in a computed block; where one might
    /// not, every block is computed, so that such rows come out uniform over all keys as
    /// transformers' do.
    fn live_blocks(&self, key_block: usize) -> Vec<bool> {
        let blocks = self.len.div_ceil(key_block);
        if self.key_bias.is_none() && !self.causal {
            return vec![true; blocks];
        }
        let open = |k: usize| self.key_bias.is_none_or(|b| b[k] == 0.0);
        let keys = |b: usize| b * key_block..((b + 1) * key_block).min(self.len);
        let last_query = self.q0 + self.rows - 1;
        let live: Vec<bool> =
            (0..blocks).map(|b| !(self.causal && b * key_block > last_query) && keys(b).any(open)).collect();
        // A key at or before the block's first query is seen by every query of the block.
        let seen_by_all = |k: usize| open(k) && (!self.causal || k <= self.q0);
        if (0..blocks).any(|b| live[b] && keys(b).any(seen_by_all)) {
            live
        } else {
            vec![true; blocks]
        }
    }

    /// The products on the level's f32 kernel, reading f32 panels, or bf16 ones widened. The
    /// scores are computed transposed (K·Qᵀ: a line per key, a lane per query), so that the
    /// softmax leaves its weights where P·V reads its input, lines one key apart, and nothing is
    /// packed between the two products; the softmax then runs across each line's queries.
    fn run_f32(&self, kernel: &F32Kernel, context: &mut [f32]) {
        let (d, nr, mr, stride, key_block) =
            (self.head_dim, self.nr, kernel.mr, kernel.a_stride, self.key_block);
        let (rows, tile) = (self.rows, W::tile(kernel));
        // A line per key, a lane per query; `stride` more floats after the last line, where a
        // tile of the last queries reads lanes past them (into accumulators it never stores).
        let most = key_block.min(self.len);
        let mut lines = Aligned::<f32>::scratch(most * rows + stride);
        // Pooled buffers, as in `run_bf16`: every value read is written first (`pack` clears
        // the padding).
        let query_panel = W::panel_len(d, nr);
        let mut source = match self.int8_keys {
            Some(keys) => LineScores::Int8(Int8Lines::new(self, keys)),
            None => {
                let mut queries = Aligned::<W>::scratch(rows.div_ceil(nr) * query_panel);
                let rows_of = Source::Rows { data: self.queries, ld: self.query_stride };
                W::pack(rows_of, rows, d, nr, false, queries.as_mut_slice());
                LineScores::Keys { queries }
            }
        };
        let query_tiles = tiles(rows, mr);
        let block_lines = key_block_lines(kernel, key_block, d);
        let value_panel = W::panel_len(self.len, nr);
        let zeros = [0f32; 32];
        // One tile: `rows` rows of `a`'s lines (`a_line` apart) times one panel `b` over `depth`
        // steps, into `cols` columns of `c`'s rows (`ldc` apart), added to them where `accumulate`.
        let product = |rows: usize,
                       (a, a_line): (&[f32], usize),
                       b: &[W],
                       depth: usize,
                       accumulate: bool,
                       (c, ldc, cols): (*mut f32, usize, usize)| {
            let tile_args =
                F32Tile { rows, a, a_line, b, depth, start: &zeros[..nr], accumulate, c, ldc, cols };
            // SAFETY: the kernel is one this CPU runs (the level in force has it), and it checks
            // its operands' sizes; `c` points into `lines` or `context`, which this task alone
            // holds, with room for the tile's rows and columns (each call says why).
            unsafe { tile(&tile_args) }
        };
        let mut running = Running::new(rows);
        for (b, (k0, live)) in (0..self.len).step_by(key_block).zip(self.live_blocks(key_block)).enumerate() {
            if !live {
                continue;
            }
            let cols = key_block.min(self.len - k0);
            let lines = &mut lines.as_mut_slice()[..cols * rows + stride];
            lines[cols * rows..].fill(0.0);
            match &mut source {
                LineScores::Int8(scores) => scores.fill(b, k0, lines, rows),
                LineScores::Keys { queries } => {
                    let keys = &self.key_lines[b * block_lines..];
                    for (t, (key, keys_here)) in tiles(cols, mr).into_iter().enumerate() {
                        let a = &keys[t * d * stride..][..d * stride];
                        for p in 0..rows.div_ceil(nr) {
                            let b = &queries.as_slice()[p * query_panel..][..query_panel];
                            // Inside `lines`: key < cols, p·nr < rows.
                            let c = lines.as_mut_ptr().wrapping_add(key * rows + p * nr);
                            product(keys_here, (a, stride), b, d, false, (c, rows, nr.min(rows - p * nr)));
                        }
                    }
                }
            }
            softmax_lines(lines, rows, cols, running.step(self, k0, cols, context), self.weights);
            // Context += P V for this block of keys: each tile of queries reads its lanes of
            // every key's line.
            for p in 0..d.div_ceil(nr) {
                let panel = &self.values[p * value_panel + k0 * nr..][..cols * nr];
                for &(query, queries_here) in &query_tiles {
                    // Inside `context`: query < rows, p·nr < d.
                    let c = context.as_mut_ptr().wrapping_add(query * d + p * nr);
                    product(
                        queries_here,
                        (&lines[query..], rows),
                        panel,
                        cols,
                        true,
                        (c, d, nr.min(d - p * nr)),
                    );
                }
            }
        }
        finish(context, &running.sum, d);
        lines.recycle();
        if let LineScores::Keys { queries } = source {
            queries.recycle();
        }
    }
}

/// Where a task's transposed scores come from on the f32 kernels.
enum LineScores<'a, W> {
    /// K·Qᵀ on the f32 kernel, reading the keys' input lines and the task's queries as its
    /// weight panels (rounded as `W` products take them).
    Keys { queries: Aligned<W> },
    /// int8 scores, K·Qᵀ on the int8 kernel.
    Int8(Int8Lines<'a>),
}

/// The mask of an AVX-512 vector's first `n` lanes (all 16 from 16 on).
#[cfg(target_arch = "x86_64")]
fn first_lanes(n: usize) -> u16 {
    if n >= 16 {
        0xFFFF
    } else {
        ((1u32 << n) - 1) as u16
    }
}

impl Block<'_, u16> {
    /// The products on the level's bf16 kernel (or, from its row count, its tile program):
    /// queries rounded to bf16 once, each block's softmax weights rounded as the online softmax
    /// writes them (it keeps its maxima and sums in f32). Both lie row by row as the kernels read
    /// their input, so that a tile's input is a slice from its first row: `mr` rows past the
    /// last make every tile's slice whole.
    fn run_bf16(
        &self,
        kernel: &'static Bf16Kernel,
        tiles: Option<(&'static Bf16Kernel, usize)>,
        context: &mut [f32],
    ) {
        let (kernel, program) = pick(kernel, tiles, self.rows);
        let (d, nr, mr) = (self.head_dim, kernel.nr, kernel.mr);
        let row_tiles = balanced_or_whole(self.rows, mr, !program);
        let q_steps = d.div_ceil(2);
        let q_stride = row_dwords(q_steps);
        // Pooled buffers: fresh ones of this size cost page faults and zeroing in every task.
        // What they held before is overwritten before it is read, or read only by rows past a
        // tile's, whose sums no output keeps.
        let int8 = match self.int8_keys {
            Some(Int8Keys::Panels { kernels, keys }) => Some(Int8Scores::new(self, *kernels, keys)),
            Some(Int8Keys::Rows { .. }) => unreachable!("the bf16 kernels read int8 scores a row per query"),
            None => None,
        };
        let query_rows = if int8.is_some() { 0 } else { self.rows };
        let mut queries = Aligned::<u32>::scratch((query_rows + mr) * q_stride);
        let mut query = vec![0f32; d];
        for (r, dst) in queries.as_mut_slice().chunks_exact_mut(q_stride).take(query_rows).enumerate() {
            query.copy_from_slice(&self.queries[r * self.query_stride..][..d]);
            round_rows(&query, d, 1, dst);
        }
        let queries_buffer = queries;
        let queries = queries_buffer.as_slice();

        let key_block = self.key_block;
        let mut running = Running::new(self.rows);
        let mut scores = Aligned::<f32>::scratch(self.rows * key_block.min(self.len));
        let most_stride = row_dwords(key_block.min(self.len).div_ceil(2));
        let mut weights = Aligned::<u32>::scratch((self.rows + mr) * most_stride);
        let mut block_context = vec![0f32; self.rows * d];
        let zeros = [0f32; 32];
        let (key_panel, value_panel) = (u16::panel_len(d, nr), u16::panel_len(self.len, nr));
        // One panel of output columns for every tile: `a` holds the input rows, `a_stride`
        // dwords apart; `c` is the first row's first output, rows `ldc` apart.
        let product =
            |a: &[u32], a_stride: usize, steps: usize, b: &[u16], cols: usize, c: *mut f32, ldc: usize| {
                let tile_dwords = Input::Rows.tile_dwords(steps, mr, 0);
                let tiles: Vec<Bf16Tile> = row_tiles
                    .iter()
                    .map(|&(row, rows)| Bf16Tile {
                        rows,
                        cols,
                        steps,
                        a: &a[row * a_stride..][..tile_dwords],
                        b,
                        bias: &zeros,
                        // Inside the caller's buffer: row < self.rows, and the columns within ldc.
                        c: c.wrapping_add(row * ldc),
                        ldc,
                    })
                    .collect();
                // SAFETY: the kernel is one this CPU runs (the level in force has it); the tiles'
                // operands are whole (`Bf16Tile::check` asserts it); each writes its own rows of
                // `cols` columns of the buffer `c` points into, which only this task holds.
                unsafe { (kernel.tiles)(&tiles) };
            };
        for (k0, live) in (0..self.len).step_by(key_block).zip(self.live_blocks(key_block)) {
            if !live {
                continue;
            }
            let cols = key_block.min(self.len - k0);
            let scores = &mut scores.as_mut_slice()[..self.rows * cols];
            if let Some(int8) = &int8 {
                int8.fill(k0, cols, scores);
            } else {
                for p in 0..cols.div_ceil(nr) {
                    let panel = &self.keys[(k0 / nr + p) * key_panel..][..key_panel];
                    let c = scores.as_mut_ptr().wrapping_add(p * nr);
                    product(queries, q_stride, q_steps, panel, nr.min(cols - p * nr), c, cols);
                }
            }
            let steps = cols.div_ceil(2);
            let stride = row_dwords(steps);
            // SAFETY: two u16 fit every u32 exactly, at no stricter alignment.
            let rounded = unsafe {
                let dwords = &mut weights.as_mut_slice()[..self.rows * stride];
                std::slice::from_raw_parts_mut(dwords.as_mut_ptr().cast::<u16>(), dwords.len() * 2)
            };
            softmax_step(scores, cols, running.step(self, k0, cols, context), rounded, stride);
            // The block's P V, added to what the softmax step rescaled: the kernels store sums
            // rather than add to their output.
            for p in 0..d.div_ceil(nr) {
                // Key k0 starts a step (k0 is even), at 2·nr values a step.
                let panel = &self.values[p * value_panel + k0 * nr..][..steps * 2 * nr];
                let c = block_context.as_mut_ptr().wrapping_add(p * nr);
                product(weights.as_slice(), stride, steps, panel, nr.min(d - p * nr), c, d);
            }
            add(context, &block_context);
        }
        finish(context, &running.sum, d);
        queries_buffer.recycle();
        scores.recycle();
        weights.recycle();
    }
}

/// A task's queries quantized for the int8 kernel (u8 per row, with a zero point), tile by tile
/// as the kernel reads them, and the keys they meet.
struct Int8Scores<'a> {
    kernel: &'static I8Kernel,
    keys: &'a PackedI8,
    queries: QuantizedRows,
}

impl<'a> Int8Scores<'a> {
    fn new<W>(block: &Block<W>, (kernel, tiles): I8Kernels, keys: &'a PackedI8) -> Self {
        let (rows, d) = (block.rows, block.head_dim);
        let (kernel, program) = pick(kernel, tiles, rows);
        let tiles = balanced_or_whole(rows, kernel.mr, !program);
        let queries = QuantizedRows::new(kernel, &tiles, &block.gathered_queries(), d, keys.steps());
        Self { kernel, keys, queries }
    }

    /// The scores of keys `k0..k0 + cols` (k0 on a panel) into `out`, rows `cols` apart.
    fn fill(&self, k0: usize, cols: usize, out: &mut [f32]) {
        let nr = self.kernel.nr;
        let tiles = self.queries.tiles();
        assert!(k0.is_multiple_of(nr) && out.len() >= tiles.last().map_or(0, |t| t.0 + t.1) * cols);
        let zeros = [0f32; 32];
        for p in 0..cols.div_ceil(nr) {
            let panel = self.keys.panel(k0 / nr + p);
            for (t, &(row, _)) in tiles.iter().enumerate() {
                // Inside `out` (asserted): row + rows ≤ its rows, p·nr + the tile's cols ≤ cols.
                let c = out.as_mut_ptr().wrapping_add(row * cols + p * nr);
                let tile = self.queries.tile(t, panel, &zeros[..nr], nr.min(cols - p * nr), c, cols);
                // SAFETY: the kernel is one this CPU runs (the level in force has it, or a tile
                // program of it); the kernels check the operands' sizes; the tile writes its rows'
                // columns of `out`, which this task alone holds.
                unsafe { (self.kernel.tile)(&tile) };
            }
        }
    }
}

/// A task's int8 scores a line per key (K·Qᵀ), as P·V on an f32 kernel reads them, with nothing
/// transposed between the products: the sequence's keys as the kernel's rows (u8 with zero
/// points), the task's queries as its panels (s8 per query). Where scores came a row per query
/// and were transposed into lines, in registers, the transposition took 9% of the int8 layer at
/// 8k tokens at `avx512-vnni`.
struct Int8Lines<'a> {
    kernel: &'static I8Kernel,
    keys: &'a QuantizedRows,
    tiles_per_block: usize,
    queries: PackedI8,
}

impl<'a> Int8Lines<'a> {
    fn new<W>(block: &Block<W>, keys: &'a Int8Keys) -> Self {
        let Int8Keys::Rows { kernel, keys, tiles_per_block } = keys else {
            unreachable!("the f32 kernels read int8 scores a line per key")
        };
        let queries =
            PackedI8::for_kernels(kernel, None, &block.gathered_queries(), block.rows, block.head_dim);
        Self { kernel, keys, tiles_per_block: *tiles_per_block, queries }
    }

    /// The scores of block `b` of keys (from key `k0`) into `lines`, a line per key, `rows`
    /// (the task's queries) floats apart.
    fn fill(&self, b: usize, k0: usize, lines: &mut [f32], rows: usize) {
        let nr = self.kernel.nr;
        let all = self.keys.tiles();
        let first = b * self.tiles_per_block;
        let block = &all[first..all.len().min(first + self.tiles_per_block)];
        let last = block.last().map_or(k0, |&(row, keys)| row + keys);
        assert!(block.first().is_none_or(|t| t.0 == k0) && lines.len() >= (last - k0) * rows);
        let zeros = [0f32; 32];
        for (t, &(key, _)) in block.iter().enumerate() {
            for p in 0..rows.div_ceil(nr) {
                // Inside `lines` (asserted): key − k0 + the tile's keys ≤ the block's, p·nr +
                // the tile's columns ≤ rows.
                let c = lines.as_mut_ptr().wrapping_add((key - k0) * rows + p * nr);
                let tile = self.keys.tile(
                    first + t,
                    self.queries.panel(p),
                    &zeros[..nr],
                    nr.min(rows - p * nr),
                    c,
                    rows,
                );
                // SAFETY: the kernel is one this CPU runs (the level in force has it, or a tile
                // program of it); the kernels check the operands' sizes; the tile writes its keys'
                // lines, lanes of its panel's queries, in `lines`, which this task alone holds.
                unsafe { (self.kernel.tile)(&tile) };
            }
        }
    }
}

multiversion! {
    /// One step of the online softmax for the bf16 kernels, on `scores` (`cols` a row): masks
    /// them, turns them into weights against each row's running maximum, and rescales what the
    /// context and sums hold so far. The weights go to `weights` rounded to bf16 as the bf16
    /// kernels read their input (row i at `i · stride` dwords, 2 keys to a dword, zero up to the
    /// stride; as u16 here), from an exponential as coarse as their rounding allows.
    fn softmax_step(scores: &mut [f32], cols: usize, step: Step, weights: &mut [u16], stride: usize) {
        let mut step = step;
        let bias = step.bias;
        for (i, row) in scores.chunks_mut(cols).enumerate() {
            if let Some(bias) = bias {
                row.iter_mut().zip(bias).for_each(|(s, b)| *s += b);
            }
            if step.causal {
                let query = step.first_query + i;
                for (j, s) in row.iter_mut().enumerate() {
                    let masked = step.first_key + j > query;
                    let padded = bias.is_some_and(|b| b[j] != 0.0);
                    if masked && !padded {
                        *s += f32::MIN;
                    }
                }
            }
            let new_max = step.max[i].max(math::lane_max(row, f32::NEG_INFINITY));
            let block_sum = bf16_weights(row, new_max, &mut weights[i * stride * 2..(i + 1) * stride * 2]);
            step.advance(i, new_max, block_sum);
        }
    }
}

/// The softmax weights that P·V on an f32 kernel reads.
#[derive(Clone, Copy)]
enum Weights {
    /// f32, from the exact exponential ([`Route::exact`]).
    Exact,
    /// f32, from the coarse one.
    Coarse,
    /// From the coarse one, rounded to bf16, as widened bf16 products take their input.
    Bf16,
}

multiversion! {
    /// [`softmax_step`] on transposed scores: `cols` lines, `rows` floats apart, one per key, of
    /// a lane per query. Each step runs along a line, across queries, so every lane is a query
    /// of its own and nothing is summed across lanes. The weights replace the scores, as
    /// `weights` says.
    fn softmax_lines(lines: &mut [f32], rows: usize, cols: usize, step: Step, weights: Weights) {
        let mut step = step;
        let (bias, causal, first_query, first_key) = (step.bias, step.causal, step.first_query, step.first_key);
        let mut new_max = [f32::NEG_INFINITY; QUERY_BLOCK];
        let new_max = &mut new_max[..rows];
        new_max.copy_from_slice(&step.max[..rows]);
        for (k, line) in lines.chunks_exact_mut(rows).take(cols).enumerate() {
            let padding = bias.map_or(0.0, |b| b[k]);
            if padding != 0.0 {
                line.iter_mut().for_each(|s| *s += padding);
            } else if causal {
                // The queries before this key.
                let before = (first_key + k).saturating_sub(first_query).min(rows);
                line[..before].iter_mut().for_each(|s| *s += f32::MIN);
            }
            new_max.iter_mut().zip(&*line).for_each(|(m, &s)| *m = m.max(s));
        }
        let mut block_sum = [0f32; QUERY_BLOCK];
        let block_sum = &mut block_sum[..rows];
        let round = matches!(weights, Weights::Bf16);
        for line in lines.chunks_exact_mut(rows).take(cols) {
            if let Weights::Exact = weights {
                exact_weights(line, new_max, block_sum);
                continue;
            }
            for ((s, &m), total) in line.iter_mut().zip(&*new_max).zip(block_sum.iter_mut()) {
                let e = math::exp_nonpositive_coarse(*s - m);
                *total += e;
                *s = if round { from_bf16(to_bf16(e)) } else { e };
            }
        }
        for (j, (&new_max, &block_sum)) in new_max.iter().zip(&*block_sum).enumerate() {
            step.advance(j, new_max, block_sum);
        }
    }
}

/// e^(s − m) of each lane of a key's `line` against its query's maximum in `max`, into `line`,
/// each added to its query's `total`: [`math::exp`], or at AVX-512 [`math::exp_avx512`] (half
/// the instructions; the f32 softmax's exponential had taken 12% of the f32 layer at 8k tokens).
fn exact_weights(line: &mut [f32], max: &[f32], total: &mut [f32]) {
    assert!(max.len() >= line.len() && total.len() >= line.len(), "exact_weights: lanes past the queries");
    #[cfg(target_arch = "x86_64")]
    if super::level() >= Level::Avx512 {
        // SAFETY: the level in force is one this CPU supports, and from avx512 on it has
        // AVX-512 F; `max` and `total` hold a lane for each of `line`'s (asserted).
        return unsafe { exact_weights_avx512(line, max, total) };
    }
    exact_weights_portable(line, max, total)
}

multiversion! {
    fn exact_weights_portable(line: &mut [f32], max: &[f32], total: &mut [f32]) {
        for ((s, &m), total) in line.iter_mut().zip(max).zip(total) {
            let e = math::exp(*s - m);
            *total += e;
            *s = e;
        }
    }
}

/// # Safety
/// The CPU has AVX-512 F, and `max` and `total` hold at least `line.len()` floats.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn exact_weights_avx512(line: &mut [f32], max: &[f32], total: &mut [f32]) {
    use std::arch::x86_64::*;
    for j in (0..line.len()).step_by(16) {
        let mask = first_lanes(line.len() - j);
        // SAFETY (the block): the lanes from j that `mask` keeps exist in all three slices (the
        // caller); masked-off lanes are neither read nor written, and do not fault.
        unsafe {
            let (s_at, m_at, t_at) =
                (line.as_mut_ptr().add(j), max.as_ptr().add(j), total.as_mut_ptr().add(j));
            let s = _mm512_maskz_loadu_ps(mask, s_at);
            let e = math::exp_avx512(_mm512_sub_ps(s, _mm512_maskz_loadu_ps(mask, m_at)));
            _mm512_mask_storeu_ps(s_at, mask, e);
            _mm512_mask_storeu_ps(t_at, mask, _mm512_add_ps(_mm512_maskz_loadu_ps(mask, t_at), e));
        }
    }
}

/// e^(s − max) of a row's scores, coarse (see [`math::exp_nonpositive_coarse`]), rounded to bf16
/// into `out` in key order (zero past them, to its end), and their sum in f32. A function of its
/// own, as the rounding has an instruction of its own where the level has bf16 products.
fn bf16_weights(row: &[f32], max: f32, out: &mut [u16]) -> f32 {
    #[cfg(target_arch = "x86_64")]
    if super::level() >= Level::Avx512Bf16 {
        // SAFETY: the level in force is one this CPU supports, and from avx512-bf16 on it has
        // AVX-512 F, BW, VL, DQ and BF16.
        return unsafe { bf16_weights_avx512_bf16(row, max, out) };
    }
    bf16_weights_rounded(row, max, out)
}

multiversion! {
    fn bf16_weights_rounded(row: &[f32], max: f32, out: &mut [u16]) -> f32 {
        let mut lanes = [0f32; 16];
        let mut chunks = row.chunks_exact(16);
        for (chunk, line) in (&mut chunks).zip(out.chunks_exact_mut(16)) {
            let mut e = [0f32; 16];
            for ((e, total), &s) in e.iter_mut().zip(lanes.iter_mut()).zip(chunk) {
                *e = math::exp_nonpositive_coarse(s - max);
                *total += *e;
            }
            line.iter_mut().zip(&e).for_each(|(o, &e)| *o = to_bf16(e));
        }
        bf16_tail(chunks.remainder(), max, out, row.len()) + lanes.iter().sum::<f32>()
    }
}

/// The last `tail.len()` (< 32) scores of a row of `cols` into `out`, through one padded chunk,
/// and the padding zeroed: their sum.
#[inline(always)]
fn bf16_tail(tail: &[f32], max: f32, out: &mut [u16], cols: usize) -> f32 {
    // The row's padding too: old bits there could be NaN, which times a zero value is NaN.
    out[cols..].fill(0);
    // Rows of whole chunks (blocks of 512 keys) end here, every row of every block.
    if tail.is_empty() {
        return 0.0;
    }
    let mut e = [f32::NEG_INFINITY; 32];
    e[..tail.len()].copy_from_slice(tail);
    e.iter_mut().for_each(|e| *e = math::exp_nonpositive_coarse(*e - max));
    let done = cols - tail.len();
    out[done..cols].iter_mut().zip(&e).for_each(|(o, &e)| *o = to_bf16(e));
    e.iter().sum()
}

/// [`bf16_weights`] with `vcvtne2ps2bf16`, which rounds as [`to_bf16`] does (to nearest, ties to
/// even, NaN kept a NaN; the weights are never subnormal, which it would flush): its rounding
/// had taken a third of the softmax's instructions.
///
/// # Safety
/// The CPU has AVX-512 F, BW, VL, DQ and BF16.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512dq,avx2,fma,avx512bf16")]
unsafe fn bf16_weights_avx512_bf16(row: &[f32], max: f32, out: &mut [u16]) -> f32 {
    use std::arch::x86_64::*;
    // SAFETY (the block): the CPU has AVX-512 F, DQ and BF16 (the caller); each chunk holds 32
    // floats and each line 32 u16 (64 bytes).
    unsafe {
        // math::exp_nonpositive_coarse in registers, with `vrndscaleps` for the rounding and
        // `vscalefps` for 2^n: the same polynomial, nine instructions a vector. (n = ⌊t⌋, which
        // `vreduceps` and `vscalefps` take in one instruction each, with the polynomial moved to
        // [0, 1), measured no faster, and doubled bf16's largest probability change on both
        // transformers fixtures.)
        let exp = |s: __m512| {
            let t = _mm512_mul_ps(
                _mm512_sub_ps(s, _mm512_set1_ps(max)),
                _mm512_set1_ps(std::f32::consts::LOG2_E),
            );
            // Not below the least (NaN stays NaN, as in math::exp_nonpositive_coarse).
            let keep = _mm512_cmp_ps_mask::<_CMP_NLT_UQ>(t, _mm512_set1_ps(math::EXP2_COARSE_MIN));
            let n = _mm512_roundscale_ps::<{ _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC }>(t);
            let f = _mm512_sub_ps(t, n);
            let [c0, c1, c2, c3] = math::EXP2_COARSE.map(|c| _mm512_set1_ps(c));
            let p = _mm512_fmadd_ps(_mm512_fmadd_ps(_mm512_fmadd_ps(c3, f, c2), f, c1), f, c0);
            _mm512_maskz_scalef_ps(keep, p, n)
        };
        let mut total = _mm512_setzero_ps();
        let mut chunks = row.chunks_exact(32);
        for (chunk, line) in (&mut chunks).zip(out.chunks_exact_mut(32)) {
            let lo = exp(_mm512_loadu_ps(chunk.as_ptr()));
            let hi = exp(_mm512_loadu_ps(chunk.as_ptr().add(16)));
            total = _mm512_add_ps(total, _mm512_add_ps(lo, hi));
            // The low half of the result is the second operand's.
            let rounded: __m512i = std::mem::transmute(_mm512_cvtne2ps_pbh(hi, lo));
            _mm512_storeu_si512(line.as_mut_ptr().cast(), rounded);
        }
        bf16_tail(chunks.remainder(), max, out, row.len()) + _mm512_reduce_add_ps(total)
    }
}

multiversion! {
    fn add(context: &mut [f32], block: &[f32]) {
        context.iter_mut().zip(block).for_each(|(c, b)| *c += b);
    }
}

multiversion! {
    fn finish(context: &mut [f32], sum: &[f32], d: usize) {
        for (row, &s) in context.chunks_mut(d).zip(sum) {
            let inv = 1.0 / s;
            row.iter_mut().for_each(|c| *c *= inv);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_core::Device;

    /// Values in [-2, 2).
    fn noise(n: usize, seed: u64) -> Vec<f32> {
        crate::runtime::kernels::noise(n, seed).into_iter().map(|v| v * 4.0).collect()
    }

    /// Attention as written in the paper, in f64, one query at a time.
    #[allow(clippy::too_many_arguments)]
    fn reference(
        qkv: &[f32],
        segments: &Segments,
        cos: &[f32],
        sin: &[f32],
        heads: usize,
        d: usize,
        rotary_value: bool,
    ) -> Vec<f64> {
        let hidden = heads * d;
        let tokens = qkv.len() / (3 * hidden);
        let rotate = |t: usize, part: usize, h: usize, pos: usize| -> Vec<f64> {
            let x = &qkv[t * 3 * hidden + part * hidden + h * d..][..d];
            if part == 2 && !rotary_value {
                return x.iter().map(|&v| v as f64).collect();
            }
            let mut out = vec![0f64; d];
            for i in 0..d / 2 {
                let (c, s) = (cos[pos * d / 2 + i] as f64, sin[pos * d / 2 + i] as f64);
                let (x0, x1) = (x[2 * i] as f64, x[2 * i + 1] as f64);
                out[2 * i] = x0 * c - x1 * s;
                out[2 * i + 1] = x0 * s + x1 * c;
            }
            out
        };
        let mut out = vec![0f64; tokens * hidden];
        for &(start, len) in segments.spans {
            for h in 0..heads {
                // Rotated once per position: under qemu, rotating every key again for every query
                // made this reference most of the kernel tests' time.
                let keys: Vec<Vec<f64>> = (0..len).map(|ki| rotate(start + ki, 1, h, ki)).collect();
                let values: Vec<Vec<f64>> = (0..len).map(|ki| rotate(start + ki, 2, h, ki)).collect();
                for qi in 0..len {
                    let q = rotate(start + qi, 0, h, qi);
                    let scores: Vec<f64> = keys
                        .iter()
                        .enumerate()
                        .map(|(ki, k)| {
                            let mut s = q.iter().zip(k).map(|(a, b)| a * b).sum::<f64>() / (d as f64).sqrt();
                            if let Some(bias) = segments.key_bias {
                                s += bias[start + ki] as f64;
                            }
                            if segments.causal && ki > qi {
                                s += f32::MIN as f64;
                            }
                            s
                        })
                        .collect();
                    let max = scores.iter().copied().fold(f64::NEG_INFINITY, f64::max);
                    let weights: Vec<f64> = scores.iter().map(|s| (s - max).exp()).collect();
                    let total: f64 = weights.iter().sum();
                    for (w, v) in weights.iter().zip(&values) {
                        for j in 0..d {
                            out[(start + qi) * hidden + h * d + j] += w / total * v[j];
                        }
                    }
                }
            }
        }
        out
    }

    /// The bf16 softmax's weights at the level in force (at `avx512-bf16` and `amx`, the
    /// exponential in registers): e^(s − max) within the coarse exponential's 1e-4 and bf16's
    /// rounding (up to 2⁻⁸ relative: 8 significant bits), masked keys exactly 0, the padding
    /// past the row zeroed, and the sum within 1e-4 of e^(s − max)'s.
    #[test]
    fn bf16_weights_are_the_rounded_exponentials() {
        let cols = 77;
        let row: Vec<f32> = (0..cols)
            .map(|j| if j % 11 == 5 { f32::MIN + 3.0 } else { (j as f32 * 0.37).sin() * 40.0 - 60.0 })
            .collect();
        let max = row.iter().copied().fold(f32::NEG_INFINITY, f32::max) + 0.25;
        let mut out = vec![u16::MAX; 96];
        let sum = bf16_weights(&row, max, &mut out);
        let mut want_sum = 0f64;
        for (j, &s) in row.iter().enumerate() {
            let want = (s as f64 - max as f64).exp();
            want_sum += want;
            let got = from_bf16(out[j]) as f64;
            if j % 11 == 5 {
                assert_eq!(got, 0.0, "masked key {j}");
            } else {
                assert!((got - want).abs() <= want * (1e-4 + 2f64.powi(-8)), "key {j}: {got} against {want}");
            }
        }
        assert!(out[cols..].iter().all(|&w| w == 0), "the padding past the row");
        assert!((sum as f64 - want_sum).abs() <= want_sum * 1e-4, "sum {sum} against {want_sum}");
    }

    /// The largest |ours − want|, NaN where any is NaN.
    fn worst_error(ours: &[f32], want: &[f64]) -> f64 {
        crate::runtime::kernels::largest(ours.iter().zip(want).map(|(&a, &b)| (f64::from(a) - b).abs()))
    }

    /// Which tokens of a case are padding.
    #[derive(Debug, Clone, Copy, PartialEq)]
    enum Pad {
        None,
        Last(usize),
        First(usize),
    }

    /// bf16's bound on these inputs (values in [-2, 2), head size 8): each of q, k, v and the
    /// weights rounded to 8 significant bits strays by up to 2⁻⁸ of itself.
    const BF16_BOUND: f64 = 3e-2;

    /// int8 scores' bound on these inputs: queries keep 8 bits of their row's range and keys 7 (6
    /// where the kernel takes weights of ±63) of their largest magnitude. Twice the most seen
    /// over these cases at any level (2.7e-2, at `avx2`, the keys of 6 bits).
    const INT8_BOUND: f64 = 6e-2;

    #[test]
    fn blocked_attention_equals_attention_across_many_blocks() {
        // Several query and key blocks per sequence, a ragged last block, packed sequences of
        // different lengths, padding keys, a causal mask, rotated values.
        let (heads, d) = (2, 8);
        let hidden = heads * d;
        let longest = 3 * KEY_BLOCK + 37;
        let angles = noise(longest * d / 2, 7);
        let cos: Vec<f32> = angles.iter().map(|a| a.cos()).collect();
        let sin: Vec<f32> = angles.iter().map(|a| a.sin()).collect();
        let cos_t = tensor(cos.clone(), &[longest, d / 2]).unwrap();
        let sin_t = tensor(sin.clone(), &[longest, d / 2]).unwrap();
        let short = QUERY_BLOCK + 5;
        // (spans, padded keys, causal, rotary values).
        let cases = [
            (vec![(0, longest), (longest, short)], Pad::None, false, false),
            (vec![(0, longest), (longest, short)], Pad::None, true, false),
            (vec![(0, longest), (longest, longest)], Pad::Last(100), false, true),
            (vec![(0, short), (short, longest)], Pad::Last(100), true, true),
            // Whole key blocks of padding, which are skipped; and a sequence of padding alone,
            // whose rows come out uniform over all its keys, as transformers' do.
            (vec![(0, longest), (longest, short)], Pad::Last(short + KEY_BLOCK + 200), false, false),
            (vec![(0, short), (short, longest)], Pad::First(short), false, false),
        ];
        for (spans, pad, causal, rotary_value) in cases {
            let tokens: usize = spans.iter().map(|s| s.1).sum();
            let qkv = noise(tokens * 3 * hidden, tokens as u64);
            let padded = |t: usize| match pad {
                Pad::None => false,
                Pad::Last(n) => t >= tokens - n,
                Pad::First(n) => t < n,
            };
            let bias: Vec<f32> = (0..tokens).map(|t| if padded(t) { f32::MIN } else { 0.0 }).collect();
            let segments =
                Segments { spans: &spans, key_bias: (pad != Pad::None).then_some(&bias[..]), causal };
            let qkv_t = Tensor::from_vec(qkv.clone(), (tokens, 3 * hidden), &Device::Cpu).unwrap();
            let want = reference(&qkv, &segments, &cos, &sin, heads, d, rotary_value);
            let mut bf16_outputs: Vec<(Level, Vec<f32>)> = Vec::new();
            for level in crate::runtime::kernels::tested_levels("blocked attention") {
                for (products, bound) in
                    [(Products::F32, 1e-4), (Products::Bf16, BF16_BOUND), (Products::Int8, INT8_BOUND)]
                {
                    let rotation = Rotation::new(&cos_t, &sin_t).unwrap();
                    let ours =
                        attention(level, products, &qkv_t, &segments, &rotation, heads, d, rotary_value)
                            .unwrap();
                    let ours = ours.flatten_all().unwrap().to_vec1::<f32>().unwrap();
                    let worst = worst_error(&ours, &want);
                    assert!(
                        worst < bound,
                        "{level:?} {products:?}: spans {spans:?} {pad:?} causal {causal}: max abs {worst:e}"
                    );
                    if products == Products::Bf16
                        && !matches!(Route::new(level, products, 0).kernel, Kernel::F32(_))
                    {
                        bf16_outputs.push((level, ours));
                    }
                }
            }
            // The AMX tile program (on the model unit, as this CPU may have no tile unit) from 8
            // rows on, and the register-tile path below that: the tiles of 32 whole rows.
            let model = &crate::runtime::kernels::amx::tests::MODEL_BF16;
            let route = Route {
                kernel: Kernel::Native { kernel: model, tiles: Some((model, 8)) },
                scores: None,
                exact: false,
            };
            let rotation = Rotation::new(&cos_t, &sin_t).unwrap();
            let ours = attention_by(route, &qkv_t, &segments, &rotation, heads, d, rotary_value).unwrap();
            bf16_outputs.push((Level::Amx, ours.flatten_all().unwrap().to_vec1::<f32>().unwrap()));
            // Every level with bf16 products rounds the same operands (x86's key blocks all hold 512 keys),
            // whether its products run on a bf16 kernel or widen for an f32 one: the results
            // differ by the order of f32 sums, and where a score's last bit moves a weight across
            // a bf16 rounding boundary, by one rounding of that weight (a hundredth of the bound).
            let x86 = |l: &Level| matches!(l, Level::Avx2 | Level::AvxVnni) || *l >= Level::Avx512;
            let same_blocks: Vec<_> =
                bf16_outputs.iter().filter(|(l, _)| x86(l) || *l == Level::Portable).collect();
            for pair in same_blocks.windows(2) {
                let ((a_level, a), (b_level, b)) = (pair[0], pair[1]);
                let worst = worst_error(a, &b.iter().map(|&y| f64::from(y)).collect::<Vec<_>>());
                assert!(worst < 3e-4, "bf16 at {a_level:?} and {b_level:?} differ by {worst:e}");
            }

            // int8 scores a line per key (for P·V on an f32 kernel) on every level's int8 kernel,
            // where the level takes them and where it does not, and a row per query (for P·V on
            // a bf16 kernel, here the AMX model's) on the levels that have one; beside the AMX
            // tile program on the model unit (from 8 rows on, the model as register kernel
            // below), with the same P·V. Kernels of the same weight range quantize alike and sum
            // exactly, so their scores, and all that follows in blocks of the same keys, are
            // equal bit for bit, as the linears' are.
            let bf16_model = &crate::runtime::kernels::amx::tests::MODEL_BF16;
            let levels = crate::runtime::kernels::tested_levels("int8 scores");
            let with_bf16: Vec<Level> =
                levels.iter().copied().filter(|&l| Bf16Kernel::for_level(l).is_some()).collect();
            for (kernel, levels) in [
                (Kernel::Widened(F32Kernel::for_level(Level::Portable)), levels.clone()),
                (Kernel::Native { kernel: bf16_model, tiles: Some((bf16_model, 8)) }, with_bf16),
            ] {
                let int8 = |scores| {
                    let rotation = Rotation::new(&cos_t, &sin_t).unwrap();
                    let route = Route { kernel, scores: Some(scores), exact: false };
                    let ours =
                        attention_by(route, &qkv_t, &segments, &rotation, heads, d, rotary_value).unwrap();
                    ours.flatten_all().unwrap().to_vec1::<f32>().unwrap()
                };
                let lines = !matches!(kernel, Kernel::Native { .. });
                let model = &crate::runtime::kernels::amx::tests::MODEL;
                let program = int8((model, Some((model, 8))));
                let worst = worst_error(&program, &want);
                assert!(
                    worst < INT8_BOUND,
                    "int8 scores on the tile program, lines {lines}: max abs {worst:e}"
                );
                for level in levels {
                    let scores = (I8Kernel::for_level(level), I8Kernel::tiles_for_level(level));
                    let ours = int8(scores);
                    let worst = worst_error(&ours, &want);
                    assert!(
                        worst < INT8_BOUND,
                        "int8 scores at {level:?}, lines {lines}: spans {spans:?} {pad:?} causal {causal}: \
                         max abs {worst:e}"
                    );
                    // Equal only in the same blocks of keys: a row per query, the blocks are a
                    // multiple of the int8 kernel's panels too (NEON's `sdot`, of 12 columns, would
                    // take 480 keys here; the x86 kernels' 32, 512).
                    let key_block = |scores| Route { kernel, scores: Some(scores), exact: false }.key_block();
                    if scores.0.weight_max == model.weight_max
                        && key_block(scores) == key_block((model, None))
                    {
                        assert!(
                            ours.iter().zip(&program).all(|(a, b)| a.to_bits() == b.to_bits()),
                            "int8 scores at {level:?}, lines {lines}, differ from the tile program's: \
                             spans {spans:?} {pad:?}"
                        );
                    }
                }
            }
        }
    }
}
