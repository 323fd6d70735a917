//! JSON files of a checkpoint folder that may be absent: tokenizer_config.json, modules.json,
//! a sentence-transformers module's config.

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::error::{Error, Result};

/// A JSON file of the folder, `None` when absent; a malformed one is an error naming it.
pub(crate) fn read_json_if_exists(path: &Path) -> Result<Option<Value>> {
    if !path.is_file() {
        return Ok(None);
    }
    parse_json(&std::fs::read(path).map_err(|e| Error::io(path, e))?, path).map(Some)
}

/// A JSON file's bytes; a malformed one is an error naming `path`.
pub(crate) fn parse_json(bytes: &[u8], path: &Path) -> Result<Value> {
    serde_json::from_slice(bytes).map_err(|e| Error::Config {
        path: Some(PathBuf::from(path)),
        field: String::new(),
        message: e.to_string(),
    })
}
