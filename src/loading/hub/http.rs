//! The HTTP side of the Hub client: `HEAD` and ranged `GET` requests, retried on 5xx, 429 and
//! broken connections, following relative redirects, with the token sent to the endpoint's own
//! origin only. A [`Failure`] says why a request gave no usable answer; the cache names it.

use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::options::HubOptions;
use crate::error::BoxError;

/// Tries per request: a 5xx, a 429 or a broken connection is retried after 0.5 s, 1 s, 2 s.
pub(super) const ATTEMPTS: u32 = 4;
pub(super) const FIRST_BACKOFF: Duration = Duration::from_millis(500);
/// Relative redirects (renamed repos) followed per request.
const MAX_REDIRECTS: usize = 10;
/// Bytes between two progress reports.
const PROGRESS_STEP: u64 = 1 << 20;

/// Why a request gave no usable answer, before it is named for a repo and file.
#[derive(Debug)]
pub(super) enum Failure {
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
    pub(super) fn is_transient(&self) -> bool {
        match self {
            Failure::Status { status, .. } => *status >= 500 || *status == 429,
            Failure::Transport { .. } => true,
            Failure::Invalid { .. } | Failure::Local { .. } => false,
        }
    }

    pub(super) fn after(mut self, tries: u32) -> Self {
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
pub(super) struct Head {
    pub(super) status: u16,
    /// The URL that gave this answer.
    pub(super) url: String,
    pub(super) commit: Option<String>,
    pub(super) etag: Option<String>,
    pub(super) size: Option<u64>,
    /// An absolute redirect: where the file itself is downloaded from.
    pub(super) location: Option<String>,
}

/// `(scheme, host, port)`, lowercased, with the scheme's default port.
type Origin = (String, String, u16);

fn origin(url: &str) -> Option<Origin> {
    let uri: ureq::http::Uri = url.parse().ok()?;
    let scheme = uri.scheme_str()?.to_ascii_lowercase();
    let port = uri.port_u16().unwrap_or(if scheme == "https" { 443 } else { 80 });
    Some((scheme, uri.host()?.to_ascii_lowercase(), port))
}

pub(super) struct Client {
    /// Follows no redirect: the Hub's own headers are read before a download host answers.
    head_agent: ureq::Agent,
    /// Follows redirects of the download host; ureq drops `Authorization` on every redirect.
    get_agent: ureq::Agent,
    token: Option<String>,
    /// The token goes to this origin alone (huggingface_hub drops it for another host).
    endpoint: Origin,
    /// `X-Repo-Commit` of the last error answer (a 404 names the commit it looked in).
    pub(super) last_commit: std::cell::RefCell<Option<String>>,
}

impl Client {
    pub(super) fn new(hub: &HubOptions) -> std::result::Result<Self, Failure> {
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
    pub(super) fn head(&self, url: &str) -> std::result::Result<Head, Failure> {
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
    pub(super) fn download(
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

#[cfg(test)]
mod tests {
    use super::*;

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
