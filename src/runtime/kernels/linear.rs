//! `x Wᵀ + b` with the bias folded into the gemm and an optional activation applied to the
//! output while it is still in cache.

use candle_core::Tensor;
use rayon::prelude::*;

use super::gemm::{PackedBf16, PackedF32, PackedI8};
use super::{math, multiversion, View};
use crate::error::{candle_bail, Result};
use crate::runtime::activation::Activation;

/// A weight packed once for a kernel of ours.
pub(crate) trait PackedWeight {
    /// Output and input widths.
    fn dims(&self) -> (usize, usize);
    /// Writes all of `out` (m, n) = `a` (m, k) · Wᵀ + `bias`.
    ///
    /// # Safety
    /// `out` must be valid for m × n writes.
    unsafe fn matmul(&self, a: &[f32], m: usize, bias: Option<&[f32]>, out: *mut f32);
}

impl PackedWeight for PackedF32 {
    fn dims(&self) -> (usize, usize) {
        PackedF32::dims(self)
    }
    unsafe fn matmul(&self, a: &[f32], m: usize, bias: Option<&[f32]>, out: *mut f32) {
        // SAFETY: the caller's promise is the one `PackedF32::matmul` asks.
        unsafe { PackedF32::matmul(self, a, m, bias, out) }
    }
}

impl PackedWeight for PackedI8 {
    fn dims(&self) -> (usize, usize) {
        PackedI8::dims(self)
    }
    unsafe fn matmul(&self, a: &[f32], m: usize, bias: Option<&[f32]>, out: *mut f32) {
        // SAFETY: the caller's promise is the one `PackedI8::matmul` asks.
        unsafe { PackedI8::matmul(self, a, m, bias, out) }
    }
}

impl PackedWeight for PackedBf16 {
    fn dims(&self) -> (usize, usize) {
        PackedBf16::dims(self)
    }
    unsafe fn matmul(&self, a: &[f32], m: usize, bias: Option<&[f32]>, out: *mut f32) {
        // SAFETY: the caller's promise is the one `PackedBf16::matmul` asks.
        unsafe { PackedBf16::matmul(self, a, m, bias, out) }
    }
}

/// `xs` (.., k) times a packed weight, plus the bias, then `activation`.
pub(crate) fn linear_packed(
    xs: &Tensor,
    weight: &dyn PackedWeight,
    bias: Option<&Tensor>,
    activation: Activation,
) -> Result<Tensor> {
    let (n, k) = weight.dims();
    let (xs, m, out_dims) = rows_of(xs, k, n)?;
    let a = View::new(&xs)?;
    let bias = bias.map(View::new).transpose()?;
    let bias = bias.as_ref().map(View::slice);
    let fill = |out| {
        // SAFETY: `out` is valid for m × n writes (`written_tensor`); the matmul writes them all,
        // and only then does the activation read them.
        unsafe {
            weight.matmul(a.slice(), m, bias, out);
            apply(std::slice::from_raw_parts_mut(out, m * n), n, activation);
        }
    };
    // SAFETY: `fill` writes all m × n outputs.
    unsafe { super::written_tensor(&out_dims, fill) }
}

/// Rows per block of [`feed_forward_packed`]: enough that each product's tasks balance over the
/// threads as a whole long input's do (blocks of 512 ran a bf16 input of 16k tokens 4% slower on
/// 2 threads), few enough that the middle is a fraction of the whole (24 MiB of 192 at 16k tokens
/// of a base model, in f32).
const FEED_FORWARD_ROWS: usize = 2048;

/// `activation(xs W₁ᵀ + b₁) W₂ᵀ + b₂` for packed `up` (W₁, b₁) and `down` (W₂, b₂), a block of
/// [`FEED_FORWARD_ROWS`] rows at a time, so that the middle, rows × W₁'s outputs, never exists
/// whole: at 16k tokens of a base model it was 192 MiB of fresh pages every layer, and the
/// largest buffer alive at the peak. Each row's result is what the two products one after the
/// other give (every kernel computes a row alone).
pub(crate) fn feed_forward_packed(
    xs: &Tensor,
    (up, up_bias): (&dyn PackedWeight, Option<&Tensor>),
    activation: Activation,
    (down, down_bias): (&dyn PackedWeight, Option<&Tensor>),
) -> Result<Tensor> {
    let ((middle, k), (n, down_k)) = (up.dims(), down.dims());
    if down_k != middle {
        candle_bail!(
            "feed-forward: the output product takes {down_k} inputs, and the intermediate one gives {middle}"
        )
    }
    let (xs, m, out_dims) = rows_of(xs, k, n)?;
    let a = View::new(&xs)?;
    let (up_bias, down_bias) = (up_bias.map(View::new).transpose()?, down_bias.map(View::new).transpose()?);
    let (up_bias, down_bias) = (up_bias.as_ref().map(View::slice), down_bias.as_ref().map(View::slice));
    let fill = |out: *mut f32| {
        // Fresh rather than pooled: a pooled buffer stays mapped after the call, and raised the
        // peak of inputs short enough to be one block (at 2,048 tokens, f32 565 -> 583 MiB).
        let mut hidden = super::fresh(FEED_FORWARD_ROWS.min(m) * middle);
        for r0 in (0..m).step_by(FEED_FORWARD_ROWS) {
            let rows = FEED_FORWARD_ROWS.min(m - r0);
            // SAFETY: `hidden` has room for rows × middle floats, which the first product writes
            // before the activation and the second product read them; `out` is valid for m × n
            // writes (`written_tensor`), of which rows r0.. are these rows' n each.
            unsafe {
                up.matmul(&a.slice()[r0 * k..], rows, up_bias, hidden.as_mut_ptr());
                let hidden = std::slice::from_raw_parts_mut(hidden.as_mut_ptr(), rows * middle);
                apply(hidden, middle, activation);
                down.matmul(hidden, rows, down_bias, out.add(r0 * n));
            }
        }
    };
    // SAFETY: `fill` writes all m × n outputs, block by block.
    unsafe { super::written_tensor(&out_dims, fill) }
}

/// `xs` (.., k) as contiguous rows for a product of `n` outputs: the rows, their count, and the
/// output's dims.
fn rows_of(xs: &Tensor, k: usize, n: usize) -> Result<(Tensor, usize, Vec<usize>)> {
    let dims = xs.dims();
    if dims.last() != Some(&k) {
        candle_bail!(
            "linear: input {dims:?} ({:?} on {:?}) does not fit a packed ({n}, {k}) weight",
            xs.dtype(),
            xs.device()
        )
    }
    let m = xs.elem_count() / k.max(1);
    let mut out_dims = dims.to_vec();
    if let Some(last) = out_dims.last_mut() {
        *last = n;
    }
    Ok((xs.contiguous()?, m, out_dims))
}

/// Applies `activation` in place to rows of `width`, in parallel.
pub(crate) fn apply(out: &mut [f32], width: usize, activation: Activation) {
    if activation == Activation::Linear {
        return;
    }
    let rows = (16384 / width.max(1)).max(1);
    out.par_chunks_mut(width.max(1) * rows).for_each(|chunk| activate(chunk, activation));
}

multiversion! {
    fn activate(xs: &mut [f32], activation: Activation) {
        match activation {
            Activation::Gelu => xs.iter_mut().for_each(|x| *x = math::gelu(*x)),
            Activation::GeluNew | Activation::GeluPytorchTanh => xs.iter_mut().for_each(|x| *x = math::gelu_tanh(*x)),
            Activation::Relu => xs.iter_mut().for_each(|x| *x = x.max(0.0)),
            Activation::Silu | Activation::Swish => xs.iter_mut().for_each(|x| *x = math::silu(*x)),
            Activation::Tanh => xs.iter_mut().for_each(|x| *x = math::tanh(*x)),
            Activation::Linear => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use candle_core::{Device, Tensor};

    use super::*;
    use crate::runtime::kernels::{noise, tested_levels, Level};

    /// The feed-forward a block of rows at a time gives what the two products one after the other
    /// give, in every precision, over more rows than one block (and a last block of a few).
    #[test]
    fn feed_forward_in_blocks_equals_the_two_products() {
        let (m, k, middle) = (2 * FEED_FORWARD_ROWS + 5, 24, 40);
        let xs = Tensor::from_vec(noise(m * k, 1), (m, k), &Device::Cpu).unwrap();
        let (w1, w2) = (noise(middle * k, 2), noise(k * middle, 3));
        let b1 = Tensor::from_vec(noise(middle, 4), middle, &Device::Cpu).unwrap();
        let b2 = Tensor::from_vec(noise(k, 5), k, &Device::Cpu).unwrap();
        type Pack = fn(Level, &[f32], usize, usize) -> Box<dyn PackedWeight>;
        let precisions: [(&str, Pack); 3] = [
            ("f32", |level, w, n, k| Box::new(PackedF32::new(level, w, n, k))),
            ("int8", |level, w, n, k| Box::new(PackedI8::new(level, w, n, k))),
            ("bf16", |level, w, n, k| Box::new(PackedBf16::new(level, w, n, k))),
        ];
        let levels = tested_levels("feed-forward in blocks");
        for (level, (name, pack)) in levels.iter().flat_map(|&level| precisions.map(|p| (level, p))) {
            let (up, down) = (pack(level, &w1, middle, k), pack(level, &w2, k, middle));
            let middle_rows = linear_packed(&xs, up.as_ref(), Some(&b1), Activation::Gelu).unwrap();
            let want = linear_packed(&middle_rows, down.as_ref(), Some(&b2), Activation::Linear).unwrap();
            let got = feed_forward_packed(
                &xs,
                (up.as_ref(), Some(&b1)),
                Activation::Gelu,
                (down.as_ref(), Some(&b2)),
            )
            .unwrap();
            assert_eq!(got.dims(), &[m, k]);
            let (got, want) = (
                got.flatten_all().unwrap().to_vec1::<f32>().unwrap(),
                want.flatten_all().unwrap().to_vec1::<f32>().unwrap(),
            );
            for (i, (g, w)) in got.iter().zip(&want).enumerate() {
                assert!(
                    (g - w).abs() <= 1e-5 * (1.0 + w.abs()),
                    "{level:?} {name}: row {} column {}: {g} against {w}",
                    i / k,
                    i % k
                );
            }
        }
        let wrong = PackedF32::new(levels[0], &w1, middle, k);
        let error = feed_forward_packed(&xs, (&wrong, None), Activation::Gelu, (&wrong, None)).unwrap_err();
        assert!(error.to_string().contains("takes 24 inputs"), "{error}");
    }
}
