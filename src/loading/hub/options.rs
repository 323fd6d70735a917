//! [`HubOptions`]: where and how checkpoints are fetched, with its defaults from the environment,
//! and the [`DownloadProgress`] it reports.

use std::path::PathBuf;
use std::sync::Arc;

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
    pub(super) progress: Option<ProgressFn>,
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
}
