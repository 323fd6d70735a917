//! RoPE scaling for inputs longer than a model was trained on, with the semantics of transformers 5's
//! `modeling_rope_utils.py`: the scaled inverse frequencies are computed in f32 as its functions do,
//! then RoFormer's interleaved sin/cos table is built from them in f64 and times the attention factor.

use serde_json::{Map, Value};

use crate::error::{Error, Result};

/// How rotary frequencies stretch past `max_position_embeddings`.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum RopeScaling {
    /// Position interpolation: every frequency divided by `factor`.
    Linear {
        /// How many times longer than trained the inputs may be.
        factor: f64,
    },
    /// NTK-aware: for a batch longer than `max_position_embeddings`, the base is raised to
    /// `base · (factor·L/M − (factor − 1))^(d/(d−2))`, L being the batch's length. transformers keeps
    /// the largest length seen until a short batch arrives; this crate uses each batch's own length,
    /// so answers do not depend on earlier batches.
    Dynamic {
        /// The stretch at twice the trained length is about this much.
        factor: f64,
    },
    /// YaRN: high frequencies kept, low ones interpolated, a linear ramp between, and cos and sin
    /// scaled by the attention factor.
    Yarn(Yarn),
}

/// YaRN's parameters, with transformers' defaults.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct Yarn {
    /// How many times longer than trained the inputs may be.
    pub factor: f64,
    /// The length the frequencies were trained for; `None` means `max_position_embeddings`.
    pub original_max_position_embeddings: Option<usize>,
    /// Rotations that bound the ramp at the fast end (32).
    pub beta_fast: f64,
    /// Rotations that bound the ramp at the slow end (1).
    pub beta_slow: f64,
    /// Scales cos and sin; `None` derives it from `factor` (and `mscale`, `mscale_all_dim`).
    pub attention_factor: Option<f64>,
    /// DeepSeek's scale of the attention factor (with `mscale_all_dim`).
    pub mscale: Option<f64>,
    /// The divisor's scale in DeepSeek's attention factor.
    pub mscale_all_dim: Option<f64>,
    /// Round the ramp's ends outwards (true).
    pub truncate: bool,
}

impl Yarn {
    /// YaRN with `factor` and every other parameter at transformers' default.
    pub fn new(factor: f64) -> Self {
        Self {
            factor,
            original_max_position_embeddings: None,
            beta_fast: 32.0,
            beta_slow: 1.0,
            attention_factor: None,
            mscale: None,
            mscale_all_dim: None,
            truncate: true,
        }
    }
}

impl std::str::FromStr for RopeScaling {
    type Err = Error;

    /// `linear:4`, `dynamic:2` or `yarn:4`.
    fn from_str(s: &str) -> Result<Self> {
        let bad = || {
            Error::option(
                "rope_scaling",
                format!("rope scaling `{s}` is not <linear|dynamic|yarn>:<factor>, such as linear:4"),
            )
        };
        let (kind, factor) = s.split_once(':').ok_or_else(bad)?;
        let factor: f64 = factor.trim().parse().map_err(|_| bad())?;
        let scaling = match kind.trim() {
            "linear" => RopeScaling::Linear { factor },
            "dynamic" => RopeScaling::Dynamic { factor },
            "yarn" => RopeScaling::Yarn(Yarn::new(factor)),
            _ => return Err(bad()),
        };
        scaling.validate().map_err(|m| Error::option("rope_scaling", format!("rope scaling `{s}`: {m}")))?;
        Ok(scaling)
    }
}

impl RopeScaling {
    pub(crate) fn factor(&self) -> f64 {
        match self {
            RopeScaling::Linear { factor } | RopeScaling::Dynamic { factor } => *factor,
            RopeScaling::Yarn(y) => y.factor,
        }
    }

    fn validate(&self) -> std::result::Result<(), String> {
        let factor = self.factor();
        if !(factor.is_finite() && factor >= 1.0) {
            return Err(format!("factor {factor} must be a number ≥ 1"));
        }
        if let RopeScaling::Yarn(y) = self {
            if !(y.beta_fast.is_finite() && y.beta_slow.is_finite() && y.beta_fast > 0.0 && y.beta_slow > 0.0)
            {
                return Err("beta_fast and beta_slow must be positive".into());
            }
            if y.attention_factor.is_some_and(|a| !(a.is_finite() && a >= 0.0)) {
                return Err("attention_factor must be a number ≥ 0".into());
            }
            if y.original_max_position_embeddings == Some(0) {
                return Err("original_max_position_embeddings must be at least 1".into());
            }
        }
        Ok(())
    }

    /// The `rope_scaling` dict transformers writes for this scaling.
    pub(crate) fn to_json(&self) -> Value {
        let mut dict = Map::new();
        let mut put = |k: &str, v: Value| {
            dict.insert(k.to_string(), v);
        };
        match self {
            RopeScaling::Linear { factor } => {
                put("rope_type", "linear".into());
                put("factor", (*factor).into());
            }
            RopeScaling::Dynamic { factor } => {
                put("rope_type", "dynamic".into());
                put("factor", (*factor).into());
            }
            RopeScaling::Yarn(y) => {
                put("rope_type", "yarn".into());
                put("factor", y.factor.into());
                put("beta_fast", y.beta_fast.into());
                put("beta_slow", y.beta_slow.into());
                put("truncate", y.truncate.into());
                if let Some(n) = y.original_max_position_embeddings {
                    put("original_max_position_embeddings", n.into());
                }
                for (key, value) in [
                    ("attention_factor", y.attention_factor),
                    ("mscale", y.mscale),
                    ("mscale_all_dim", y.mscale_all_dim),
                ] {
                    if let Some(v) = value {
                        put(key, v.into());
                    }
                }
            }
        }
        Value::Object(dict)
    }

    /// Reads a `rope_scaling` / `rope_parameters` dict: `rope_type` (or the legacy `type`) picks
    /// the kind; `default` means no scaling. `rope_theta` inside the dict is returned beside it.
    pub(crate) fn from_json(value: &Value) -> std::result::Result<(Option<Self>, Option<f64>), String> {
        let dict = value.as_object().ok_or("must be an object")?;
        let number = |key: &str| -> std::result::Result<Option<f64>, String> {
            match dict.get(key) {
                None | Some(Value::Null) => Ok(None),
                Some(v) => v.as_f64().map(Some).ok_or(format!("`{key}` must be a number")),
            }
        };
        let theta = number("rope_theta")?;
        let kind = match dict.get("rope_type").or_else(|| dict.get("type")) {
            None | Some(Value::Null) => "default",
            Some(Value::String(kind)) => kind.as_str(),
            Some(other) => return Err(format!("`rope_type` must be a string, not {other}")),
        };
        let factor = || number("factor")?.ok_or(format!("`factor` is required for rope_type `{kind}`"));
        let scaling = match kind {
            "default" => return Ok((None, theta)),
            "linear" => RopeScaling::Linear { factor: factor()? },
            "dynamic" => RopeScaling::Dynamic { factor: factor()? },
            "yarn" => {
                // transformers treats 0 (or null) betas as their defaults.
                let beta =
                    |key, default: f64| number(key).map(|v| v.filter(|&b| b != 0.0).unwrap_or(default));
                RopeScaling::Yarn(Yarn {
                    factor: factor()?,
                    original_max_position_embeddings: number("original_max_position_embeddings")?
                        .map(|v| v as usize),
                    beta_fast: beta("beta_fast", 32.0)?,
                    beta_slow: beta("beta_slow", 1.0)?,
                    attention_factor: number("attention_factor")?,
                    mscale: number("mscale")?,
                    mscale_all_dim: number("mscale_all_dim")?,
                    truncate: match dict.get("truncate") {
                        None | Some(Value::Null) => true,
                        Some(Value::Bool(b)) => *b,
                        Some(other) => return Err(format!("`truncate` must be a boolean, not {other}")),
                    },
                })
            }
            other => {
                return Err(format!("rope_type `{other}` is not supported (default, linear, dynamic, yarn)"))
            }
        };
        scaling.validate()?;
        Ok((Some(scaling), theta))
    }
}

/// The frequencies and attention factor of one table.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Frequencies {
    /// `None`: RoFormer's own table, `pos / theta^(2i/d)` in f64. `Some`: transformers' f32
    /// inverse frequencies of a scaled kind.
    pub inv_freq: Option<Vec<f32>>,
    pub theta: f64,
    pub attention_factor: f64,
}

/// The frequencies for a batch of `len` positions.
pub(crate) fn frequencies(
    scaling: Option<&RopeScaling>,
    theta: f64,
    head_dim: usize,
    max_position_embeddings: usize,
    len: usize,
) -> Frequencies {
    let half = head_dim / 2;
    let dim = head_dim as f32;
    // transformers: base ** (arange(0, dim, 2).float() / dim), in f32.
    let default_inv =
        |base: f32| -> Vec<f32> { (0..half).map(|i| 1.0 / base.powf((2 * i) as f32 / dim)).collect() };
    let plain = Frequencies { inv_freq: None, theta, attention_factor: 1.0 };
    match scaling {
        None => plain,
        Some(RopeScaling::Linear { factor }) => {
            let factor = *factor as f32;
            let inv = default_inv(theta as f32).into_iter().map(|f| f / factor).collect();
            Frequencies { inv_freq: Some(inv), theta, attention_factor: 1.0 }
        }
        Some(RopeScaling::Dynamic { factor }) => {
            if len <= max_position_embeddings {
                return plain;
            }
            let (factor, len, max) = (*factor as f32, len as f32, max_position_embeddings as f32);
            let base = theta as f32 * ((factor * len / max) - (factor - 1.0)).powf(dim / (dim - 2.0));
            Frequencies { inv_freq: Some(default_inv(base)), theta, attention_factor: 1.0 }
        }
        Some(RopeScaling::Yarn(y)) => {
            let original = y.original_max_position_embeddings.unwrap_or(max_position_embeddings) as f64;
            let get_mscale =
                |scale: f64, mscale: f64| if scale <= 1.0 { 1.0 } else { 0.1 * mscale * scale.ln() + 1.0 };
            let attention_factor = y.attention_factor.unwrap_or_else(|| match (y.mscale, y.mscale_all_dim) {
                (Some(m), Some(all)) if m != 0.0 && all != 0.0 => {
                    get_mscale(y.factor, m) / get_mscale(y.factor, all)
                }
                _ => get_mscale(y.factor, 1.0),
            });
            let d = head_dim as f64;
            let correction_dim = |rotations: f64| {
                (d * (original / (rotations * 2.0 * std::f64::consts::PI)).ln()) / (2.0 * theta.ln())
            };
            let (mut low, mut high) = (correction_dim(y.beta_fast), correction_dim(y.beta_slow));
            if y.truncate {
                low = low.floor();
                high = high.ceil();
            }
            let (low, mut high) = (low.max(0.0), high.min(d - 1.0));
            if low == high {
                high += 0.001;
            }
            let factor = y.factor as f32;
            let inv = (0..half)
                .map(|i| {
                    let pos_freq = (theta as f32).powf((2 * i) as f32 / dim);
                    let ramp = ((i as f32 - low as f32) / (high as f32 - low as f32)).clamp(0.0, 1.0);
                    let extrapolation = 1.0 - ramp;
                    (1.0 / (factor * pos_freq)) * (1.0 - extrapolation) + (1.0 / pos_freq) * extrapolation
                })
                .collect();
            Frequencies { inv_freq: Some(inv), theta, attention_factor }
        }
    }
}

/// The sin and cos of every position below `len` and frequency, row-major (len, head_dim / 2),
/// computed in f64 and multiplied by the attention factor.
pub(crate) fn sin_cos_table(frequencies: &Frequencies, len: usize, head_dim: usize) -> (Vec<f64>, Vec<f64>) {
    let half = head_dim / 2;
    let mut sin = Vec::with_capacity(len * half);
    let mut cos = Vec::with_capacity(len * half);
    let a = frequencies.attention_factor;
    for pos in 0..len {
        for i in 0..half {
            // RoFormer's own table divides by theta^(2i/d), exactly as transformers' numpy code does.
            let angle = match &frequencies.inv_freq {
                None => pos as f64 / frequencies.theta.powf(2.0 * i as f64 / head_dim as f64),
                Some(inv) => pos as f64 * inv[i] as f64,
            };
            sin.push(angle.sin() * a);
            cos.push(angle.cos() * a);
        }
    }
    (sin, cos)
}
