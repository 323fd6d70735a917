//! sentence-transformers' SpladePooling module: its config.json, and how it makes one vector of a
//! text's masked-LM logits, as text-embeddings-inference's `--pooling splade` does with the
//! defaults.

use serde_json::Value;

use crate::error::{Error, Result};
use crate::loading::model_files::ModelFiles;

/// How SpladePooling (and TEI's `--pooling splade`, with the defaults) makes one vector of a
/// text's masked-LM logits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(super) struct SpladePooling {
    /// Sum over the tokens (the first SPLADE) instead of the max.
    sum: bool,
    /// `log(1 + log(1 + relu(x)))` (`log1p_relu`) instead of `log(1 + relu(x))`.
    log1p_twice: bool,
}

impl SpladePooling {
    /// The module's config.json: `pooling_strategy` (max, sum) and `activation_function` (relu,
    /// log1p_relu), sentence-transformers' defaults (max, relu) where absent, as where the file is.
    pub fn read(module: &ModelFiles) -> Result<Self> {
        let path = module.path("config.json");
        let config = module.read_json_object_if_exists("config.json")?.unwrap_or(Value::Null);
        let choice = |field: &str, choices: &[&str]| -> Result<Option<usize>> {
            match config.get(field) {
                None => Ok(None),
                Some(value) => {
                    value.as_str().and_then(|v| choices.iter().position(|c| *c == v)).map(Some).ok_or_else(
                        || {
                            Error::config_in(
                                &path,
                                field,
                                format!("{value} is not one of {}", choices.join(", ")),
                            )
                        },
                    )
                }
            }
        };
        let sum = choice("pooling_strategy", &["max", "sum"])? == Some(1);
        let log1p_twice = choice("activation_function", &["relu", "log1p_relu"])? == Some(1);
        Ok(Self { sum, log1p_twice })
    }

    /// One text's vector, a value per vocabulary entry, from its tokens' logits; every value is
    /// zero or above. A max is taken before the activation, which does not change it (the
    /// activation is increasing); a sum after it. `ln_1p` keeps the small values that
    /// `ln(1 + x)` would round to zero.
    pub fn pool(&self, tokens: &[Vec<f32>]) -> Vec<f32> {
        let activation = |x: f32| {
            let y = x.max(0.0).ln_1p();
            if self.log1p_twice {
                y.ln_1p()
            } else {
                y
            }
        };
        let Some(first) = tokens.first() else { return Vec::new() };
        if self.sum {
            let mut sum = vec![0f32; first.len()];
            for row in tokens {
                for (s, &x) in sum.iter_mut().zip(row) {
                    *s += activation(x);
                }
            }
            sum
        } else {
            let mut max = first.clone();
            for row in &tokens[1..] {
                for (m, &x) in max.iter_mut().zip(row) {
                    *m = m.max(x);
                }
            }
            max.into_iter().map(activation).collect()
        }
    }
}
