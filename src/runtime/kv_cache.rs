//! The keys and values each attention layer has computed so far, so that a decoding step runs
//! the new tokens alone: the source once, then one token per step.

use std::cell::{RefCell, RefMut};

use candle_core::{DType, Device, Tensor};

use crate::error::{Error, Result};

/// One layer's rotated keys and values, (batch, heads, capacity, head_dim), filled up to `len`.
///
/// The buffers are allocated once at full capacity and written in place: growing them by
/// concatenation would copy every cached key at every step.
#[derive(Debug)]
pub(crate) struct LayerCache {
    keys: Tensor,
    values: Tensor,
    len: usize,
}

impl LayerCache {
    /// Appends (batch, heads, t, head_dim) keys and values; returns every cached key and value.
    pub fn append(&mut self, keys: &Tensor, values: &Tensor) -> Result<(Tensor, Tensor)> {
        let t = keys.dim(2)?;
        self.keys.slice_set(&keys.contiguous()?, 2, self.len)?;
        self.values.slice_set(&values.contiguous()?, 2, self.len)?;
        self.len += t;
        Ok((self.keys.narrow(2, 0, self.len)?, self.values.narrow(2, 0, self.len)?))
    }
}

/// The caches of every layer of one batch of sequences that grow in step.
#[derive(Debug)]
pub(crate) struct KvCache {
    layers: Vec<RefCell<LayerCache>>,
}

impl KvCache {
    /// Empty caches for `batch` sequences of up to `capacity` tokens.
    pub fn new(
        layers: usize,
        batch: usize,
        heads: usize,
        capacity: usize,
        head_dim: usize,
        dtype: DType,
        device: &Device,
    ) -> Result<Self> {
        let layers = (0..layers)
            .map(|_| {
                let zeros = || Tensor::zeros((batch, heads, capacity, head_dim), dtype, device);
                Ok(RefCell::new(LayerCache { keys: zeros()?, values: zeros()?, len: 0 }))
            })
            .collect::<Result<_>>()?;
        Ok(Self { layers })
    }

    /// How many positions are cached (the same in every layer between passes).
    pub fn len(&self) -> usize {
        self.layers.first().map_or(0, |l| l.borrow().len)
    }

    /// The cache of layer `index`, borrowed for the layer's forward.
    pub fn layer(&self, index: usize) -> Result<RefMut<'_, LayerCache>> {
        self.layers
            .get(index)
            .map(RefCell::borrow_mut)
            .ok_or_else(|| Error::Candle(candle_core::Error::Msg(format!("no cache for layer {index}"))))
    }

    /// Keeps the sequences at `rows` (in that order, repeats allowed): copies one source's cache
    /// into each sample, or drops finished sequences.
    pub fn select(&mut self, rows: &[u32]) -> Result<()> {
        for layer in &mut self.layers {
            let layer = layer.get_mut();
            let rows = Tensor::new(rows, layer.keys.device())?;
            layer.keys = layer.keys.index_select(&rows, 0)?;
            layer.values = layer.values.index_select(&rows, 0)?;
        }
        Ok(())
    }
}
