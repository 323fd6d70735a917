//! Multi-head self-attention with rotary position embedding on queries and keys (and values
//! when `rotary_value` is set), followed by the output projection and the post-norm.

use candle_core::Tensor;
use candle_nn::VarBuilder;

use crate::error::{Error, Result};
use crate::loading::config::Config;
use crate::model::layers::{load_weights, Linear, Norm};
use crate::model::pass::{Mask, Pass};
use crate::model::rotary;
use crate::runtime::engine::Engine;
use crate::runtime::kernels;
use crate::runtime::kernels::attention::{Products, Rotation, Segments};
use crate::runtime::kernels::Level;
use crate::runtime::kv_cache::LayerCache;
use crate::runtime::ops::softmax_last_dim;
use crate::runtime::quantization::Quantization;

/// The query, key and value projections.
#[derive(Debug, Clone)]
enum Projections {
    /// Trainable weights: a concatenation would not follow the optimiser's updates.
    Separate { query: Linear, key: Linear, value: Linear },
    /// Fixed weights, concatenated at load: one matmul instead of three.
    Stacked(Linear),
}

impl Projections {
    fn load(vb: VarBuilder, config: &Config, engine: Engine) -> Result<Self> {
        let (h, bias) = (config.hidden_size, config.use_bias());
        let [query, key, value] =
            ["query", "key", "value"].map(|name| load_weights(vb.pp(name), h, h, bias, config));
        let (query, key, value) = (query?, key?, value?);
        let precision = config.quantization;
        if !engine.stacks_projections() {
            return Ok(Projections::Separate {
                query: Linear::new_in(query.0, query.1, engine, precision)?,
                key: Linear::new_in(key.0, key.1, engine, precision)?,
                value: Linear::new_in(value.0, value.1, engine, precision)?,
            });
        }
        let weight = Tensor::cat(&[&query.0, &key.0, &value.0], 0)?;
        let bias = match (query.1, key.1, value.1) {
            (Some(q), Some(k), Some(v)) => Some(Tensor::cat(&[q, k, v], 0)?),
            _ => None,
        };
        Ok(Projections::Stacked(Linear::new_in(weight, bias, engine, precision)?))
    }

    fn quantize(&mut self, precision: Quantization) -> Result<()> {
        match self {
            Projections::Stacked(qkv) => qkv.quantize(precision),
            Projections::Separate { .. } => {
                Err(Error::Unsupported("a model loaded for training cannot be quantized".into()))
            }
        }
    }

    /// Queries, keys and values side by side: (.., 3 * hidden).
    fn forward(&self, xs: &Tensor) -> Result<Tensor> {
        match self {
            Projections::Separate { query, key, value } => Ok(Tensor::cat(
                &[query.forward(xs)?, key.forward(xs)?, value.forward(xs)?],
                candle_core::D::Minus1,
            )?),
            Projections::Stacked(qkv) => qkv.forward(xs),
        }
    }
}

#[derive(Debug, Clone)]
struct SelfAttention {
    projections: Projections,
    num_heads: usize,
    head_dim: usize,
    rotary_value: bool,
    /// The precision of the fused kernel's products: the model's (`Products::for_quantization`).
    products: Products,
    dropout: f64,
    /// The layer's place in the encoder, which names its slot in a key-value cache.
    layer: usize,
}

impl SelfAttention {
    fn load(vb: VarBuilder, config: &Config, engine: Engine, layer: usize) -> Result<Self> {
        Ok(Self {
            projections: Projections::load(vb, config, engine)?,
            layer,
            num_heads: config.num_attention_heads,
            head_dim: config.head_dim(),
            rotary_value: config.rotary_value,
            products: Products::for_quantization(config.quantization),
            dropout: config.attention_probs_dropout_prob,
        })
    }

    /// (.., hidden) -> (.., hidden).
    fn forward(&self, xs: &Tensor, pass: &Pass) -> Result<Tensor> {
        let qkv = self.projections.forward(xs)?;
        let context = match &pass.mask {
            Mask::Segments { level, spans, key_bias, rotation } => {
                self.fused(*level, &qkv, pass, spans, key_bias, rotation)?
            }
            Mask::Bias { batch, len, bias } => self.candle(&qkv, pass, *batch, *len, bias.as_ref(), None)?,
            Mask::Cached { cache, bias } => {
                let (batch, len) = (xs.dim(0)?, xs.dim(1)?);
                self.candle(&qkv, pass, batch, len, bias.as_ref(), Some(&mut *cache.layer(self.layer)?))?
            }
        };
        Ok(context.reshape(xs.dims())?)
    }

    /// The fused kernel, from the stacked projections of every token.
    fn fused(
        &self,
        level: Level,
        qkv: &Tensor,
        pass: &Pass,
        spans: &[(usize, usize)],
        key_bias: &Option<Vec<f32>>,
        rotation: &Rotation,
    ) -> Result<Tensor> {
        let width = qkv.dim(candle_core::D::Minus1)?;
        let segments = Segments { spans, key_bias: key_bias.as_deref(), causal: pass.causal };
        let (heads, head_dim) = (self.num_heads, self.head_dim);
        let qkv = qkv.reshape(((), width))?;
        let rotary_value = self.rotary_value;
        kernels::attention::attention(
            level,
            self.products,
            &qkv,
            &segments,
            rotation,
            heads,
            head_dim,
            rotary_value,
        )
    }

    /// Candle's ops over (batch, len) rows, holding every score. With a `cache`, the rows are the
    /// newest `len` positions and attend to every cached one too.
    fn candle(
        &self,
        qkv: &Tensor,
        pass: &Pass,
        b: usize,
        t: usize,
        bias: Option<&Tensor>,
        cache: Option<&mut LayerCache>,
    ) -> Result<Tensor> {
        let hidden = self.num_heads * self.head_dim;
        check_scores_size(b, self.num_heads, t, qkv.dtype())?;
        // (b, t, 3 * hidden) -> three (b, heads, t, head_dim), contiguous.
        let qkv =
            qkv.reshape((b, t, 3, self.num_heads, self.head_dim))?.permute((2, 0, 3, 1, 4))?.contiguous()?;
        let (q, k, v) = (qkv.get(0)?, qkv.get(1)?, qkv.get(2)?);
        // Scaling q (seq × head_dim) is cheaper than scaling the scores (seq × seq), and the rotation is linear.
        let q = (rotary::apply(&q, &pass.rope)? * (1.0 / (self.head_dim as f64).sqrt()))?;
        let k = rotary::apply(&k, &pass.rope)?;
        let v = if self.rotary_value { rotary::apply(&v, &pass.rope)? } else { v };
        let (k, v) = match cache {
            Some(cache) => cache.append(&k, &v)?,
            None => (k, v),
        };

        // Kᵀ stays a strided view: gemm reads it in place, and nothing here is broadcast.
        let scores = q.matmul(&k.t()?)?;
        let scores = match bias {
            Some(bias) => scores.broadcast_add(bias)?,
            None => scores,
        };
        let probs = pass.dropout(&softmax_last_dim(&scores)?, self.dropout)?;
        Ok(probs.matmul(&v)?.transpose(1, 2)?.contiguous()?.reshape((b, t, hidden))?)
    }
}

/// The largest score matrix the unblocked path may allocate: past it, a long input fails with a
/// clear error before allocating rather than aborting on an allocation of many gigabytes. A 32-bit
/// address space (WebAssembly's) holds 4 GiB in all, so there the limit is 1 GiB.
const SCORES_LIMIT_BYTES: usize = if usize::BITS > 32 { 4 << 30 } else { 1 << 30 };

/// The unblocked path (f16 and bf16, GPUs, training) holds all (batch, heads, t, t) scores.
fn check_scores_size(b: usize, heads: usize, t: usize, dtype: candle_core::DType) -> Result<()> {
    let bytes = [heads, t, t, dtype.size_in_bytes()].into_iter().try_fold(b, usize::checked_mul);
    match bytes {
        Some(n) if n <= SCORES_LIMIT_BYTES => Ok(()),
        _ => Err(Error::Candle(candle_core::Error::Msg(format!(
            "attention over {b} sequences of {t} tokens would hold {:.1} GiB of scores in {dtype:?} (the limit is {} GiB \
             on this path): use f32 on the CPU, whose attention is blocked, or a smaller batch or max length",
            (b as f64) * (heads as f64) * (t as f64) * (t as f64) * dtype.size_in_bytes() as f64 / (1u64 << 30) as f64,
            SCORES_LIMIT_BYTES >> 30
        )))),
    }
}

/// Projection of the attention output, residual connection and norm.
#[derive(Debug, Clone)]
struct SelfOutput {
    dense: Linear,
    norm: Norm,
    dropout: f64,
}

impl SelfOutput {
    fn load(vb: VarBuilder, config: &Config, engine: Engine) -> Result<Self> {
        let h = config.hidden_size;
        Ok(Self {
            dense: Linear::load_in(
                vb.pp("dense"),
                (h, h, config.use_bias()),
                config,
                engine,
                config.quantization,
            )?,
            norm: Norm::load(vb.pp("LayerNorm"), h, config, engine)?,
            dropout: config.hidden_dropout_prob,
        })
    }

    fn forward(&self, xs: &Tensor, residual: &Tensor, pass: &Pass) -> Result<Tensor> {
        let xs = pass.dropout(&self.dense.forward(xs)?, self.dropout)?;
        self.norm.forward_residual(&xs, residual)
    }
}

/// `attention.self` and `attention.output` of one layer.
#[derive(Debug, Clone)]
pub(crate) struct Attention {
    self_attention: SelfAttention,
    output: SelfOutput,
}

impl Attention {
    pub fn load(vb: VarBuilder, config: &Config, engine: Engine, layer: usize) -> Result<Self> {
        Ok(Self {
            self_attention: SelfAttention::load(vb.pp("self"), config, engine, layer)?,
            output: SelfOutput::load(vb.pp("output"), config, engine)?,
        })
    }

    /// The projections' and the output dense's weights in `precision`, and attention's products
    /// at that precision (see `Products`).
    pub fn quantize(&mut self, precision: Quantization) -> Result<()> {
        self.self_attention.projections.quantize(precision)?;
        self.output.dense.quantize(precision)?;
        self.self_attention.products = Products::for_quantization(precision);
        Ok(())
    }

    pub fn forward(&self, xs: &Tensor, pass: &Pass) -> Result<Tensor> {
        let attended = self.self_attention.forward(xs, pass)?;
        self.output.forward(&attended, xs, pass)
    }
}
