//! Rotary position embedding (RoPE) as RoFormer applies it: interleaved pairs, θ_i = 10000^(-2i/d),
//! optionally scaled for inputs past the trained length.

use std::sync::Mutex;

use candle_core::{DType, Device, Tensor};

use crate::error::Result;
use crate::runtime::rope_scaling::{frequencies, sin_cos_table, Frequencies, RopeScaling};

/// Cos and sin for positions `0..len`, each (len, head_dim / 2), in the model's dtype and device.
#[derive(Debug, Clone)]
pub(crate) struct RotaryTables {
    pub cos: Tensor,
    pub sin: Tensor,
}

/// The rotary embedding of one model, shared by all its attention layers.
///
/// Tables are computed in f64 and then cast (tables computed in f32 drift by up to 7e-5 at long
/// positions). One slot holds the tables of the longest input seen so far for one set of
/// frequencies: a forward at the same or a shorter length reuses them, a longer one (or one whose
/// dynamic scaling asks for other frequencies) rebuilds them for its own length. Lengths beyond
/// `max_position_embeddings` are fine, since the table is computed, not learned.
#[derive(Debug)]
pub(crate) struct RotaryEmbedding {
    head_dim: usize,
    theta: f64,
    scaling: Option<RopeScaling>,
    max_position_embeddings: usize,
    dtype: DType,
    device: Device,
    slot: Mutex<Option<(Frequencies, RotaryTables)>>,
    #[cfg(test)]
    builds: std::sync::atomic::AtomicUsize,
}

impl RotaryEmbedding {
    pub fn new(
        head_dim: usize,
        theta: f64,
        scaling: Option<RopeScaling>,
        max_position_embeddings: usize,
        dtype: DType,
        device: &Device,
    ) -> Self {
        Self {
            head_dim,
            theta,
            scaling,
            max_position_embeddings,
            dtype,
            device: device.clone(),
            slot: Mutex::new(None),
            #[cfg(test)]
            builds: Default::default(),
        }
    }

    /// The same embedding with an empty cache.
    pub fn empty_copy(&self) -> Self {
        Self::new(
            self.head_dim,
            self.theta,
            self.scaling.clone(),
            self.max_position_embeddings,
            self.dtype,
            &self.device,
        )
    }

    /// The tables for positions `0..len` of a batch whose longest sequence has `len` tokens.
    pub fn tables(&self, len: usize) -> Result<RotaryTables> {
        let wanted =
            frequencies(self.scaling.as_ref(), self.theta, self.head_dim, self.max_position_embeddings, len);
        let mut slot = self.slot.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        let cached = slot.as_ref().filter(|(f, t)| *f == wanted && t.cos.dim(0).is_ok_and(|n| n >= len));
        let (_, tables) = match cached {
            Some(cached) => cached,
            None => slot.insert((wanted.clone(), self.build(&wanted, len)?)),
        };
        // Narrowing the leading dimension keeps the tables contiguous, as `rope_i` requires.
        Ok(RotaryTables { cos: tables.cos.narrow(0, 0, len)?, sin: tables.sin.narrow(0, 0, len)? })
    }

    fn build(&self, frequencies: &Frequencies, len: usize) -> Result<RotaryTables> {
        #[cfg(test)]
        self.builds.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let (sin, cos) = sin_cos_table(frequencies, len, self.head_dim);
        let half = self.head_dim / 2;
        let to_tensor = |v: Vec<f64>| {
            Tensor::from_vec(v, (len, half), &Device::Cpu)?.to_dtype(self.dtype)?.to_device(&self.device)
        };
        Ok(RotaryTables { cos: to_tensor(cos)?, sin: to_tensor(sin)? })
    }

    #[cfg(test)]
    pub fn builds(&self) -> usize {
        self.builds.load(std::sync::atomic::Ordering::Relaxed)
    }
}

/// Applies the rotation to `xs` (batch, heads, seq, head_dim).
pub(crate) fn apply(xs: &Tensor, tables: &RotaryTables) -> Result<Tensor> {
    crate::runtime::ops::rope_interleaved(xs, &tables.cos, &tables.sin)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture(name: &str) -> std::path::PathBuf {
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/models").join(name)
    }

    #[test]
    fn table_matches_the_one_transformers_saved() {
        // transformers stores its sinusoidal table ([sin | cos], head_dim wide) as
        // `encoder.embed_positions.weight`; ours is computed the same way, in f64 then cast.
        let weights = candle_core::safetensors::load(fixture("base").join("model.safetensors"), &Device::Cpu)
            .expect("fixture");
        let saved = &weights["encoder.embed_positions.weight"];
        let (len, dim) = saved.dims2().unwrap();
        let rotary = RotaryEmbedding::new(dim, 10000.0, None, len, DType::F32, &Device::Cpu);
        let tables = rotary.tables(len).unwrap();
        let ours = Tensor::cat(&[tables.sin, tables.cos], 1).unwrap();
        assert_eq!(ours.to_vec2::<f32>().unwrap(), saved.to_vec2::<f32>().unwrap(), "tables differ");
    }

    #[test]
    fn tables_are_built_for_the_length_in_use_and_reused() {
        let rotary = RotaryEmbedding::new(16, 10000.0, None, 512, DType::F32, &Device::Cpu);
        assert_eq!(rotary.builds(), 0);
        assert_eq!(rotary.tables(20).unwrap().cos.dims(), [20, 8]);
        assert_eq!(rotary.builds(), 1);
        // The same length again, then a shorter one: no trigonometry.
        rotary.tables(20).unwrap();
        assert_eq!(rotary.tables(3).unwrap().sin.dims(), [3, 8]);
        assert_eq!(rotary.builds(), 1);
        // A longer input grows the table once, for its own length, and is then reused.
        rotary.tables(1000).unwrap();
        rotary.tables(999).unwrap();
        assert_eq!(rotary.builds(), 2);
        // A short table cut from a long one equals a table built for the short length.
        let short = RotaryEmbedding::new(16, 10000.0, None, 512, DType::F32, &Device::Cpu).tables(7).unwrap();
        let cut = rotary.tables(7).unwrap();
        assert_eq!(short.cos.to_vec2::<f32>().unwrap(), cut.cos.to_vec2::<f32>().unwrap());
    }

    #[test]
    fn dynamic_scaling_rebuilds_for_lengths_past_the_trained_one() {
        let scaling = Some(RopeScaling::Dynamic { factor: 2.0 });
        let rotary = RotaryEmbedding::new(16, 10000.0, scaling, 48, DType::F32, &Device::Cpu);
        // Within the trained length the plain table serves, and is reused.
        rotary.tables(48).unwrap();
        rotary.tables(40).unwrap();
        assert_eq!(rotary.builds(), 1);
        // Past it, each length has its own base: a rebuild for each new one, reuse for a repeat.
        let long = rotary.tables(100).unwrap();
        rotary.tables(100).unwrap();
        assert_eq!(rotary.builds(), 2);
        rotary.tables(90).unwrap();
        assert_eq!(rotary.builds(), 3);
        // Position 50 rotates slower under the raised base than in the plain table.
        let plain =
            RotaryEmbedding::new(16, 10000.0, None, 48, DType::F32, &Device::Cpu).tables(100).unwrap();
        let (scaled, plain) = (long.cos.to_vec2::<f32>().unwrap(), plain.cos.to_vec2::<f32>().unwrap());
        assert_eq!(scaled[50][0], plain[50][0], "the fastest frequency is 1 for any base");
        assert_ne!(scaled[50][7], plain[50][7]);
    }
}
