//! Checkpoints by Hugging Face Hub id: files land in the standard HF cache (HF_HOME honoured),
//! HF_ENDPOINT picks the server, and HF_HUB_OFFLINE=1 reads the cache alone.

use std::path::{Path, PathBuf};

use hf_hub::api::sync::{ApiBuilder, ApiError};
use hf_hub::{Cache, Repo, RepoType};

use crate::error::{Error, Result};

/// Tokenizer and config files fetched when the repo has them.
const OPTIONAL_FILES: [&str; 4] =
    ["tokenizer_config.json", "vocab.txt", "tokenizer.json", "special_tokens_map.json"];

/// A local checkpoint folder for `model`: the folder itself when it is one, else the Hub repo of
/// that id at `revision` (default `main`; junnyu's safetensors live on branches such as
/// `refs/pr/1`), downloaded into the cache unless the cache already holds a complete copy.
pub fn resolve(model: &str, revision: Option<&str>) -> Result<PathBuf> {
    let path = Path::new(model);
    if path.is_dir() {
        return Ok(path.to_path_buf());
    }
    if model.starts_with(['.', '/', '~']) || model.split('/').count() > 2 || model.is_empty() {
        return Err(Error::io(
            path,
            std::io::Error::new(std::io::ErrorKind::NotFound, "no such checkpoint folder"),
        ));
    }
    let revision = revision.unwrap_or("main");
    let repo = Repo::with_revision(model.to_string(), RepoType::Model, revision.to_string());
    let cache = Cache::from_env();
    if let Some(dir) = complete_in_cache(&cache, &repo) {
        return Ok(dir);
    }
    if offline() {
        return Err(Error::Hub {
            repo: format!("{model}@{revision}"),
            file: "config.json".into(),
            message: "not in the local cache, and HF_HUB_OFFLINE is set".into(),
        });
    }
    download(&cache, repo, model, revision)
}

fn offline() -> bool {
    std::env::var("HF_HUB_OFFLINE")
        .is_ok_and(|v| matches!(v.trim(), "1" | "true" | "TRUE" | "yes" | "ON" | "on"))
}

/// The snapshot folder when the cache has a config, weights and a vocabulary for this revision.
fn complete_in_cache(cache: &Cache, repo: &Repo) -> Option<PathBuf> {
    let cached = cache.repo(repo.clone());
    let config = cached.get("config.json")?;
    let dir = config.parent()?.to_path_buf();
    let has_weights = ["model.safetensors", "pytorch_model.bin"].iter().any(|f| dir.join(f).exists())
        || shards_complete(&dir);
    let has_vocab = ["vocab.txt", "tokenizer.json"].iter().any(|f| dir.join(f).exists());
    (has_weights && has_vocab).then_some(dir)
}

fn shards_complete(dir: &Path) -> bool {
    crate::loading::shard_files(&dir.join("model.safetensors.index.json"))
        .is_ok_and(|names| names.iter().all(|n| dir.join(n).exists()))
}

fn is_not_found(e: &ApiError) -> bool {
    matches!(e, ApiError::RequestError(inner) if inner.to_string().contains("404"))
}

fn download(cache: &Cache, repo: Repo, model: &str, revision: &str) -> Result<PathBuf> {
    let hub_error = |file: &str, e: ApiError| Error::Hub {
        repo: format!("{model}@{revision}"),
        file: file.to_string(),
        message: if is_not_found(&e) { "not found on the Hub (404)".into() } else { e.to_string() },
    };
    let mut builder = ApiBuilder::from_cache(cache.clone()).with_progress(false);
    if let Ok(endpoint) = std::env::var("HF_ENDPOINT") {
        builder = builder.with_endpoint(endpoint);
    }
    let api = builder.build().map_err(|e| hub_error("", e))?;
    let api = api.repo(repo);

    let config = api.get("config.json").map_err(|e| hub_error("config.json", e))?;
    let dir = config.parent().map(Path::to_path_buf).unwrap_or_default();
    // Weights: safetensors first, then its shards, then the PyTorch pickle.
    let mut found_weights = false;
    for file in ["model.safetensors", "model.safetensors.index.json", "pytorch_model.bin"] {
        match api.get(file) {
            Ok(path) => {
                if file.ends_with(".index.json") {
                    for shard in crate::loading::shard_files(&path)? {
                        api.get(&shard).map_err(|e| hub_error(&shard, e))?;
                    }
                }
                found_weights = true;
                break;
            }
            Err(e) if is_not_found(&e) => continue,
            Err(e) => return Err(hub_error(file, e)),
        }
    }
    if !found_weights {
        return Err(Error::Hub {
            repo: format!("{model}@{revision}"),
            file: "model.safetensors".into(),
            message: "no model.safetensors, shard index or pytorch_model.bin in this revision \
                      (junnyu's checkpoints keep safetensors on branches such as refs/pr/1)"
                .into(),
        });
    }
    for file in OPTIONAL_FILES {
        match api.get(file) {
            Ok(_) => {}
            Err(e) if is_not_found(&e) => {}
            Err(e) => return Err(hub_error(file, e)),
        }
    }
    Ok(dir)
}
