//! What can go wrong in the core, as a plain enum: the `http` layer picks the status and body.

use std::fmt;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum InferError {
    /// An empty input, batch or list.
    Empty(String),
    /// Input refused after parsing it.
    Validation(String),
    /// More inputs than `--max-client-batch-size`.
    BatchSize { size: usize, max: usize },
    /// The tokenizer failed on an input.
    Tokenizer(String),
    /// Every permit of `--max-concurrent-requests` is held.
    Overloaded,
    /// The route does not fit the model.
    ModelType(String),
    /// A forward pass that failed: a fault of the server, not of the input.
    Backend(String),
    /// The health check's forward pass did not answer.
    Unhealthy,
}

impl InferError {
    /// The `err` label of `te_request_failure`.
    pub fn metric(&self) -> &'static str {
        match self {
            Self::Empty(_) | Self::Validation(_) => "validation",
            Self::BatchSize { .. } => "batch_size",
            Self::Tokenizer(_) => "tokenization",
            Self::Overloaded => "overloaded",
            Self::ModelType(_) => "model_type",
            Self::Backend(_) | Self::Unhealthy => "inference",
        }
    }

    pub fn tokenizer(e: impl fmt::Display) -> Self {
        Self::Tokenizer(e.to_string())
    }

    pub fn backend(e: impl fmt::Display) -> Self {
        Self::Backend(e.to_string())
    }
}

/// TEI's messages.
impl fmt::Display for InferError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Empty(m) | Self::Validation(m) => f.write_str(m),
            Self::BatchSize { size, max } => {
                write!(f, "batch size {size} > maximum allowed batch size {max}")
            }
            Self::Tokenizer(e) => write!(f, "tokenizer error {e}"),
            Self::Overloaded => f.write_str("Model is overloaded"),
            Self::ModelType(m) | Self::Backend(m) => write!(f, "Backend error: {m}"),
            Self::Unhealthy => f.write_str("unhealthy"),
        }
    }
}

impl std::error::Error for InferError {}
