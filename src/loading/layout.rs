//! The layout of a Hugging Face checkpoint folder that both the checkpoint reader and the Hub
//! client rely on: the weight files and their order of preference, the shard index, and the names
//! a folder may hold.

use std::collections::BTreeSet;
use std::path::Path;

use crate::error::{Error, Result};
use crate::loading::json::parse_json;

/// A single safetensors file.
pub(crate) const SAFETENSORS: &str = "model.safetensors";
/// The shard index of sharded safetensors.
pub(crate) const SAFETENSORS_INDEX: &str = "model.safetensors.index.json";
/// A single PyTorch pickle.
pub(crate) const PYTORCH: &str = "pytorch_model.bin";
/// The shard index of sharded PyTorch pickles.
pub(crate) const PYTORCH_INDEX: &str = "pytorch_model.bin.index.json";

/// Weight files, in order of preference; an `.index.json` brings its shards.
pub(crate) const WEIGHT_FILES: [&str; 4] = [SAFETENSORS, SAFETENSORS_INDEX, PYTORCH, PYTORCH_INDEX];

/// Tokenizer and config files a folder may hold beside `config.json` and the weights,
/// sentence-transformers' included.
pub(crate) const OPTIONAL_FILES: [&str; 6] = [
    "tokenizer_config.json",
    "vocab.txt",
    "tokenizer.json",
    "special_tokens_map.json",
    "modules.json",
    "config_sentence_transformers.json",
];

/// The names of a sentence-transformers folder's Transformer module settings, in the order
/// sentence-transformers tries them: the first present is read. Releases before the Transformer
/// module named the file after the architecture, and today's still read those names.
pub(crate) const TRANSFORMER_CONFIG_FILES: [&str; 7] = [
    "sentence_bert_config.json",
    "sentence_roberta_config.json",
    "sentence_distilbert_config.json",
    "sentence_camembert_config.json",
    "sentence_albert_config.json",
    "sentence_xlm-roberta_config.json",
    "sentence_xlnet_config.json",
];

/// The files of a sentence-transformers module in its subfolder (a Pooling's config, a Dense's
/// config and weights).
pub(crate) const MODULE_FILES: [&str; 3] = ["config.json", SAFETENSORS, PYTORCH];

/// The subfolders a sentence-transformers `modules.json` names (the Transformer's is the root);
/// `path` names the file in errors.
pub(crate) fn module_folders(bytes: &[u8], path: &Path) -> Result<Vec<String>> {
    let list = parse_json(bytes, path)?;
    Ok(list
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|m| m.get("path")?.as_str())
        .filter(|p| !p.is_empty())
        .map(str::to_string)
        .collect())
}

/// A weight file name that is a shard index (`*.index.json`), not weights.
pub(crate) fn is_shard_index(name: &str) -> bool {
    name.ends_with(".index.json")
}

/// The shard file names a `*.index.json` lists in its `weight_map`, sorted, each once, from the
/// index's bytes; `path` names the index in errors.
pub(crate) fn shard_names(bytes: &[u8], path: &Path) -> Result<Vec<String>> {
    let bad = |message: String| Error::Checkpoint { path: path.to_path_buf(), message, source: None };
    let index: serde_json::Value =
        serde_json::from_slice(bytes).map_err(|e| bad(format!("malformed shard index: {e}")))?;
    let map = index
        .get("weight_map")
        .and_then(|m| m.as_object())
        .ok_or_else(|| bad("shard index has no `weight_map` object".into()))?;
    let mut shards = BTreeSet::new();
    for (tensor, file) in map {
        let file =
            file.as_str().ok_or_else(|| bad(format!("weight_map entry `{tensor}` is not a file name")))?;
        // Shards must stay inside the checkpoint folder, whoever wrote the index.
        validate_relative(file)
            .map_err(|m| bad(format!("weight_map entry `{tensor}` names a shard outside the folder: {m}")))?;
        shards.insert(file.to_string());
    }
    if shards.is_empty() {
        return Err(bad("shard index lists no files".into()));
    }
    Ok(shards.into_iter().collect())
}

/// `org/name` or `name`: letters, digits, `.`, `_`, `-`; no `..` or `--`; at most 96 per part.
pub(crate) fn validate_repo_id(id: &str) -> std::result::Result<(), String> {
    let parts: Vec<&str> = id.split('/').collect();
    if parts.len() > 2 {
        return Err(format!("invalid repo id `{id}`: at most one `/`"));
    }
    for part in parts {
        let ok = !part.is_empty()
            && part.len() <= 96
            && part.bytes().all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b))
            && !part.starts_with(['.', '-'])
            && !part.ends_with(['.', '-'])
            && !part.contains("..")
            && !part.contains("--");
        if !ok {
            return Err(format!("invalid repo id `{id}`"));
        }
    }
    Ok(())
}

/// A relative path of checked components, which cannot leave the folder it is joined to.
pub(crate) fn validate_relative(path: &str) -> std::result::Result<(), String> {
    if path.is_empty() || path.len() > 255 {
        return Err(format!("`{path}` is empty or too long"));
    }
    path.split('/').try_for_each(validate_component).map_err(|m| format!("`{path}`: {m}"))
}

/// One path component: letters, digits, `.`, `_`, `-`, not starting with `.`, and not ending in
/// `.incomplete` or `.lock` (the cache's own names).
pub(crate) fn validate_component(part: &str) -> std::result::Result<(), String> {
    let ok = !part.is_empty()
        && part.len() <= 128
        && !part.starts_with('.')
        && !part.ends_with(".incomplete")
        && part.bytes().all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b));
    if ok {
        Ok(())
    } else {
        Err(format!("`{part}` is not a plain name (letters, digits, `.`, `_`, `-`, not starting with `.`)"))
    }
}
