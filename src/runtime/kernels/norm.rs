//! The post-norm of every sublayer: `norm(x + residual)` in one pass over each row.

use std::mem::MaybeUninit;

use candle_core::Tensor;
use rayon::prelude::*;

use super::math::lane_sum;
use super::{multiversion, tensor, View};
use crate::error::{candle_bail, Result};

/// `x + residual`, normalised over the last dimension: LayerNorm with `affine` (weight, bias),
/// or the weightless RMS norm without.
pub(crate) fn add_norm(
    xs: &Tensor,
    residual: Option<&Tensor>,
    affine: Option<(&Tensor, &Tensor)>,
    eps: f64,
) -> Result<Tensor> {
    let width = *xs.dims().last().unwrap_or(&0);
    let xs_c = xs.contiguous()?;
    let x = View::new(&xs_c)?;
    let residual_c = residual.map(Tensor::contiguous).transpose()?;
    let r = residual_c.as_ref().map(View::new).transpose()?;
    if let Some(r) = &r {
        if r.slice().len() != x.slice().len() {
            candle_bail!("add_norm: residual {:?} does not match {:?}", residual.map(Tensor::dims), xs.dims())
        }
    }
    let affine =
        affine.map(|(w, b)| Ok::<_, crate::error::Error>((View::new(w)?, View::new(b)?))).transpose()?;
    // Left uninitialised, not zeroed: `rows` writes every element before it reads any, and zeroing
    // a buffer of this size (a whole batch's hidden states) took 1% of an int8 forward.
    // A plain `Vec`, not `written_tensor`'s lines: there, the int8 engine ran either faster or
    // about 8% slower from run to run.
    let len = x.slice().len();
    let mut out = super::fresh(len);
    let rows_per_task = (8192 / width.max(1)).max(1);
    let chunk = rows_per_task * width.max(1);
    out.spare_capacity_mut()[..len].par_chunks_mut(chunk).enumerate().for_each(|(i, out)| {
        let range = i * chunk..i * chunk + out.len();
        let x = &x.slice()[range.clone()];
        let r = r.as_ref().map(|r| &r.slice()[range]);
        let affine = affine.as_ref().map(|(w, b)| (w.slice(), b.slice()));
        rows(x, r, affine, out, width, eps as f32);
    });
    // SAFETY: the chunks cover all `len` elements, and `rows` initialises each of its chunk's.
    unsafe { out.set_len(len) };
    tensor(out, xs.dims())
}

multiversion! {
    fn rows(x: &[f32], r: Option<&[f32]>, affine: Option<(&[f32], &[f32])>, out: &mut [MaybeUninit<f32>], width: usize, eps: f32) {
        assert!(x.len() == out.len() && r.is_none_or(|r| r.len() == out.len()) && out.len().is_multiple_of(width.max(1)));
        for (row, out) in out.chunks_mut(width).enumerate() {
            let x = &x[row * width..row * width + width];
            match r {
                Some(r) => {
                    let r = &r[row * width..row * width + width];
                    out.iter_mut().zip(x.iter().zip(r)).for_each(|(o, (a, b))| { o.write(a + b); });
                }
                None => out.iter_mut().zip(x).for_each(|(o, &a)| { o.write(a); }),
            }
            // SAFETY: the row's `width` elements were all written just above (x and r hold
            // `width` each), and MaybeUninit<f32> has f32's layout.
            let out = unsafe { &mut *(out as *mut [MaybeUninit<f32>] as *mut [f32]) };
            let n = width as f32;
            match affine {
                Some((w, b)) => {
                    let mean = lane_sum(out, |v| v) / n;
                    let var = lane_sum(out, |v| (v - mean) * (v - mean)) / n;
                    let inv = 1.0 / (var + eps).sqrt();
                    out.iter_mut().zip(w.iter().zip(b)).for_each(|(o, (w, b))| *o = (*o - mean) * inv * w + b);
                }
                None => {
                    let inv = 1.0 / (lane_sum(out, |v| v * v) / n + eps).sqrt();
                    out.iter_mut().for_each(|o| *o *= inv);
                }
            }
        }
    }
}
