//! The one error type of the crate: every failure names what is wrong (file, tensor, field, line).
//!
//! `Display` gives this crate's message and `source()` the error underneath, so a reporter that
//! walks the chain (anyhow's `{:#}`, say) prints each part once.

use std::path::PathBuf;

/// An error from a library underneath (tokenizers, the HTTP client).
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// Errors returned by this crate.
#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    /// A file could not be read or written.
    Io {
        /// The file.
        path: PathBuf,
        /// What the system said.
        source: std::io::Error,
    },
    /// `config.json` (or another JSON file) is malformed or holds an invalid value.
    Config {
        /// The file, when the config came from one.
        path: Option<PathBuf>,
        /// The field at fault (`a.b[2]`), empty for a malformed file.
        field: String,
        /// What is wrong with it.
        message: String,
    },
    /// A tensor the model needs is not in the checkpoint.
    MissingTensor {
        /// The weight file (or shard index).
        path: PathBuf,
        /// The tensor's name.
        tensor: String,
    },
    /// A tensor in the checkpoint has another shape than the config implies.
    ShapeMismatch {
        /// The weight file.
        path: PathBuf,
        /// The tensor's name.
        tensor: String,
        /// The shape the config implies.
        expected: Vec<usize>,
        /// The shape in the file.
        found: Vec<usize>,
    },
    /// A checkpoint file is truncated, corrupt, of an unknown format, or disagrees with the config.
    Checkpoint {
        /// The weight file.
        path: PathBuf,
        /// What is wrong with it.
        message: String,
        /// The error underneath, if any.
        source: Option<BoxError>,
    },
    /// A vocabulary or tokenizer file is unusable.
    Vocab {
        /// The vocabulary or tokenizer file.
        path: PathBuf,
        /// The 1-based line at fault, if one is.
        line: Option<usize>,
        /// What is wrong.
        message: String,
    },
    /// Tokenization failed.
    Tokenizer {
        /// What failed.
        message: String,
        /// The tokenizers library's error, if it raised one.
        source: Option<BoxError>,
    },
    /// Input to a forward pass or pipeline is invalid: a tensor's shape, an empty text, a token id
    /// past the vocabulary, a text too long for what is asked.
    Input(String),
    /// An option or argument is out of its range or unknown (a batch size of 0, a pooling name).
    InvalidOption {
        /// The option, as its `with_*` builder or field names it (`batch_size`, `pooling`, ...).
        option: String,
        /// What is wrong with its value.
        message: String,
    },
    /// A prompt name the model folder does not have.
    UnknownPrompt {
        /// The name asked for.
        name: String,
        /// The folder's prompt names, sorted (empty when it has none).
        known: Vec<String>,
        /// The folder's `config_sentence_transformers.json` (where the prompts would be).
        path: PathBuf,
    },
    /// The model, as loaded, cannot do what is asked: quantize weights loaded for training, in half
    /// precision or on a GPU; pool with a pooler the checkpoint lacks.
    Unsupported(String),
    /// A file could not be fetched from the Hugging Face Hub.
    Hub {
        /// `id@revision`: the repo and the branch, tag, commit or `refs/pr/N` asked for.
        repo: String,
        /// The file being fetched, empty when the repo itself is at fault.
        file: String,
        /// What kind of failure, as huggingface_hub names them.
        kind: HubErrorKind,
        /// The HTTP status the server answered, when it answered one.
        status: Option<u16>,
        /// What went wrong, and what to do about it.
        message: String,
        /// The transport error underneath, if any.
        source: Option<BoxError>,
    },
    /// A tensor operation failed.
    Candle(candle_core::Error),
}

/// The kinds of [`Error::Hub`], after the errors of Python's huggingface_hub.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum HubErrorKind {
    /// No such repo, or a private one the token cannot read (`RepositoryNotFoundError`).
    RepositoryNotFound,
    /// A gated repo: a token is needed, of an account that accepted its terms (`GatedRepoError`).
    GatedRepo,
    /// The repo has no such branch, tag, commit or PR ref (`RevisionNotFoundError`).
    RevisionNotFound,
    /// The revision has no such file (`EntryNotFoundError`).
    EntryNotFound,
    /// The server failed (5xx or 429) on every try.
    ServerError,
    /// Any other refusal (400, 403, an invalid token, ...).
    Http,
    /// No answer: the connection failed or broke on every try.
    Connection,
    /// An answer the client refuses: a header missing or unsafe as a cache path, a short body.
    InvalidResponse,
    /// A repo id, revision or file name that is not valid, refused before any request.
    InvalidInput,
    /// Offline mode is on and the cache lacks the file (`LocalEntryNotFoundError`).
    NotCached,
}

/// Result alias of this crate.
pub type Result<T> = std::result::Result<T, Error>;

/// `candle_core::bail!` for functions that return this crate's [`Result`]: returns the error
/// `bail!` makes (the formatted message, and a backtrace when enabled) as [`Error::Candle`], whose
/// message is Candle's.
macro_rules! candle_bail {
    ($($arg:tt)+) => {
        return Err($crate::error::Error::Candle(candle_core::Error::Msg(format!($($arg)+)).bt()))
    };
}
pub(crate) use candle_bail;

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Error::Io { path, .. } => write!(f, "{}", path.display()),
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
            Error::Checkpoint { path, message, .. } => write!(f, "{}: {message}", path.display()),
            Error::Vocab { path, line, message } => match line {
                Some(line) => write!(f, "{}:{line}: {message}", path.display()),
                None => write!(f, "{}: {message}", path.display()),
            },
            Error::Tokenizer { message, .. } => write!(f, "tokenizer: {message}"),
            Error::Input(message) => write!(f, "invalid input: {message}"),
            Error::InvalidOption { message, .. } => write!(f, "invalid option: {message}"),
            Error::UnknownPrompt { name, known, path } => {
                write!(f, "unknown prompt name `{name}`: {} has ", path.display())?;
                if known.is_empty() {
                    write!(f, "no prompts")
                } else {
                    let known: Vec<String> = known.iter().map(|n| format!("`{n}`")).collect();
                    write!(f, "the prompts {}", known.join(", "))
                }
            }
            Error::Unsupported(message) => write!(f, "not supported: {message}"),
            Error::Hub { repo, file, message, .. } => {
                if file.is_empty() {
                    write!(f, "hub {repo}: {message}")
                } else {
                    write!(f, "hub {repo}/{file}: {message}")
                }
            }
            // Transparent: Candle's message is the message.
            Error::Candle(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Io { source, .. } => Some(source),
            Error::Checkpoint { source: Some(source), .. }
            | Error::Tokenizer { source: Some(source), .. }
            | Error::Hub { source: Some(source), .. } => Some(source.as_ref()),
            Error::Candle(e) => e.source(),
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

    /// A field of the JSON file at `path` at fault.
    pub(crate) fn config_in(
        path: &std::path::Path,
        field: impl Into<String>,
        message: impl Into<String>,
    ) -> Self {
        Error::Config { path: Some(path.to_path_buf()), field: field.into(), message: message.into() }
    }

    pub(crate) fn option(option: &str, message: impl Into<String>) -> Self {
        Error::InvalidOption { option: option.to_string(), message: message.into() }
    }

    /// A count option given as 0: "`option` must be at least 1".
    pub(crate) fn at_least_one(option: &str) -> Self {
        Error::option(option, format!("{option} must be at least 1"))
    }

    pub(crate) fn tokenizer(message: impl Into<String>) -> Self {
        Error::Tokenizer { message: message.into(), source: None }
    }

    /// A failure inside the tokenizers library, kept as the source.
    pub(crate) fn from_tokenizers(source: tokenizers::Error) -> Self {
        Error::Tokenizer { message: "tokenization failed".into(), source: Some(source) }
    }

    /// Back into Candle's error type, for the public `candle_core::Module` impls, whose signature
    /// fixes it: a Candle error comes back as it was, any other is wrapped with its message.
    pub(crate) fn into_candle(self) -> candle_core::Error {
        match self {
            Error::Candle(e) => e,
            other => candle_core::Error::wrap(other),
        }
    }
}
