//! Rotary position embedding (RoPE) as RoFormer applies it: interleaved pairs, θ_i = 10000^(-2i/d).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use candle_core::{DType, Device, Result, Tensor};

/// Sin/cos tables for one dtype and device, covering positions `0..len`.
#[derive(Debug, Clone)]
struct Tables {
    dtype: DType,
    device: Device,
    len: usize,
    /// (len, head_dim / 2) each: together the head_dim-wide `[sin | cos]` table of transformers.
    sin: Tensor,
    cos: Tensor,
}

/// Rotary embedding of one model, shared by all its attention layers.
///
/// Tables are built once, in f64 and then cast (tables computed in f32 drift by up to 7e-5 at
/// long positions), and cached: a forward at the same or a shorter length reuses them and a
/// longer one grows them. Lengths beyond `max_position_embeddings` are fine, since the
/// table is computed, not learned.
#[derive(Debug)]
pub struct RotaryEmbedding {
    head_dim: usize,
    initial_len: usize,
    cache: Mutex<Vec<Tables>>,
    builds: AtomicUsize,
}

impl RotaryEmbedding {
    pub fn new(head_dim: usize, max_position_embeddings: usize) -> Self {
        Self {
            head_dim,
            initial_len: max_position_embeddings,
            cache: Mutex::new(Vec::new()),
            builds: AtomicUsize::new(0),
        }
    }

    /// How many times a table has been computed: stays put while forwards reuse the cache.
    pub fn table_builds(&self) -> usize {
        self.builds.load(Ordering::Relaxed)
    }

    /// Cos and sin, each (seq_len, head_dim / 2), in `dtype` on `device`.
    pub fn cos_sin(&self, seq_len: usize, dtype: DType, device: &Device) -> Result<(Tensor, Tensor)> {
        let mut cache = self.cache.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        let slot = cache.iter().position(|t| t.dtype == dtype && t.device.same_device(device));
        let tables = match slot {
            Some(i) if cache[i].len >= seq_len => &cache[i],
            _ => {
                let tables = self.build(seq_len.max(self.initial_len), dtype, device)?;
                match slot {
                    Some(i) => {
                        cache[i] = tables;
                        &cache[i]
                    }
                    None => {
                        cache.push(tables);
                        cache.last().expect("just pushed")
                    }
                }
            }
        };
        // Narrowing the leading dimension keeps the tables contiguous, as `rope_i` requires.
        Ok((tables.cos.narrow(0, 0, seq_len)?, tables.sin.narrow(0, 0, seq_len)?))
    }

    fn build(&self, len: usize, dtype: DType, device: &Device) -> Result<Tables> {
        self.builds.fetch_add(1, Ordering::Relaxed);
        let (sin, cos) = sin_cos_table(len, self.head_dim);
        let half = self.head_dim / 2;
        let to_tensor =
            |v: Vec<f64>| Tensor::from_vec(v, (len, half), &Device::Cpu)?.to_dtype(dtype)?.to_device(device);
        Ok(Tables { dtype, device: device.clone(), len, sin: to_tensor(sin)?, cos: to_tensor(cos)? })
    }
}

/// The sin and cos of `pos / 10000^(2i / head_dim)` for `pos < len`, `i < head_dim / 2`, row-major,
/// computed exactly as transformers' `RoFormerSinusoidalPositionalEmbedding` does (in f64).
pub fn sin_cos_table(len: usize, head_dim: usize) -> (Vec<f64>, Vec<f64>) {
    let half = head_dim / 2;
    let mut sin = Vec::with_capacity(len * half);
    let mut cos = Vec::with_capacity(len * half);
    for pos in 0..len {
        for i in 0..half {
            let angle = pos as f64 / 10000f64.powf(2.0 * i as f64 / head_dim as f64);
            sin.push(angle.sin());
            cos.push(angle.cos());
        }
    }
    (sin, cos)
}

/// Applies the rotation to `xs` (batch, heads, seq, head_dim).
pub fn apply(xs: &Tensor, cos: &Tensor, sin: &Tensor) -> Result<Tensor> {
    crate::ops::rope_interleaved(xs, cos, sin)
}
