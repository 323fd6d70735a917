//! Parsing the JSON files of a checkpoint folder (tokenizer_config.json, modules.json, a
//! sentence-transformers module's config), with errors that name the file.

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::error::{Error, Result};

/// A JSON file's bytes; a malformed one is an error naming `path`.
pub(crate) fn parse_json(bytes: &[u8], path: &Path) -> Result<Value> {
    serde_json::from_slice(bytes).map_err(|e| Error::Config {
        path: Some(PathBuf::from(path)),
        field: String::new(),
        message: e.to_string(),
    })
}
