//! Checkpoints by Hugging Face Hub id, in the standard Hugging Face cache layout
//! (`models--{org}--{name}/{blobs,snapshots,refs}`), shared with Python's huggingface_hub.
//!
//! The client asks as huggingface_hub does: a `HEAD` on `{endpoint}/{repo}/resolve/{revision}/{file}`
//! that follows only relative redirects (a renamed repo), then reads `X-Repo-Commit`,
//! `X-Linked-Etag`/`ETag`, `X-Linked-Size`/`Content-Length` and, for large files, the `Location`
//! of the download host. The token goes to the endpoint's own origin only. A blob the cache holds
//! is never fetched again; a download goes to `blobs/{etag}.incomplete`, under the lock file
//! Python uses, and an interrupted one resumes with a `Range` request. Errors are typed by the
//! `X-Error-Code` the Hub sends (see [`HubErrorKind`]); 5xx, 429 and broken connections are
//! retried a bounded number of times.
//!
//! Every name that reaches the file system (repo id, revision, file name, ETag, commit, shard
//! names) is checked before any request or write: hf-hub (0.5 and 1.0) joins the server's `ETag`
//! and `X-Repo-Commit` headers into cache paths unchecked.

use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use crate::error::{BoxError, Error, HubErrorKind, Result};
use crate::loading::layout::{
    is_shard_index, shard_files, validate_component, validate_relative, PYTORCH, PYTORCH_INDEX, SAFETENSORS,
    SAFETENSORS_INDEX, WEIGHT_FILES,
};

/// How far a download has come, as [`HubOptions::with_progress`] reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct DownloadProgress {
    /// The repo id.
    pub repo: String,
    /// The file, relative to the repo.
    pub file: String,
    /// Bytes of the file on disk so far (a resumed download starts above zero).
    pub downloaded: u64,
    /// The file's size, when the server gave it.
    pub total: Option<u64>,
}

type ProgressFn = Arc<dyn Fn(&DownloadProgress) + Send + Sync>;

/// Where and how checkpoints are fetched from the Hugging Face Hub. The defaults come from the
/// environment, as Python's huggingface_hub reads it: `HF_HUB_CACHE` or `HF_HOME`, `HF_ENDPOINT`,
/// `HF_HUB_OFFLINE`, and `HF_TOKEN` or the token file that `huggingface-cli login` writes.
#[derive(Clone)]
#[non_exhaustive]
pub struct HubOptions {
    /// The cache folder (`…/huggingface/hub`).
    pub cache_dir: PathBuf,
    /// The server, `https://huggingface.co` by default.
    pub endpoint: String,
    /// Read the cache alone, without any request.
    pub offline: bool,
    /// Access token for private or gated repos, sent to the endpoint's origin only.
    pub token: Option<String>,
    progress: Option<ProgressFn>,
}

impl std::fmt::Debug for HubOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HubOptions")
            .field("cache_dir", &self.cache_dir)
            .field("endpoint", &self.endpoint)
            .field("offline", &self.offline)
            .field("token", &self.token.as_ref().map(|_| "<set>"))
            .field("progress", &self.progress.as_ref().map(|_| "<callback>"))
            .finish()
    }
}

impl PartialEq for HubOptions {
    fn eq(&self, other: &Self) -> bool {
        let same_progress = match (&self.progress, &other.progress) {
            (None, None) => true,
            (Some(a), Some(b)) => Arc::ptr_eq(a, b),
            _ => false,
        };
        self.cache_dir == other.cache_dir
            && self.endpoint == other.endpoint
            && self.offline == other.offline
            && self.token == other.token
            && same_progress
    }
}

impl Eq for HubOptions {}

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
            progress: None,
        }
    }

    /// Calls `progress` as each file downloads: when it starts, about every MiB, and when it is
    /// complete. The library prints nothing itself (it also logs each download at `info` level
    /// through the `log` crate); the examples draw a bar from this.
    pub fn with_progress(mut self, progress: impl Fn(&DownloadProgress) + Send + Sync + 'static) -> Self {
        self.progress = Some(Arc::new(progress));
        self
    }

    /// A local checkpoint folder for `model`: the folder itself when it is one, else the Hub repo
    /// of that id at `revision` (default `main`), from the cache or downloaded into it.
    pub fn resolve(&self, model: impl AsRef<Path>, revision: Option<&str>) -> Result<PathBuf> {
        resolve(model.as_ref(), revision, self)
    }
}

/// Tokenizer and config files fetched when the repo has them, sentence-transformers' included.
const OPTIONAL_FILES: [&str; 7] = [
    "tokenizer_config.json",
    "vocab.txt",
    "tokenizer.json",
    "special_tokens_map.json",
    "modules.json",
    "sentence_bert_config.json",
    "config_sentence_transformers.json",
];

/// The files of a sentence-transformers module in its subfolder (a Pooling's config, a Dense's
/// config and weights), fetched when the repo has them.
const MODULE_FILES: [&str; 3] = ["config.json", SAFETENSORS, PYTORCH];

/// Tries per request: a 5xx, a 429 or a broken connection is retried after 0.5 s, 1 s, 2 s.
const ATTEMPTS: u32 = 4;
const FIRST_BACKOFF: Duration = Duration::from_millis(500);
/// Relative redirects (renamed repos) followed per request.
const MAX_REDIRECTS: usize = 10;
/// Bytes between two progress reports.
const PROGRESS_STEP: u64 = 1 << 20;

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
        return Err(repo.error(
            "config.json",
            HubErrorKind::NotCached,
            None,
            "not in the local cache, and offline mode is on (HF_HUB_OFFLINE)",
        ));
    }
    repo.download()
}

/// The subfolders a sentence-transformers `modules.json` names (the Transformer's is the root).
fn module_folders(path: &Path) -> Result<Vec<String>> {
    let list = crate::loading::json::read_json_if_exists(path)?.unwrap_or_default();
    Ok(list
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|m| m.get("path")?.as_str())
        .filter(|p| !p.is_empty())
        .map(str::to_string)
        .collect())
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

/// A file in the snapshot of a commit.
struct Cached {
    path: PathBuf,
    commit: String,
}

impl<'a> Repo<'a> {
    fn new(id: &'a str, revision: &'a str, hub: &'a HubOptions) -> Result<Self> {
        let invalid = |message: String| Error::Hub {
            repo: format!("{id}@{revision}"),
            file: String::new(),
            kind: HubErrorKind::InvalidInput,
            status: None,
            message,
            source: None,
        };
        validate_repo_id(id).map_err(invalid)?;
        validate_relative(revision).map_err(|m| invalid(format!("invalid revision: {m}")))?;
        let folder = hub.cache_dir.join(repo_folder(id));
        Ok(Self { id, revision, hub, folder })
    }

    fn error(
        &self,
        file: &str,
        kind: HubErrorKind,
        status: Option<u16>,
        message: impl Into<String>,
    ) -> Error {
        Error::Hub {
            repo: format!("{}@{}", self.id, self.revision),
            file: file.into(),
            kind,
            status,
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
        let has_weights = has(SAFETENSORS)
            || has(PYTORCH)
            || shards_complete(&dir, SAFETENSORS_INDEX)
            || shards_complete(&dir, PYTORCH_INDEX);
        let has_vocab = has("vocab.txt") || has("tokenizer.json");
        (has("config.json") && has_weights && has_vocab).then_some(dir)
    }

    fn download(&self) -> Result<PathBuf> {
        let client = Client::new(self.hub).map_err(|f| self.failure("config.json", f))?;
        // The config names the commit; every other file is fetched at that commit, so a branch
        // that moves meanwhile cannot mix two snapshots (transformers pins the same way).
        let config = self
            .fetch(&client, None, "config.json")?
            .ok_or_else(|| self.not_found("config.json", "not found in this revision"))?;
        let commit = config.commit.as_str();
        let mut found_weights = false;
        for file in WEIGHT_FILES {
            if let Some(weights) = self.fetch(&client, Some(commit), file)? {
                if is_shard_index(file) {
                    for shard in shard_files(&weights.path)? {
                        self.fetch(&client, Some(commit), &shard)?.ok_or_else(|| {
                            self.not_found(&shard, &format!("listed in {file} but not found"))
                        })?;
                    }
                }
                found_weights = true;
                break;
            }
        }
        if !found_weights {
            return Err(self.error(
                SAFETENSORS,
                HubErrorKind::EntryNotFound,
                Some(404),
                "no model.safetensors, shard index, pytorch_model.bin or its index in this revision \
                 (junnyu's checkpoints keep safetensors on branches such as refs/pr/1)",
            ));
        }
        let mut modules = None;
        for file in OPTIONAL_FILES {
            let cached = self.fetch(&client, Some(commit), file)?;
            if file == "modules.json" {
                modules = cached;
            }
        }
        if let Some(modules) = modules {
            for sub in module_folders(&modules.path)? {
                for file in MODULE_FILES {
                    self.fetch(&client, Some(commit), &format!("{sub}/{file}"))?;
                }
            }
        }
        Ok(self.folder.join("snapshots").join(commit))
    }

    fn not_found(&self, file: &str, what: &str) -> Error {
        self.error(file, HubErrorKind::EntryNotFound, Some(404), format!("{what} (HTTP 404)"))
    }

    /// Fetches one file into the cache and returns its snapshot path; `None` when the revision
    /// has no such file. With a known `commit`, a file the cache holds (or knows to be absent)
    /// costs no request.
    fn fetch(&self, client: &Client, commit: Option<&str>, file: &str) -> Result<Option<Cached>> {
        validate_relative(file).map_err(|m| {
            self.error(file, HubErrorKind::InvalidInput, None, format!("invalid file name: {m}"))
        })?;
        if let Some(commit) = commit {
            let pointer = self.folder.join("snapshots").join(commit).join(file);
            if pointer.is_file() {
                return Ok(Some(Cached { path: pointer, commit: commit.into() }));
            }
            if self.folder.join(".no_exist").join(commit).join(file).is_file() {
                return Ok(None);
            }
        }
        let url = format!(
            "{}/{}/resolve/{}/{}",
            self.hub.endpoint.trim_end_matches('/'),
            self.id,
            commit.unwrap_or(self.revision).replace('/', "%2F"),
            file
        );
        let head = match client.head(&url) {
            Ok(head) => head,
            Err(Failure::Status { status, code, .. })
                if code.as_deref() == Some("EntryNotFound") || (status == 404 && code.is_none()) =>
            {
                // As huggingface_hub does, remember the absence for this commit.
                if let Some(commit) = client.last_commit.take().filter(|c| is_commit_hash(c)) {
                    let marker = self.folder.join(".no_exist").join(&commit).join(file);
                    if let Some(parent) = marker.parent() {
                        let _ = std::fs::create_dir_all(parent).and_then(|_| File::create(&marker));
                    }
                    self.write_ref(commit.as_str())?;
                }
                return Ok(None);
            }
            Err(failure) => return Err(self.failure(file, failure)),
        };
        let invalid =
            |message: String| self.error(file, HubErrorKind::InvalidResponse, Some(head.status), message);
        let commit = head.commit.clone().ok_or_else(|| {
            invalid(format!(
                "the answer from {url} has no X-Repo-Commit header (is the endpoint a Hugging Face Hub?)"
            ))
        })?;
        if !is_commit_hash(&commit) {
            return Err(invalid(format!("the server sent an invalid X-Repo-Commit {commit:?}")));
        }
        let etag =
            head.etag.clone().ok_or_else(|| invalid(format!("the answer from {url} has no ETag header")))?;
        validate_component(&etag).map_err(|m| invalid(format!("the server sent an invalid ETag: {m}")))?;

        let io = |path: &Path, e: std::io::Error| Error::io(path, e);
        let pointer = self.folder.join("snapshots").join(&commit).join(file);
        let blob = self.folder.join("blobs").join(&etag);
        if !pointer.is_file() {
            if !blob.is_file() {
                // A large file is served by another host (`Location`); a small one by this URL.
                let source = match &head.location {
                    Some(location) if (300..400).contains(&head.status) => location.clone(),
                    None if (300..400).contains(&head.status) => {
                        return Err(invalid(format!("{url} redirects without a Location header")));
                    }
                    _ => head.url.clone(),
                };
                self.download_blob(client, file, &source, &etag, head.size)?;
            }
            let parent = pointer.parent().unwrap_or(&self.folder);
            std::fs::create_dir_all(parent).map_err(|e| io(parent, e))?;
            link(&blob, &pointer, file).map_err(|e| io(&pointer, e))?;
        }
        self.write_ref(&commit)?;
        Ok(Some(Cached { path: pointer, commit }))
    }

    /// Records the commit of a branch, tag or PR ref, as `refs/{revision}`.
    fn write_ref(&self, commit: &str) -> Result<()> {
        if is_commit_hash(self.revision) {
            return Ok(());
        }
        let reference = self.folder.join("refs").join(self.revision);
        if std::fs::read_to_string(&reference).is_ok_and(|c| c.trim() == commit) {
            return Ok(());
        }
        let parent = reference.parent().unwrap_or(&self.folder);
        std::fs::create_dir_all(parent).map_err(|e| Error::io(parent, e))?;
        std::fs::write(&reference, commit).map_err(|e| Error::io(&reference, e))
    }

    /// Downloads `url` into `blobs/{etag}`: through `blobs/{etag}.incomplete`, resumed where an
    /// earlier try or run stopped, under `.locks/{repo}/{etag}.lock` (Python's lock file).
    fn download_blob(
        &self,
        client: &Client,
        file: &str,
        url: &str,
        etag: &str,
        size: Option<u64>,
    ) -> Result<()> {
        let io = |path: &Path, e: std::io::Error| Error::io(path, e);
        let blobs = self.folder.join("blobs");
        std::fs::create_dir_all(&blobs).map_err(|e| io(&blobs, e))?;
        let locks = self.hub.cache_dir.join(".locks").join(repo_folder(self.id));
        std::fs::create_dir_all(&locks).map_err(|e| io(&locks, e))?;
        let lock_path = locks.join(format!("{etag}.lock"));
        let lock = OpenOptions::new().create(true).truncate(false).write(true).open(&lock_path);
        let lock = lock.map_err(|e| io(&lock_path, e))?;
        lock.lock().map_err(|e| io(&lock_path, e))?;
        let blob = blobs.join(etag);
        if blob.is_file() {
            return Ok(()); // another process finished it while this one waited
        }
        let partial = blobs.join(format!("{etag}.incomplete"));
        log::info!("downloading {}@{}/{file} ({})", self.id, self.revision, describe_size(size));
        let report = |downloaded: u64| {
            if let Some(progress) = &self.hub.progress {
                progress(&DownloadProgress {
                    repo: self.id.into(),
                    file: file.into(),
                    downloaded,
                    total: size,
                });
            }
        };
        let mut delay = FIRST_BACKOFF;
        for attempt in 1..=ATTEMPTS {
            match client.download(url, &partial, size, &report) {
                Ok(()) => break,
                Err(f) if f.is_transient() && attempt < ATTEMPTS => {
                    log::warn!("{}@{}/{file}: {f}; retrying in {delay:?}", self.id, self.revision);
                    std::thread::sleep(delay);
                    delay *= 2;
                }
                Err(f) => return Err(self.failure(file, f.after(attempt))),
            }
        }
        std::fs::rename(&partial, &blob).map_err(|e| io(&blob, e))?;
        drop(lock);
        Ok(())
    }

    /// The typed error for a failed request, as huggingface_hub's `hf_raise_for_status` names it.
    fn failure(&self, file: &str, failure: Failure) -> Error {
        let (kind, status, message, source) = match failure {
            Failure::Status { status, code, message: server, attempts, .. } => {
                let said = server.map(|m| format!(": {m}")).unwrap_or_default();
                let page = format!("{}/{}", self.hub.endpoint.trim_end_matches('/'), self.id);
                let invalid_token = server_said(&said, "Invalid credentials");
                let (kind, text) = match code.as_deref() {
                    Some("GatedRepo") => (
                        HubErrorKind::GatedRepo,
                        format!(
                            "the repo is gated (HTTP {status}{said}); {}, and accept its terms on {page}",
                            if self.hub.token.is_some() {
                                "the token given must belong to an account that has access"
                            } else {
                                "no token was given: set HF_TOKEN, run `huggingface-cli login` or pass a token"
                            }
                        ),
                    ),
                    Some("RepoNotFound") => (HubErrorKind::RepositoryNotFound, repo_not_found(status, &said)),
                    None if status == 401 && !invalid_token => {
                        (HubErrorKind::RepositoryNotFound, repo_not_found(status, &said))
                    }
                    Some("RevisionNotFound") => (
                        HubErrorKind::RevisionNotFound,
                        format!(
                            "revision `{}` not found (HTTP {status}{said}); give a branch, tag, commit or refs/pr/N",
                            self.revision
                        ),
                    ),
                    Some("EntryNotFound") => {
                        (HubErrorKind::EntryNotFound, format!("not found in this revision (HTTP {status}{said})"))
                    }
                    _ if status >= 500 || status == 429 => (
                        HubErrorKind::ServerError,
                        format!("the server failed (HTTP {status}{said}) on {attempts} tries; try again later"),
                    ),
                    _ if status == 401 => (
                        HubErrorKind::Http,
                        format!("the token was refused (HTTP 401{said}); check HF_TOKEN or the token passed"),
                    ),
                    _ => (HubErrorKind::Http, format!("the server refused the request (HTTP {status}{said})")),
                };
                (kind, Some(status), text, None)
            }
            Failure::Transport { url, source, attempts } => (
                HubErrorKind::Connection,
                None,
                format!("request to {url} failed on {attempts} tries"),
                Some(source),
            ),
            Failure::Invalid { status, message } => (HubErrorKind::InvalidResponse, status, message, None),
            Failure::Local { path, source } => return Error::io(path, source),
        };
        Error::Hub {
            repo: format!("{}@{}", self.id, self.revision),
            file: file.into(),
            kind,
            status,
            message,
            source,
        }
    }
}

fn repo_not_found(status: u16, said: &str) -> String {
    format!(
        "repository not found (HTTP {status}{said}); check the id, and for a private or gated repo give a \
         token (HF_TOKEN, `huggingface-cli login` or a token option) that can read it"
    )
}

fn server_said(said: &str, what: &str) -> bool {
    said.to_ascii_lowercase().contains(&what.to_ascii_lowercase())
}

fn describe_size(size: Option<u64>) -> String {
    match size {
        Some(n) if n >= 1 << 20 => format!("{:.1} MiB", n as f64 / (1u64 << 20) as f64),
        Some(n) => format!("{n} bytes"),
        None => "size unknown".into(),
    }
}

/// `models--{org}--{name}`.
fn repo_folder(id: &str) -> String {
    format!("models--{}", id.replace('/', "--"))
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

/// Why a request gave no usable answer, before it is named for a repo and file.
#[derive(Debug)]
enum Failure {
    /// The server answered an error status.
    Status {
        status: u16,
        /// `X-Error-Code`: `RepoNotFound`, `GatedRepo`, `RevisionNotFound`, `EntryNotFound`.
        code: Option<String>,
        /// `X-Error-Message`, cleaned.
        message: Option<String>,
        attempts: u32,
    },
    /// No answer, or a body cut short.
    Transport { url: String, source: BoxError, attempts: u32 },
    /// An answer this client refuses.
    Invalid { status: Option<u16>, message: String },
    /// The partial file could not be written.
    Local { path: PathBuf, source: std::io::Error },
}

impl Failure {
    fn is_transient(&self) -> bool {
        match self {
            Failure::Status { status, .. } => *status >= 500 || *status == 429,
            Failure::Transport { .. } => true,
            Failure::Invalid { .. } | Failure::Local { .. } => false,
        }
    }

    fn after(mut self, tries: u32) -> Self {
        if let Failure::Status { attempts, .. } | Failure::Transport { attempts, .. } = &mut self {
            *attempts = tries;
        }
        self
    }
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Failure::Status { status, .. } => write!(f, "the server answered HTTP {status}"),
            Failure::Transport { url, source, .. } => write!(f, "request to {url} failed: {source}"),
            Failure::Invalid { message, .. } => write!(f, "{message}"),
            Failure::Local { path, source } => write!(f, "{}: {source}", path.display()),
        }
    }
}

/// What a `HEAD` on a resolve URL said, after relative redirects.
struct Head {
    status: u16,
    /// The URL that gave this answer.
    url: String,
    commit: Option<String>,
    etag: Option<String>,
    size: Option<u64>,
    /// An absolute redirect: where the file itself is downloaded from.
    location: Option<String>,
}

/// `(scheme, host, port)`, lowercased, with the scheme's default port.
type Origin = (String, String, u16);

fn origin(url: &str) -> Option<Origin> {
    let uri: ureq::http::Uri = url.parse().ok()?;
    let scheme = uri.scheme_str()?.to_ascii_lowercase();
    let port = uri.port_u16().unwrap_or(if scheme == "https" { 443 } else { 80 });
    Some((scheme, uri.host()?.to_ascii_lowercase(), port))
}

struct Client {
    /// Follows no redirect: the Hub's own headers are read before a download host answers.
    head_agent: ureq::Agent,
    /// Follows redirects of the download host; ureq drops `Authorization` on every redirect.
    get_agent: ureq::Agent,
    token: Option<String>,
    /// The token goes to this origin alone (huggingface_hub drops it for another host).
    endpoint: Origin,
    /// `X-Repo-Commit` of the last error answer (a 404 names the commit it looked in).
    last_commit: std::cell::RefCell<Option<String>>,
}

impl Client {
    fn new(hub: &HubOptions) -> std::result::Result<Self, Failure> {
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
        let endpoint = origin(&hub.endpoint).ok_or_else(|| Failure::Invalid {
            status: None,
            message: format!("the endpoint `{}` is not an http(s) URL", hub.endpoint),
        })?;
        Ok(Self {
            head_agent: agent(0),
            get_agent: agent(10),
            token: hub.token.clone(),
            endpoint,
            last_commit: Default::default(),
        })
    }

    /// The request, with the token when `url` is on the endpoint's origin.
    fn authorize<B>(&self, request: ureq::RequestBuilder<B>, url: &str) -> ureq::RequestBuilder<B> {
        match &self.token {
            Some(token) if origin(url).as_ref() == Some(&self.endpoint) => {
                request.header("Authorization", format!("Bearer {token}"))
            }
            _ => request,
        }
    }

    /// `HEAD url`, retried on 5xx, 429 and connection errors, following relative redirects.
    fn head(&self, url: &str) -> std::result::Result<Head, Failure> {
        let mut url = url.to_string();
        for _ in 0..=MAX_REDIRECTS {
            let head = retrying(|| self.head_once(&url))?;
            match &head.location {
                Some(location) if (300..400).contains(&head.status) && is_relative(location) => {
                    url = join(&url, location);
                }
                _ => return Ok(head),
            }
        }
        Err(Failure::Invalid { status: None, message: format!("{url}: more than {MAX_REDIRECTS} redirects") })
    }

    fn head_once(&self, url: &str) -> std::result::Result<Head, Failure> {
        let response = self
            .authorize(self.head_agent.head(url), url)
            // The size of the file itself, not of a compressed answer (as huggingface_hub asks).
            .header("Accept-Encoding", "identity")
            .call()
            .map_err(|e| Failure::Transport { url: url.into(), source: Box::new(e), attempts: 1 })?;
        let status = response.status().as_u16();
        let header = |name: &str| {
            response.headers().get(name).and_then(|v| v.to_str().ok()).map(|v| v.trim().to_string())
        };
        let commit = header("x-repo-commit");
        if status >= 400 {
            *self.last_commit.borrow_mut() = commit;
            return Err(Failure::Status {
                status,
                code: header("x-error-code"),
                message: header("x-error-message").map(|m| clean(&m)),
                attempts: 1,
            });
        }
        let etag = header("x-linked-etag").or_else(|| header("etag")).map(|e| {
            let e = e.strip_prefix("W/").unwrap_or(&e);
            e.trim_matches('"').to_string()
        });
        let size = header("x-linked-size").or_else(|| header("content-length")).and_then(|s| s.parse().ok());
        let location = match header("location") {
            Some(l) if !is_relative(&l) && !l.starts_with("http://") && !l.starts_with("https://") => {
                // `//host/path` keeps the scheme.
                Some(format!("{}:{l}", url.split(':').next().unwrap_or("https")))
            }
            other => other,
        };
        Ok(Head { status, url: url.into(), commit, etag, size, location })
    }

    /// `GET url` into `partial`, from the bytes it already holds (`Range`), reporting progress.
    fn download(
        &self,
        url: &str,
        partial: &Path,
        size: Option<u64>,
        report: &dyn Fn(u64),
    ) -> std::result::Result<(), Failure> {
        let io = |source: std::io::Error| Failure::Local { path: partial.to_path_buf(), source };
        let transport = |e: BoxError| Failure::Transport { url: url.into(), source: e, attempts: 1 };
        let mut have = partial.metadata().map(|m| m.len()).unwrap_or(0);
        if size.is_some_and(|size| have > size) {
            have = 0;
        }
        if have > 0 && size == Some(have) {
            return Ok(());
        }
        let mut request = self.authorize(self.get_agent.get(url), url).header("Accept-Encoding", "identity");
        if have > 0 {
            request = request.header("Range", format!("bytes={have}-"));
        }
        let response = request.call().map_err(|e| transport(Box::new(e)))?;
        let status = response.status().as_u16();
        let header = |name: &str| {
            response.headers().get(name).and_then(|v| v.to_str().ok()).map(|v| v.trim().to_string())
        };
        let resumed = status == 206
            && header("content-range")
                .and_then(|r| r.strip_prefix("bytes ")?.split('-').next()?.parse::<u64>().ok())
                == Some(have);
        match status {
            206 if resumed => {}
            200 | 206 => have = 0, // the whole file, or a range other than asked: start over
            416 => {
                // The range no longer fits the file: start over on the next try.
                File::create(partial).map_err(io)?;
                return Err(Failure::Transport {
                    url: url.into(),
                    source: "the server refused to resume (HTTP 416); starting over".into(),
                    attempts: 1,
                });
            }
            _ => {
                return Err(Failure::Status {
                    status,
                    code: header("x-error-code"),
                    message: header("x-error-message").map(|m| clean(&m)),
                    attempts: 1,
                })
            }
        }
        let mut out =
            if have > 0 { OpenOptions::new().append(true).open(partial) } else { File::create(partial) }
                .map_err(io)?;
        report(have);
        let mut body = response.into_body().into_reader();
        let mut buffer = vec![0u8; 64 << 10];
        let mut last_report = have;
        loop {
            let n = match body.read(&mut buffer) {
                Ok(0) => break,
                Ok(n) => n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    out.flush().map_err(io)?;
                    return Err(transport(Box::new(e)));
                }
            };
            out.write_all(&buffer[..n]).map_err(io)?;
            have += n as u64;
            if have - last_report >= PROGRESS_STEP {
                report(have);
                last_report = have;
            }
        }
        out.flush().map_err(io)?;
        match size {
            Some(size) if have < size => {
                Err(transport(format!("the download ended after {have} of {size} bytes").into()))
            }
            Some(size) if have > size => {
                File::create(partial).map_err(io)?;
                Err(Failure::Invalid {
                    status: Some(status),
                    message: format!("{url} sent {have} bytes, more than the {size} announced"),
                })
            }
            _ => {
                report(have);
                Ok(())
            }
        }
    }
}

/// Calls `once` until it succeeds, fails for good, or has been tried [`ATTEMPTS`] times.
fn retrying<T>(mut once: impl FnMut() -> std::result::Result<T, Failure>) -> std::result::Result<T, Failure> {
    let mut delay = FIRST_BACKOFF;
    let mut attempt = 1;
    loop {
        match once() {
            Err(f) if f.is_transient() && attempt < ATTEMPTS => {
                log::warn!("{f}; retrying in {delay:?}");
                std::thread::sleep(delay);
                delay *= 2;
                attempt += 1;
            }
            other => return other.map_err(|f| f.after(attempt)),
        }
    }
}

/// A `Location` on the same server: no scheme and no host.
fn is_relative(location: &str) -> bool {
    !location.contains("://") && !location.starts_with("//")
}

/// `location` (relative) resolved against `url`.
fn join(url: &str, location: &str) -> String {
    let origin_end = url.find("://").map(|i| i + 3).and_then(|s| url[s..].find('/').map(|j| s + j));
    let origin_end = origin_end.unwrap_or(url.len());
    if location.starts_with('/') {
        format!("{}{location}", &url[..origin_end])
    } else {
        let path = url[origin_end..].split(['?', '#']).next().unwrap_or("");
        let dir = &path[..path.rfind('/').map(|i| i + 1).unwrap_or(0)];
        format!("{}{dir}{location}", &url[..origin_end])
    }
}

/// A server message fit for an error: printable, one line, at most 300 characters.
fn clean(message: &str) -> String {
    message.chars().filter(|c| !c.is_control()).take(300).collect()
}

fn shards_complete(dir: &Path, index: &str) -> bool {
    shard_files(&dir.join(index)).is_ok_and(|names| names.iter().all(|n| dir.join(n).is_file()))
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

#[cfg(test)]
mod tests {
    use super::*;

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

    #[test]
    fn redirects_and_origins() {
        let url = "https://hf.co/a/b/resolve/main/config.json";
        assert_eq!(join(url, "/c/d/resolve/main/config.json"), "https://hf.co/c/d/resolve/main/config.json");
        assert_eq!(join(url, "x.json"), "https://hf.co/a/b/resolve/main/x.json");
        assert!(is_relative("/c/d") && !is_relative("https://cdn/x") && !is_relative("//cdn/x"));
        assert_eq!(origin("https://HF.co/x"), origin("https://hf.co:443/y"));
        assert_ne!(origin("http://127.0.0.1:1/x"), origin("http://127.0.0.1:2/x"));
        assert_ne!(origin("https://hf.co/x"), origin("https://cdn.hf.co/x"));
        assert_eq!(clean("a\r\nb"), "ab");
    }
}
