//! Multi-head self-attention with RoFormer's rotation, fused: from the packed projections
//! (tokens, 3 × hidden) straight to the merged context (tokens, hidden), with no head split or
//! merge copies, no mask tensor and no (seq × seq) score matrix.
//!
//! Tokens form sequences (`Segments`): back to back without padding (varlen), or padded rows
//! of equal length with a key mask. Each task takes one block of queries of one head of one
//! sequence and walks the keys block by block with an online softmax (flash attention), so
//! memory grows linearly with the sequence length.

use candle_core::Tensor;
use rayon::prelude::*;

use super::gemm::{multiply_f32, pack_panels, Panels, Source, Start};
use super::layout::Aligned;
use super::tile_f32::F32Kernel;
use super::{math, multiversion, tensor, Level, SendPtr, View};
use crate::error::{candle_bail, Result};

/// Queries per task, and keys per step of the online softmax (rounded down to a multiple of the
/// kernel's nr, so that each block of keys starts on a panel: 504 for NEON's 12).
const QUERY_BLOCK: usize = 128;
const KEY_BLOCK: usize = 512;

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

/// The attention of `qkv` (tokens, 3 × heads × head_dim): queries, keys and values side by side.
/// `rotation` covers the longest sequence.
#[allow(clippy::too_many_arguments)]
pub(crate) fn attention(
    level: Level,
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
    let kernel = F32Kernel::for_level(level);
    let nr = kernel.nr;
    // Keys and values packed as the GEMM's panels once per sequence and head, for every block of
    // queries: keys as (len, head_dim) weights, values as (head_dim, len).
    let pairs: Vec<(usize, usize)> =
        (0..segments.spans.len()).flat_map(|s| (0..heads).map(move |h| (s, h))).collect();
    let sizes = |len: usize| (len.div_ceil(nr) * nr * head_dim, head_dim.div_ceil(nr) * nr * len);
    let mut offsets = Vec::with_capacity(pairs.len());
    let mut total = 0;
    for &(s, _) in &pairs {
        let (k_size, v_size) = sizes(segments.spans[s].1);
        offsets.push(total);
        total += k_size + v_size;
    }
    let mut panels = Aligned::scratch(total);
    {
        let mut rest = panels.as_mut_slice();
        let mut parts = Vec::with_capacity(pairs.len());
        for &(s, _) in &pairs {
            let (k_size, v_size) = sizes(segments.spans[s].1);
            let (part, tail) = rest.split_at_mut(k_size + v_size);
            parts.push(part);
            rest = tail;
        }
        parts.into_par_iter().zip(&pairs).for_each(|(part, &(s, h))| {
            let (start, len) = segments.spans[s];
            let (keys, vals) = part.split_at_mut(sizes(len).0);
            let k_src = Source::Rows {
                data: &rotated[start * rotated_width + hidden + h * head_dim..],
                ld: rotated_width,
            };
            pack_panels(k_src, len, head_dim, nr, keys);
            let v_src = Source::Columns {
                data: &values[start * value_width + 2 * hidden + h * head_dim..],
                ld: value_width,
            };
            pack_panels(v_src, head_dim, len, nr, vals);
        });
    }
    let panels_ref = panels.as_slice();

    let mut out = Vec::with_capacity(tokens * hidden);
    let out_ptr = SendPtr(out.as_mut_ptr());
    let tasks: Vec<(usize, usize, usize)> = pairs
        .iter()
        .enumerate()
        .flat_map(|(i, &(s, _))| (0..segments.spans[s].1).step_by(QUERY_BLOCK).map(move |q| (i, s, q)))
        .collect();
    let rotated = &rotated[..];
    tasks.into_par_iter().for_each(|(i, s, q0)| {
        let (start, len) = segments.spans[s];
        let h = pairs[i].1;
        let (k_size, _) = sizes(len);
        let part = &panels_ref[offsets[i]..];
        let rows = QUERY_BLOCK.min(len - q0);
        let job = Block {
            kernel,
            queries: &rotated[(start + q0) * rotated_width + h * head_dim..],
            query_stride: rotated_width,
            keys: &part[..k_size],
            values: &part[k_size..],
            head_dim,
            len,
            q0,
            rows,
            key_bias: segments.key_bias.map(|b| &b[start..start + len]),
            causal: segments.causal,
        };
        let mut context = vec![0f32; rows * head_dim];
        job.run(&mut context);
        for (i, row) in context.chunks(head_dim).enumerate() {
            // SAFETY: this task alone writes these columns of these rows, inside `out`'s
            // capacity of tokens × hidden.
            let dst = unsafe {
                std::slice::from_raw_parts_mut(
                    out_ptr.get().wrapping_add((start + q0 + i) * hidden + h * head_dim),
                    head_dim,
                )
            };
            dst.copy_from_slice(row);
        }
    });
    panels.recycle();
    // SAFETY: the tasks covered every (token, head) cell: each span's rows, all heads.
    unsafe { out.set_len(tokens * hidden) };
    tensor(out, &[tokens, hidden])
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
struct Block<'a> {
    kernel: &'static F32Kernel,
    /// The first query's rotated, scaled row; queries are `query_stride` apart.
    queries: &'a [f32],
    query_stride: usize,
    /// The sequence's keys and values of this head, packed as panels.
    keys: &'a [f32],
    values: &'a [f32],
    head_dim: usize,
    len: usize,
    q0: usize,
    rows: usize,
    key_bias: Option<&'a [f32]>,
    causal: bool,
}

impl Block<'_> {
    fn run(&self, context: &mut [f32]) {
        let (d, nr) = (self.head_dim, self.kernel.nr);
        let key_block = KEY_BLOCK / nr * nr;
        let mut max = vec![f32::NEG_INFINITY; self.rows];
        let mut sum = vec![0f32; self.rows];
        let mut scores = vec![0f32; self.rows * key_block.min(self.len)];
        let mut scratch = Aligned::default();
        for k0 in (0..self.len).step_by(key_block) {
            let cols = key_block.min(self.len - k0);
            let scores = &mut scores[..self.rows * cols];
            // Scores = Q Kᵀ for this block of keys (q is already scaled); blocks start on a
            // panel, as the key block is a multiple of nr.
            let keys =
                Panels { data: &self.keys[(k0 / nr) * d * nr..], stride: d * nr, n: cols, k0: 0, depth: d };
            // SAFETY: `scores` holds rows × cols floats, cols apart, and only this call touches it.
            unsafe {
                multiply_f32(
                    self.kernel,
                    self.queries,
                    self.query_stride,
                    self.rows,
                    keys,
                    Start::Zero,
                    scores.as_mut_ptr(),
                    cols,
                    false,
                    &mut scratch,
                )
            };
            let bias = self.key_bias.map(|b| &b[k0..k0 + cols]);
            softmax_step(scores, cols, bias, self.causal, self.q0, k0, &mut max, &mut sum, context, d);
            // Context += P V for this block of keys.
            let values = Panels { data: self.values, stride: self.len * nr, n: d, k0, depth: cols };
            // SAFETY: `context` holds rows × d floats, d apart, and only this call touches it.
            unsafe {
                multiply_f32(
                    self.kernel,
                    scores,
                    cols,
                    self.rows,
                    values,
                    Start::Accumulate,
                    context.as_mut_ptr(),
                    d,
                    false,
                    &mut scratch,
                )
            };
        }
        finish(context, &sum, d);
    }
}

multiversion! {
    /// One step of the online softmax: masks the block's scores, turns them into weights against
    /// each row's running maximum, and rescales what the context and sums hold so far.
    #[allow(clippy::too_many_arguments)]
    fn softmax_step(
        scores: &mut [f32],
        cols: usize,
        bias: Option<&[f32]>,
        causal: bool,
        first_query: usize,
        first_key: usize,
        max: &mut [f32],
        sum: &mut [f32],
        context: &mut [f32],
        d: usize,
    ) {
        for (i, row) in scores.chunks_mut(cols).enumerate() {
            if let Some(bias) = bias {
                row.iter_mut().zip(bias).for_each(|(s, b)| *s += b);
            }
            if causal {
                let query = first_query + i;
                for (j, s) in row.iter_mut().enumerate() {
                    let masked = first_key + j > query;
                    let padded = bias.is_some_and(|b| b[j] != 0.0);
                    if masked && !padded {
                        *s += f32::MIN;
                    }
                }
            }
            let new_max = max[i].max(math::lane_max(row, f32::NEG_INFINITY));
            let correction = math::exp(max[i] - new_max);
            let mut block_sum = [0f32; 16];
            let mut chunks = row.chunks_exact_mut(16);
            for chunk in &mut chunks {
                for (total, s) in block_sum.iter_mut().zip(chunk) {
                    *s = math::exp(*s - new_max);
                    *total += *s;
                }
            }
            // The ragged tail runs through one padded chunk, so that its exponentials vectorise
            // too (e^-inf is 0): short sequences have most of their keys there.
            let tail = chunks.into_remainder();
            let mut padded = [f32::NEG_INFINITY; 16];
            padded[..tail.len()].copy_from_slice(tail);
            padded.iter_mut().for_each(|s| *s = math::exp(*s - new_max));
            tail.copy_from_slice(&padded[..tail.len()]);
            let tail_sum: f32 = padded.iter().sum();
            sum[i] = sum[i] * correction + block_sum.iter().sum::<f32>() + tail_sum;
            max[i] = new_max;
            context[i * d..i * d + d].iter_mut().for_each(|c| *c *= correction);
        }
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
        let cases = [
            (vec![(0, longest), (longest, short)], false, false, false),
            (vec![(0, longest), (longest, short)], false, true, false),
            (vec![(0, longest), (longest, longest)], true, false, true),
            (vec![(0, short), (short, longest)], false, true, true),
        ];
        for (spans, padded, causal, rotary_value) in cases {
            let tokens: usize = spans.iter().map(|s| s.1).sum();
            let qkv = noise(tokens * 3 * hidden, tokens as u64);
            // Padding: the last 100 keys of the second sequence.
            let bias: Vec<f32> =
                (0..tokens).map(|t| if padded && t >= tokens - 100 { f32::MIN } else { 0.0 }).collect();
            let segments = Segments { spans: &spans, key_bias: padded.then_some(&bias[..]), causal };
            let qkv_t = Tensor::from_vec(qkv.clone(), (tokens, 3 * hidden), &Device::Cpu).unwrap();
            let want = reference(&qkv, &segments, &cos, &sin, heads, d, rotary_value);
            for level in crate::runtime::kernels::tested_levels("blocked attention") {
                let rotation = Rotation::new(&cos_t, &sin_t).unwrap();
                let ours = attention(level, &qkv_t, &segments, &rotation, heads, d, rotary_value).unwrap();
                let ours = ours.flatten_all().unwrap().to_vec1::<f32>().unwrap();
                let worst = ours.iter().zip(&want).map(|(a, b)| (*a as f64 - b).abs()).fold(0.0, f64::max);
                assert!(
                    worst < 1e-4,
                    "{level:?}: spans {spans:?} padded {padded} causal {causal}: max abs {worst:e}"
                );
            }
        }
    }
}
