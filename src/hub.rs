//! Checkpoints by Hugging Face Hub id, in the standard Hugging Face cache layout
//! (`models--{org}--{name}/{blobs,snapshots,refs}`), shared with Python's huggingface_hub.
//!
//! hf-hub 0.5 builds cache paths from the server's `ETag` and `X-Repo-Commit` headers and from
//! revisions as given, so a server (or a repo's shard index) could make it write outside the cache;
//! it also panics on some malformed answers. This client checks every name that reaches the file
//! system (repo id, revision, file name, ETag, commit) before any request or write.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::error::{BoxError, Error, Result};

/// Where and how checkpoints are fetched from the Hugging Face Hub. The defaults come from the
/// environment, as Python's huggingface_hub reads it: `HF_HUB_CACHE` or `HF_HOME`, `HF_ENDPOINT`,
/// `HF_HUB_OFFLINE`, and `HF_TOKEN` or the token file that `huggingface-cli login` writes.
#[derive(Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct HubOptions {
    /// The cache folder (`…/huggingface/hub`).
    pub cache_dir: PathBuf,
    /// The server, `https://huggingface.co` by default.
    pub endpoint: String,
    /// Read the cache alone, without any request.
    pub offline: bool,
    /// Access token for private or gated repos.
    pub token: Option<String>,
}

impl std::fmt::Debug for HubOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HubOptions")
            .field("cache_dir", &self.cache_dir)
            .field("endpoint", &self.endpoint)
            .field("offline", &self.offline)
            .field("token", &self.token.as_ref().map(|_| "<set>"))
            .finish()
    }
}

impl Default for HubOptions {
    fn default() -> Self {
        Self::from_env()
    }
}

impl HubOptions {
    /// The settings the environment gives.
    pub fn from_env() -> Self {
        let var = |name: &str| std::env::var(name).ok().filter(|v| !v.trim().is_empty());
        let home = var("HF_HOME").map(PathBuf::from).unwrap_or_else(|| {
            let user_home = std::env::var_os("HOME").map(PathBuf::from).unwrap_or_default();
            var("XDG_CACHE_HOME").map(PathBuf::from).unwrap_or(user_home.join(".cache")).join("huggingface")
        });
        let cache_dir = var("HF_HUB_CACHE").map(PathBuf::from).unwrap_or_else(|| home.join("hub"));
        let token = var("HF_TOKEN").or_else(|| {
            std::fs::read_to_string(home.join("token"))
                .ok()
                .map(|t| t.trim().to_string())
                .filter(|t| !t.is_empty())
        });
        Self {
            cache_dir,
            endpoint: var("HF_ENDPOINT").unwrap_or_else(|| "https://huggingface.co".into()),
            offline: var("HF_HUB_OFFLINE").is_some_and(|v| {
                matches!(v.trim().to_ascii_lowercase().as_str(), "1" | "true" | "yes" | "on")
            }),
            token,
        }
    }
}

impl HubOptions {
    /// A local checkpoint folder for `model`: the folder itself when it is one, else the Hub repo
    /// of that id at `revision` (default `main`), from the cache or downloaded into it.
    pub fn resolve(&self, model: impl AsRef<Path>, revision: Option<&str>) -> Result<PathBuf> {
        resolve(model.as_ref(), revision, self)
    }
}

/// Tokenizer and config files fetched when the repo has them.
const OPTIONAL_FILES: [&str; 4] =
    ["tokenizer_config.json", "vocab.txt", "tokenizer.json", "special_tokens_map.json"];

/// A local checkpoint folder for `model`: the folder itself when it is one, else the Hub repo of
/// that id at `revision` (default `main`; junnyu's safetensors live on branches such as
/// `refs/pr/1`), downloaded into the cache unless the cache already holds a complete copy.
pub(crate) fn resolve(model: &Path, revision: Option<&str>, hub: &HubOptions) -> Result<PathBuf> {
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
    let revision = revision.unwrap_or("main");
    let repo = Repo::new(text, revision, hub)?;
    if let Some(dir) = repo.complete_snapshot() {
        return Ok(dir);
    }
    if hub.offline {
        return Err(
            repo.error("config.json", "not in the local cache, and offline mode is on (HF_HUB_OFFLINE)")
        );
    }
    repo.download()
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

/// One revision of one model repo, and its folder in the cache.
struct Repo<'a> {
    id: &'a str,
    revision: &'a str,
    hub: &'a HubOptions,
    folder: PathBuf,
}

impl<'a> Repo<'a> {
    fn new(id: &'a str, revision: &'a str, hub: &'a HubOptions) -> Result<Self> {
        let label = format!("{id}@{revision}");
        let invalid =
            |message: String| Error::Hub { repo: label.clone(), file: String::new(), message, source: None };
        validate_repo_id(id).map_err(invalid)?;
        validate_relative(revision).map_err(|m| invalid(format!("invalid revision: {m}")))?;
        let folder = hub.cache_dir.join(format!("models--{}", id.replace('/', "--")));
        Ok(Self { id, revision, hub, folder })
    }

    fn error(&self, file: &str, message: impl Into<String>) -> Error {
        Error::Hub {
            repo: format!("{}@{}", self.id, self.revision),
            file: file.into(),
            message: message.into(),
            source: None,
        }
    }

    /// The commit the cache has for this revision: the revision itself when it is a commit hash.
    fn cached_commit(&self) -> Option<String> {
        if is_commit_hash(self.revision) {
            return Some(self.revision.to_string());
        }
        let commit = std::fs::read_to_string(self.folder.join("refs").join(self.revision)).ok()?;
        let commit = commit.trim();
        is_commit_hash(commit).then(|| commit.to_string())
    }

    /// The snapshot folder when the cache has a config, weights and a vocabulary for this revision.
    fn complete_snapshot(&self) -> Option<PathBuf> {
        let dir = self.folder.join("snapshots").join(self.cached_commit()?);
        let has = |f: &str| dir.join(f).is_file();
        let has_weights = has("model.safetensors") || has("pytorch_model.bin") || shards_complete(&dir);
        let has_vocab = has("vocab.txt") || has("tokenizer.json");
        (has("config.json") && has_weights && has_vocab).then_some(dir)
    }

    fn download(&self) -> Result<PathBuf> {
        let client = Client::new(self.hub);
        let config = self
            .fetch(&client, "config.json")?
            .ok_or_else(|| self.error("config.json", "not found on the Hub (404)"))?;
        let dir = config.parent().map(Path::to_path_buf).unwrap_or_default();
        // Weights: safetensors first, then its shards, then the PyTorch pickle.
        let mut found_weights = false;
        for file in ["model.safetensors", "model.safetensors.index.json", "pytorch_model.bin"] {
            if let Some(path) = self.fetch(&client, file)? {
                if file.ends_with(".index.json") {
                    for shard in crate::checkpoint::shard_files(&path)? {
                        self.fetch(&client, &shard)?
                            .ok_or_else(|| self.error(&shard, "not found on the Hub (404)"))?;
                    }
                }
                found_weights = true;
                break;
            }
        }
        if !found_weights {
            return Err(self.error(
                "model.safetensors",
                "no model.safetensors, shard index or pytorch_model.bin in this revision \
                 (junnyu's checkpoints keep safetensors on branches such as refs/pr/1)",
            ));
        }
        for file in OPTIONAL_FILES {
            self.fetch(&client, file)?;
        }
        Ok(dir)
    }

    /// Fetches one file into the cache and returns its snapshot path; `None` when the server has
    /// no such file (404).
    fn fetch(&self, client: &Client, file: &str) -> Result<Option<PathBuf>> {
        validate_relative(file).map_err(|m| self.error(file, format!("invalid file name: {m}")))?;
        let url = format!(
            "{}/{}/resolve/{}/{}",
            self.hub.endpoint.trim_end_matches('/'),
            self.id,
            self.revision.replace('/', "%2F"),
            file
        );
        let Some(response) = client.get(&url).map_err(|e| self.transport_error(file, e))? else {
            return Ok(None);
        };
        let commit = response.commit.trim();
        if !is_commit_hash(commit) {
            return Err(self.error(file, format!("the server sent an invalid X-Repo-Commit {commit:?}")));
        }
        let etag = response.etag.trim().trim_start_matches("W/").trim_matches('"');
        validate_component(etag)
            .map_err(|m| self.error(file, format!("the server sent an invalid ETag: {m}")))?;

        let io = |path: &Path, e: std::io::Error| Error::io(path, e);
        let blobs = self.folder.join("blobs");
        std::fs::create_dir_all(&blobs).map_err(|e| io(&blobs, e))?;
        let blob = blobs.join(etag);
        if !blob.is_file() {
            let partial = blobs.join(format!("{etag}.{}.incomplete", std::process::id()));
            let mut out = std::fs::File::create(&partial).map_err(|e| io(&partial, e))?;
            let mut body = response.body;
            std::io::copy(&mut body, &mut out).map_err(|e| self.transport_error(file, Box::new(e)))?;
            std::fs::rename(&partial, &blob).map_err(|e| io(&blob, e))?;
        }
        let snapshot = self.folder.join("snapshots").join(commit);
        let pointer = snapshot.join(file);
        let parent = pointer.parent().unwrap_or(&snapshot);
        std::fs::create_dir_all(parent).map_err(|e| io(parent, e))?;
        link(&blob, &pointer, file).map_err(|e| io(&pointer, e))?;
        if !is_commit_hash(self.revision) {
            let reference = self.folder.join("refs").join(self.revision);
            let parent = reference.parent().unwrap_or(&self.folder);
            std::fs::create_dir_all(parent).map_err(|e| io(parent, e))?;
            std::fs::write(&reference, commit).map_err(|e| io(&reference, e))?;
        }
        Ok(Some(pointer))
    }

    fn transport_error(&self, file: &str, source: BoxError) -> Error {
        Error::Hub {
            repo: format!("{}@{}", self.id, self.revision),
            file: file.into(),
            message: format!("request to {} failed", self.hub.endpoint),
            source: Some(source),
        }
    }
}

/// `pointer` becomes a relative symlink to `blob`, as huggingface_hub lays out snapshots (a copy
/// where symlinks are unavailable).
fn link(blob: &Path, pointer: &Path, file: &str) -> std::io::Result<()> {
    if pointer.symlink_metadata().is_ok() {
        std::fs::remove_file(pointer)?;
    }
    #[cfg(unix)]
    {
        // snapshots/{commit}/{file} -> ../../blobs/{etag}, one more `..` per folder in `file`.
        let depth = file.split('/').count() + 1;
        let mut target = PathBuf::new();
        for _ in 0..depth {
            target.push("..");
        }
        target.push("blobs");
        target.push(blob.file_name().unwrap_or_default());
        std::os::unix::fs::symlink(target, pointer)
    }
    #[cfg(not(unix))]
    {
        let _ = file;
        std::fs::copy(blob, pointer).map(|_| ())
    }
}

/// What the server said about one file.
struct Fetched {
    commit: String,
    etag: String,
    body: Box<dyn Read + Send>,
}

struct Client {
    /// Follows no redirect, so the Hub's own headers are read before a CDN answers.
    first: ureq::Agent,
    follow: ureq::Agent,
    token: Option<String>,
}

impl Client {
    fn new(hub: &HubOptions) -> Self {
        let agent = |redirects: u32| {
            ureq::Agent::config_builder()
                .max_redirects(redirects)
                .max_redirects_will_error(false)
                .http_status_as_error(false)
                .timeout_connect(Some(Duration::from_secs(30)))
                .timeout_per_read(Some(Duration::from_secs(120)))
                .user_agent(concat!("roformer-rs/", env!("CARGO_PKG_VERSION")))
                .build()
                .new_agent()
        };
        Self { first: agent(0), follow: agent(10), token: hub.token.clone() }
    }

    fn call(
        &self,
        agent: &ureq::Agent,
        url: &str,
    ) -> std::result::Result<ureq::http::Response<ureq::Body>, BoxError> {
        let mut request = agent.get(url);
        if let Some(token) = &self.token {
            request = request.header("Authorization", format!("Bearer {token}"));
        }
        Ok(request.call()?)
    }

    /// The file at `url`, or `None` on 404.
    fn get(&self, url: &str) -> std::result::Result<Option<Fetched>, BoxError> {
        let response = self.call(&self.first, url)?;
        let status = response.status();
        if status == 404 {
            return Ok(None);
        }
        let header = |name: &str| -> std::result::Result<String, BoxError> {
            let value =
                response.headers().get(name).ok_or_else(|| format!("the answer has no {name} header"))?;
            Ok(value.to_str().map_err(|_| format!("the {name} header is not text"))?.to_string())
        };
        let commit = header("x-repo-commit")?;
        let etag = header("x-linked-etag").or_else(|_| header("etag"))?;
        let body: Box<dyn Read + Send> = if status.is_redirection() {
            let location = header("location")?;
            let target = if location.starts_with("http://") || location.starts_with("https://") {
                location
            } else {
                // A relative redirect stays on the same server.
                let origin_end =
                    url.find("://").map(|i| i + 3).and_then(|s| url[s..].find('/').map(|j| s + j));
                format!("{}{}", &url[..origin_end.unwrap_or(url.len())], location)
            };
            let response = self.call(&self.follow, &target)?;
            if !response.status().is_success() {
                return Err(format!("{target} answered {}", response.status()).into());
            }
            Box::new(response.into_body().into_reader())
        } else if status.is_success() {
            Box::new(response.into_body().into_reader())
        } else {
            return Err(format!("the server answered {status}").into());
        };
        Ok(Some(Fetched { commit, etag, body }))
    }
}

fn shards_complete(dir: &Path) -> bool {
    crate::checkpoint::shard_files(&dir.join("model.safetensors.index.json"))
        .is_ok_and(|names| names.iter().all(|n| dir.join(n).exists()))
}

fn is_commit_hash(s: &str) -> bool {
    s.len() == 40 && s.bytes().all(|b| b.is_ascii_hexdigit())
}

/// `org/name` or `name`: letters, digits, `.`, `_`, `-`; no `..` or `--`; at most 96 per part.
fn validate_repo_id(id: &str) -> std::result::Result<(), String> {
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

/// One path component: letters, digits, `.`, `_`, `-`, not starting with `.`.
fn validate_component(part: &str) -> std::result::Result<(), String> {
    let ok = !part.is_empty()
        && part.len() <= 128
        && !part.starts_with('.')
        && part.bytes().all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b));
    if ok {
        Ok(())
    } else {
        Err(format!("`{part}` is not a plain name (letters, digits, `.`, `_`, `-`, not starting with `.`)"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_that_could_leave_the_cache_are_refused() {
        for bad in ["../x", "a/../../b", "/etc/passwd", ".hidden", "a//b", "", "a\\b", "x\0y"] {
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
