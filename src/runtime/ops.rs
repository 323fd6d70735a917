//! Candle's fused kernels (softmax, layer norm, interleaved rope) have no backward pass.
//! Each function here uses the fused kernel for inference and falls back to the same math in
//! differentiable tensor ops when its input is tracked for gradients (fine-tuning).

use candle_core::{DType, Tensor, D};

use crate::error::Result;

/// Softmax over the last dimension.
pub(crate) fn softmax_last_dim(xs: &Tensor) -> Result<Tensor> {
    if xs.track_op() {
        Ok(candle_nn::ops::softmax(xs, D::Minus1)?)
    } else {
        Ok(candle_nn::ops::softmax_last_dim(xs)?)
    }
}

/// Layer norm over the last dimension, with an optional affine part.
pub(crate) fn layer_norm(xs: &Tensor, weight: &Tensor, bias: &Tensor, eps: f64) -> Result<Tensor> {
    if xs.track_op() || weight.track_op() || bias.track_op() {
        let x_dtype = xs.dtype();
        let xs = upcast(xs)?;
        let mean = xs.mean_keepdim(D::Minus1)?;
        let xs = xs.broadcast_sub(&mean)?;
        let var = xs.sqr()?.mean_keepdim(D::Minus1)?;
        let xs = xs.broadcast_div(&(var + eps)?.sqrt()?)?.to_dtype(x_dtype)?;
        Ok(xs.broadcast_mul(weight)?.broadcast_add(bias)?)
    } else {
        Ok(candle_nn::ops::layer_norm(&xs.contiguous()?, weight, bias, eps as f32)?)
    }
}

/// The weightless RMS norm of RoFormer v2: `x / sqrt(mean(x²) + eps)`.
pub(crate) fn rms_norm(xs: &Tensor, eps: f64) -> Result<Tensor> {
    let x_dtype = xs.dtype();
    let xs = upcast(xs)?;
    let ms = xs.sqr()?.mean_keepdim(D::Minus1)?;
    Ok(xs.broadcast_div(&(ms + eps)?.sqrt()?)?.to_dtype(x_dtype)?)
}

/// Rotates interleaved pairs `(x[2i], x[2i+1])` of `xs` (batch, heads, seq, head_dim) by the
/// angles whose cos and sin are given as (seq, head_dim / 2) tables.
pub(crate) fn rope_interleaved(xs: &Tensor, cos: &Tensor, sin: &Tensor) -> Result<Tensor> {
    if xs.track_op() {
        Ok(candle_nn::rotary_emb::rope_i_slow(xs, cos, sin)?)
    } else {
        Ok(candle_nn::rotary_emb::rope_i(&xs.contiguous()?, cos, sin)?)
    }
}

fn upcast(xs: &Tensor) -> Result<Tensor> {
    match xs.dtype() {
        DType::F16 | DType::BF16 => Ok(xs.to_dtype(DType::F32)?),
        _ => Ok(xs.clone()),
    }
}
