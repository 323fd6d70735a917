//! The one error type of the crate: every failure names what is wrong (file, tensor, field, line).

use std::path::PathBuf;

/// Errors returned by this crate.
#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    /// A file could not be read or written.
    Io { path: PathBuf, source: std::io::Error },
    /// `config.json` (or another JSON file) is malformed or holds an invalid value.
    Config { path: Option<PathBuf>, field: String, message: String },
    /// A tensor the model needs is not in the checkpoint.
    MissingTensor { path: PathBuf, tensor: String },
    /// A tensor in the checkpoint has another shape than the config implies.
    ShapeMismatch { path: PathBuf, tensor: String, expected: Vec<usize>, found: Vec<usize> },
    /// A checkpoint file is truncated, corrupt or of an unknown format.
    Checkpoint { path: PathBuf, message: String },
    /// A vocabulary or tokenizer file is unusable.
    Vocab { path: PathBuf, line: Option<usize>, message: String },
    /// Tokenization failed.
    Tokenizer(String),
    /// Input to a forward pass or pipeline is invalid (shapes, empty batch, ...).
    Input(String),
    /// A file could not be fetched from the Hugging Face Hub.
    Hub { repo: String, file: String, message: String },
    /// A tensor operation failed.
    Candle(candle_core::Error),
}

/// Result alias of this crate.
pub type Result<T> = std::result::Result<T, Error>;

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Error::Io { path, source } => write!(f, "{}: {source}", path.display()),
            Error::Config { path, field, message } => {
                if let Some(path) = path {
                    write!(f, "{}: ", path.display())?;
                }
                if field.is_empty() {
                    write!(f, "invalid config: {message}")
                } else {
                    write!(f, "invalid config field `{field}`: {message}")
                }
            }
            Error::MissingTensor { path, tensor } => {
                write!(f, "{}: tensor `{tensor}` not found in checkpoint", path.display())
            }
            Error::ShapeMismatch { path, tensor, expected, found } => write!(
                f,
                "{}: tensor `{tensor}` has shape {found:?}, the config implies {expected:?}",
                path.display()
            ),
            Error::Checkpoint { path, message } => write!(f, "{}: {message}", path.display()),
            Error::Vocab { path, line, message } => match line {
                Some(line) => write!(f, "{}:{line}: {message}", path.display()),
                None => write!(f, "{}: {message}", path.display()),
            },
            Error::Tokenizer(message) => write!(f, "tokenizer: {message}"),
            Error::Input(message) => write!(f, "invalid input: {message}"),
            Error::Hub { repo, file, message } => write!(f, "hub {repo}/{file}: {message}"),
            Error::Candle(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Io { source, .. } => Some(source),
            Error::Candle(e) => Some(e),
            _ => None,
        }
    }
}

impl From<candle_core::Error> for Error {
    fn from(e: candle_core::Error) -> Self {
        Error::Candle(e)
    }
}

impl Error {
    pub(crate) fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Error::Io { path: path.into(), source }
    }

    pub(crate) fn config(field: &str, message: impl Into<String>) -> Self {
        Error::Config { path: None, field: field.to_string(), message: message.into() }
    }
}
