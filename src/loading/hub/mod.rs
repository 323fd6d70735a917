//! Checkpoints by Hugging Face Hub id, in the standard Hugging Face cache layout
//! (`models--{org}--{name}/{blobs,snapshots,refs}`), shared with Python's huggingface_hub.
//!
//! The client asks as huggingface_hub does: a `HEAD` on `{endpoint}/{repo}/resolve/{revision}/{file}`
//! that follows only relative redirects (a renamed repo), then reads `X-Repo-Commit`,
//! `X-Linked-Etag`/`ETag`, `X-Linked-Size`/`Content-Length` and, for large files, the `Location`
//! of the download host. The token goes to the endpoint's own origin only. A blob the cache holds
//! is never fetched again; a download goes to `blobs/{etag}.incomplete`, under the lock file
//! Python uses, and an interrupted one resumes with a `Range` request. Errors are typed by the
//! `X-Error-Code` the Hub sends (see [`crate::HubErrorKind`]); 5xx, 429 and broken connections are
//! retried a bounded number of times.
//!
//! Every name that reaches the file system (repo id, revision, file name, ETag, commit, shard
//! names) is checked before any request or write: hf-hub (0.5 and 1.0) joins the server's `ETag`
//! and `X-Repo-Commit` headers into cache paths unchecked.
//!
//! `options` holds [`HubOptions`], `cache` the cache layout and the error mapping, `http` the
//! requests and their retries; the names checked are those of `crate::loading::layout`. Without
//! the `hub` feature only `options` is built, and a model must be a folder.

#[cfg(feature = "hub")]
pub(crate) mod cache;
#[cfg(feature = "hub")]
mod http;
pub(crate) mod options;

use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use crate::loading::hub::options::HubOptions;
use crate::loading::layout::validate_repo_id;

impl HubOptions {
    /// A local checkpoint folder for `model`: the folder itself when it is one, else the Hub repo
    /// of that id at `revision` (default `main`), from the cache or downloaded into it.
    pub fn resolve(&self, model: impl AsRef<Path>, revision: Option<&str>) -> Result<PathBuf> {
        resolve(model.as_ref(), revision, self)
    }
}

/// A local checkpoint folder for `model`: the folder itself when it is one, else the Hub repo of
/// that id at `revision` (default `main`; junnyu's safetensors live on branches such as
/// `refs/pr/1`), downloaded into the cache unless the cache already holds a complete copy.
fn resolve(model: &Path, revision: Option<&str>, hub: &HubOptions) -> Result<PathBuf> {
    if model.is_dir() {
        return Ok(model.to_path_buf());
    }
    let text = model.to_str().unwrap_or_default();
    if looks_like_path(text) {
        return Err(Error::Checkpoint {
            path: model.to_path_buf(),
            message: "no such folder".into(),
            source: None,
        });
    }
    fetch(text, revision.unwrap_or("main"), hub)
}

/// The snapshot folder of Hub repo `id` at `revision`, downloaded into the cache unless it is there.
#[cfg(feature = "hub")]
fn fetch(id: &str, revision: &str, hub: &HubOptions) -> Result<PathBuf> {
    use crate::error::HubErrorKind;
    let repo = cache::Repo::new(id, revision, hub)?;
    if let Some(dir) = repo.complete_snapshot() {
        return Ok(dir);
    }
    if hub.offline {
        return Err(repo.error(
            "config.json",
            HubErrorKind::NotCached,
            None,
            "not in the local cache, and offline mode is on (HF_HUB_OFFLINE)",
        ));
    }
    repo.download()
}

#[cfg(not(feature = "hub"))]
fn fetch(id: &str, _revision: &str, _hub: &HubOptions) -> Result<PathBuf> {
    Err(Error::Unsupported(format!(
        "`{id}` is not a folder, and loading by Hugging Face Hub id needs the crate's `hub` feature"
    )))
}

/// A model name that is a path, not a Hub id: an id is `name` or `org/name` of letters, digits,
/// `.`, `_` and `-`, and `org/name` whose `org` is a local folder (`models/x`) is a path too.
fn looks_like_path(model: &str) -> bool {
    model.is_empty()
        || model.starts_with(['.', '/', '~'])
        || model.contains('\\')
        || model.split('/').count() > 2
        || validate_repo_id(model).is_err()
        || model.split_once('/').is_some_and(|(parent, _)| Path::new(parent).is_dir())
}

#[cfg(all(test, feature = "hub"))]
mod tests {
    use crate::loading::hub::cache::is_commit_hash;
    use crate::loading::layout::{validate_relative, validate_repo_id};

    #[test]
    fn names_that_could_leave_the_cache_are_refused() {
        for bad in ["../x", "a/../../b", "/etc/passwd", ".hidden", "a//b", "", "a\\b", "x\0y", "x.incomplete"]
        {
            assert!(validate_relative(bad).is_err(), "{bad:?}");
        }
        for good in ["main", "refs/pr/1", "v1.0", "model-00001-of-00002.safetensors", "sub/file.txt"] {
            assert!(validate_relative(good).is_ok(), "{good:?}");
        }
        for bad in ["a/b/c", "../x", "a--b/c", "a/.b", "-a/b", "a b/c", ""] {
            assert!(validate_repo_id(bad).is_err(), "{bad:?}");
        }
        assert!(validate_repo_id("junnyu/roformer_chinese_base").is_ok());
        assert!(is_commit_hash(&"ab12".repeat(10)) && !is_commit_hash("../../../../x"));
    }
}
