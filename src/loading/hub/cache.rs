//! The Hugging Face cache layout (`models--{org}--{name}/{blobs,snapshots,refs}`, `.no_exist`,
//! `.locks`) and one repo revision in it: what the cache already holds, the download (of the files
//! `file_plan` names), and the typed errors failed requests become.

use std::fs::{File, OpenOptions};
use std::path::{Path, PathBuf};

use super::http::{Client, Failure, ATTEMPTS, FIRST_BACKOFF};
use super::options::{DownloadProgress, HubOptions};
use crate::error::{Error, HubErrorKind, Result};
use crate::loading::file_plan::{FilePlan, Missing};
use crate::loading::layout::{
    shard_names, validate_component, validate_relative, validate_repo_id, PYTORCH, PYTORCH_INDEX,
    SAFETENSORS, SAFETENSORS_INDEX,
};

/// One revision of one model repo, and its folder in the cache.
pub(super) struct Repo<'a> {
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
    pub(super) fn new(id: &'a str, revision: &'a str, hub: &'a HubOptions) -> Result<Self> {
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

    pub(super) fn error(
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
    pub(super) fn complete_snapshot(&self) -> Option<PathBuf> {
        let dir = self.folder.join("snapshots").join(self.cached_commit()?);
        let has = |f: &str| dir.join(f).is_file();
        let has_weights = has(SAFETENSORS)
            || has(PYTORCH)
            || shards_complete(&dir, SAFETENSORS_INDEX)
            || shards_complete(&dir, PYTORCH_INDEX);
        let has_vocab = has("vocab.txt") || has("tokenizer.json");
        (has("config.json") && has_weights && has_vocab).then_some(dir)
    }

    pub(super) fn download(&self) -> Result<PathBuf> {
        let client = Client::new(self.hub).map_err(|f| self.failure("config.json", f))?;
        // The config names the commit; every other file is fetched at that commit, so a branch
        // that moves meanwhile cannot mix two snapshots (transformers pins the same way).
        let config = self
            .fetch(&client, None, "config.json")?
            .ok_or_else(|| self.not_found("config.json", "not found in this revision"))?;
        let commit = config.commit.as_str();
        let mut plan = FilePlan::new();
        while let Some(ask) = plan.next() {
            let file = ask.file();
            let Some(cached) = self.fetch(&client, Some(commit), file)? else {
                match plan.missing(&ask) {
                    Some(gap @ Missing::Weights) => {
                        return Err(self.error(
                            gap.file(),
                            HubErrorKind::EntryNotFound,
                            Some(404),
                            format!(
                                "{gap} in this revision (junnyu's checkpoints keep safetensors on branches \
                                 such as refs/pr/1)"
                            ),
                        ))
                    }
                    Some(gap) => return Err(self.not_found(gap.file(), &gap.to_string())),
                    None => continue,
                }
            };
            plan.found(&ask, &cached.path, || read(&cached.path))?;
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

fn shards_complete(dir: &Path, index: &str) -> bool {
    let index = dir.join(index);
    read(&index)
        .and_then(|bytes| shard_names(&bytes, &index))
        .is_ok_and(|names| names.iter().all(|n| dir.join(n).is_file()))
}

/// A cached file's bytes (a shard index, modules.json), which the layout's parsers read.
fn read(path: &Path) -> Result<Vec<u8>> {
    std::fs::read(path).map_err(|e| Error::io(path, e))
}

pub(super) fn is_commit_hash(s: &str) -> bool {
    s.len() == 40 && s.bytes().all(|b| b.is_ascii_hexdigit())
}
