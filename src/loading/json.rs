//! Parsing the JSON files of a checkpoint folder (tokenizer_config.json, modules.json, a
//! sentence-transformers module's config), with errors that name the file.

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::error::{Error, Result};

/// A boolean field of a JSON object read from `path`: `None` when absent or null, an error
/// naming the field for any other value (`0` or `"false"` would be true to Python's truth test).
pub(crate) fn optional_bool(config: &Value, field: &str, path: &Path) -> Result<Option<bool>> {
    match config.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Bool(b)) => Ok(Some(*b)),
        Some(other) => Err(Error::config_in(path, field, format!("{other} is not a boolean"))),
    }
}

/// A JSON file's bytes; a malformed one is an error naming `path`.
pub(crate) fn parse_json(bytes: &[u8], path: &Path) -> Result<Value> {
    serde_json::from_slice(bytes).map_err(|e| Error::Config {
        path: Some(PathBuf::from(path)),
        field: String::new(),
        message: e.to_string(),
    })
}
