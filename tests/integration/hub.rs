//! Hub loading for real, without the internet: a fake Hub on 127.0.0.1 answers as huggingface.co
//! does. `HEAD`/`GET /{repo}/resolve/{revision}/{file}` give `X-Repo-Commit` and `ETag`; errors carry
//! `X-Error-Code` (`RepoNotFound` with 401 for a repo it does not know, `GatedRepo`,
//! `RevisionNotFound`, `EntryNotFound`); a renamed repo answers a relative 307 to its new name;
//! large files (`*.safetensors`, `*.bin`) answer a 302 with `X-Linked-Etag` and `X-Linked-Size` to a
//! second server, the "CDN", on another port (another origin), which honours `Range`. Both log
//! every request: method, path, `Range` and `Authorization`.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use roformer::{
    DownloadProgress, Error, HubErrorKind, HubOptions, PipelineOptions, ProblemType, SentenceEncoder,
    TextClassifier,
};

/// What the fake Hub serves, and the faults it injects.
#[derive(Default)]
struct Hub {
    /// (repo, revision) -> the folder whose files it serves. The commit is a hash of the folder,
    /// so two revisions of one folder are one commit.
    repos: HashMap<(String, String), PathBuf>,
    /// Gated repo -> the one token that may read it.
    gated: HashMap<String, String>,
    /// Old repo id -> new id.
    renamed: HashMap<String, String>,
    /// Repo -> how many more requests answer 500 (`usize::MAX`: all of them).
    failing: HashMap<String, usize>,
    /// File name -> how many more CDN answers stop after half of their body.
    cut: HashMap<String, usize>,
}

#[derive(Debug, Clone)]
struct Logged {
    cdn: bool,
    method: String,
    path: String,
    range: Option<String>,
    auth: Option<String>,
}

struct State {
    hub: Hub,
    log: Vec<Logged>,
}

struct FakeHub {
    port: u16,
    state: Arc<Mutex<State>>,
}

impl FakeHub {
    fn start(hub: Hub) -> Self {
        let state = Arc::new(Mutex::new(State { hub, log: Vec::new() }));
        let hub_listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let cdn_listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = hub_listener.local_addr().unwrap().port();
        let cdn_port = cdn_listener.local_addr().unwrap().port();
        // Each serves until the test process exits; only this test's client connects.
        for (listener, cdn) in [(hub_listener, false), (cdn_listener, true)] {
            let state = state.clone();
            std::thread::spawn(move || {
                for stream in listener.incoming().flatten() {
                    let _ = serve(stream, &state, cdn, cdn_port);
                }
            });
        }
        FakeHub { port, state }
    }

    fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    fn options(&self, cache: &Path) -> PipelineOptions {
        // Every Hub setting comes from the options: no environment variable is read or set.
        PipelineOptions::default().with_cache_dir(cache).with_endpoint(self.endpoint()).with_offline(false)
    }

    fn log(&self) -> Vec<Logged> {
        self.state.lock().unwrap().log.clone()
    }

    fn requests(&self) -> usize {
        self.state.lock().unwrap().log.len()
    }

    fn clear_log(&self) {
        self.state.lock().unwrap().log.clear();
    }

    fn edit(&self, edit: impl FnOnce(&mut Hub)) {
        edit(&mut self.state.lock().unwrap().hub);
    }
}

fn fnv(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf29ce484222325u64, |h, &b| (h ^ b as u64).wrapping_mul(0x100000001b3))
}

fn commit_of(folder: &Path) -> String {
    format!("{:040x}", fnv(folder.to_string_lossy().as_bytes()) as u128)
}

fn etag_of(body: &[u8]) -> String {
    format!("{:016x}{:08x}", fnv(body), body.len())
}

fn is_large(file: &str) -> bool {
    file.ends_with(".safetensors") || file.ends_with(".bin")
}

/// One answer: status line, headers, body (`None` for HEAD), and whether to cut the body.
struct Answer {
    status: &'static str,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
    cut: bool,
}

fn answer(status: &'static str, headers: &[(&str, String)]) -> Answer {
    let headers = headers.iter().map(|(k, v)| (k.to_string(), v.clone())).collect();
    Answer { status, headers, body: Vec::new(), cut: false }
}

fn error(status: &'static str, code: Option<&str>, message: &str) -> Answer {
    let mut headers = vec![("X-Error-Message", message.to_string())];
    if let Some(code) = code {
        headers.push(("X-Error-Code", code.to_string()));
    }
    answer(status, &headers)
}

/// The body of a file, from byte `range` (`a-` or `a-b`) on.
fn ranged(body: Vec<u8>, range: Option<&str>, mut headers: Vec<(&str, String)>) -> Answer {
    let size = body.len();
    let Some((a, b)) = range.and_then(|r| r.split_once('-')) else {
        return Answer { body, ..answer("200 OK", &headers) };
    };
    let a: usize = a.parse().unwrap_or(0);
    let b: usize = b.parse().map(|b: usize| b.min(size - 1)).unwrap_or(size - 1);
    if a >= size {
        return answer("416 Range Not Satisfiable", &[]);
    }
    headers.push(("Content-Range", format!("bytes {a}-{b}/{size}")));
    Answer { body: body[a..=b].to_vec(), ..answer("206 Partial Content", &headers) }
}

/// The folder and commit of `repo` at `revision` (a branch, PR ref or commit).
fn find(hub: &Hub, repo: &str, revision: &str) -> Option<(PathBuf, String)> {
    let folder = hub.repos.get(&(repo.to_string(), revision.to_string())).cloned().or_else(|| {
        hub.repos.iter().find(|((r, _), f)| r == repo && commit_of(f) == revision).map(|(_, f)| f.clone())
    })?;
    let commit = match repo.contains("evil-commit") {
        true => "../../../escaped".to_string(),
        false => commit_of(&folder),
    };
    Some((folder, commit))
}

fn respond(hub: &mut Hub, request: &Logged, cdn_port: u16) -> Answer {
    let path = request.path.split('?').next().unwrap_or_default().replace("%2F", "/");
    if request.cdn {
        // /cdn/{org}/{name}/{commit}/{file}
        let parts: Vec<&str> = path.trim_start_matches("/cdn/").splitn(4, '/').collect();
        let Some(file) = parts.get(3).map(|f| f.to_string()) else { return answer("404 Not Found", &[]) };
        let repo = format!("{}/{}", parts[0], parts[1]);
        let Some(body) = find(hub, &repo, parts[2]).and_then(|(f, _)| std::fs::read(f.join(&file)).ok())
        else {
            return answer("404 Not Found", &[]);
        };
        let mut answer = ranged(body, request.range.as_deref(), vec![]);
        if let Some(n) = hub.cut.get_mut(&file).filter(|n| **n > 0) {
            *n -= 1;
            answer.cut = true;
        }
        return answer;
    }
    let Some((repo, _)) = path.split_once("/resolve/") else { return answer("404 Not Found", &[]) };
    let repo = repo.trim_start_matches('/').to_string();
    if let Some(new) = hub.renamed.get(&repo) {
        let rest = request.path.split_once("/resolve/").map(|(_, r)| r).unwrap_or_default();
        return answer("307 Temporary Redirect", &[("Location", format!("/{new}/resolve/{rest}"))]);
    }
    if let Some(n) = hub.failing.get_mut(&repo).filter(|n| **n > 0) {
        *n = n.saturating_sub(if *n == usize::MAX { 0 } else { 1 });
        return error("500 Internal Server Error", None, "Internal Error");
    }
    // The revision is URL-encoded, so its end is the first slash of the raw path; a file may be in
    // a subfolder.
    let raw = request.path.split('?').next().unwrap_or_default();
    let raw_rest = raw.split_once("/resolve/").map_or("", |(_, r)| r);
    let Some((revision, file)) = raw_rest.split_once('/') else { return answer("404 Not Found", &[]) };
    let revision = &revision.replace("%2F", "/");
    if request.auth.as_deref() == Some("Bearer hf_revoked") {
        // What huggingface.co answers a token it does not know, whatever the repo.
        return error("401 Unauthorized", None, "Invalid credentials in Authorization header");
    }
    if !hub.repos.keys().any(|(r, _)| r == &repo) {
        // What huggingface.co answers an anonymous request for a missing or private repo.
        let code = (!repo.contains("private")).then_some("RepoNotFound");
        return error("401 Unauthorized", code, "Repository not found");
    }
    if let Some(token) = hub.gated.get(&repo) {
        if request.auth.as_deref() != Some(&format!("Bearer {token}")) {
            let message = format!("Access to model {repo} is restricted. You must have access to it and be authenticated to access it. Please log in.");
            return error("401 Unauthorized", Some("GatedRepo"), &message);
        }
    }
    let Some((folder, commit)) = find(hub, &repo, revision) else {
        return error("404 Not Found", Some("RevisionNotFound"), &format!("Invalid rev id: {revision}"));
    };
    let Ok(body) = std::fs::read(folder.join(file)) else {
        let mut a = error("404 Not Found", Some("EntryNotFound"), "Entry not found");
        a.headers.push(("X-Repo-Commit".into(), commit));
        return a;
    };
    // Repos named evil-* answer with headers that would write outside the cache if trusted.
    let etag = match repo.contains("evil-etag") {
        true => "../../../../escaped".to_string(),
        false => etag_of(&body),
    };
    if is_large(file) {
        let location = format!("http://127.0.0.1:{cdn_port}/cdn/{repo}/{commit}/{file}?X-Amz-Signature=abc");
        return answer(
            "302 Found",
            &[
                ("Location", location),
                ("X-Repo-Commit", commit),
                // The pointer file's git hash; the blob is named by X-Linked-Etag.
                ("ETag", format!("\"pointer{}\"", &etag_of(etag.as_bytes())[..8])),
                ("X-Linked-Etag", format!("\"{etag}\"")),
                ("X-Linked-Size", body.len().to_string()),
            ],
        );
    }
    let headers = vec![("ETag", format!("\"{etag}\"")), ("X-Repo-Commit", commit)];
    ranged(body, request.range.as_deref(), headers)
}

fn serve(mut stream: TcpStream, state: &Mutex<State>, cdn: bool, cdn_port: u16) -> std::io::Result<()> {
    let mut reader = BufReader::new(stream.try_clone()?);
    let mut request_line = String::new();
    reader.read_line(&mut request_line)?;
    let mut words = request_line.split_whitespace();
    let method = words.next().unwrap_or("").to_string();
    let path = words.next().unwrap_or("/").to_string();
    let (mut range, mut auth) = (None, None);
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line)? == 0 || line == "\r\n" {
            break;
        }
        if let Some((name, value)) = line.split_once(':') {
            if name.eq_ignore_ascii_case("range") {
                range = value.trim().strip_prefix("bytes=").map(str::to_string);
            } else if name.eq_ignore_ascii_case("authorization") {
                auth = Some(value.trim().to_string());
            }
        }
    }
    let request = Logged { cdn, method, path, range, auth };
    let answer = {
        let mut state = state.lock().unwrap();
        state.log.push(request.clone());
        respond(&mut state.hub, &request, cdn_port)
    };
    let mut head = format!("HTTP/1.1 {}\r\nContent-Length: {}\r\n", answer.status, answer.body.len());
    for (name, value) in &answer.headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    head.push_str("Connection: close\r\n\r\n");
    stream.write_all(head.as_bytes())?;
    if request.method == "HEAD" {
        return Ok(());
    }
    let body = if answer.cut { &answer.body[..answer.body.len() / 2] } else { &answer.body[..] };
    stream.write_all(body)
    // Dropping the stream closes it: a cut answer ends short of its Content-Length.
}

fn pipeline(name: &str) -> PathBuf {
    crate::support::fixture(&format!("pipelines/{name}"))
}

/// A fresh cache folder for one test.
fn cache(tag: &str) -> PathBuf {
    let cache = std::env::temp_dir().join(format!("roformer-hub-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&cache);
    cache
}

/// The error of a load that must fail (without printing the model when it does not).
fn failed<T>(result: roformer::Result<T>) -> Error {
    match result {
        Ok(_) => panic!("the load succeeded"),
        Err(e) => e,
    }
}

fn hub_error(err: &Error) -> (HubErrorKind, Option<u16>, &str) {
    match err {
        Error::Hub { kind, status, file, .. } => (*kind, *status, file.as_str()),
        other => panic!("not a Hub error: {other}"),
    }
}

#[test]
fn hub_download_cache_offline_missing_files_and_revisions() {
    let mut hub = Hub::default();
    hub.repos.insert(("test-org/tiny-cls".into(), "main".into()), pipeline("cls"));
    hub.repos.insert(("test-org/tiny-cls".into(), "refs/pr/1".into()), pipeline("multilabel"));
    // A repo with a config and a vocabulary, but no weights.
    let no_weights = crate::support::Scratch::copy_of(&pipeline("cls"), "hub-noweights");
    std::fs::remove_file(no_weights.path().join("model.safetensors")).unwrap();
    hub.repos.insert(("test-org/no-weights".into(), "main".into()), no_weights.path().into());
    let server = FakeHub::start(hub);
    let cache = cache("cache");
    let options = || server.options(&cache);

    // Download: the files land in Python's cache layout and load as the local folder does.
    let local = TextClassifier::from_pretrained(pipeline("cls")).unwrap();
    let remote = TextClassifier::from_pretrained_with("test-org/tiny-cls", options()).unwrap();
    let repo = cache.join("models--test-org--tiny-cls");
    let commit = commit_of(&pipeline("cls"));
    assert_eq!(remote.path(), repo.join("snapshots").join(&commit));
    assert_eq!(std::fs::read_to_string(repo.join("refs/main")).unwrap(), commit);
    for f in ["config.json", "model.safetensors", "vocab.txt", "tokenizer_config.json"] {
        let pointer = remote.path().join(f);
        let bytes = std::fs::read(pipeline("cls").join(f)).unwrap();
        // snapshots/{commit}/{file} -> ../../blobs/{etag}, the etag of a large file its X-Linked-Etag.
        let target = std::fs::read_link(&pointer).unwrap();
        assert_eq!(target, Path::new("../../blobs").join(etag_of(&bytes)), "{f}");
        assert_eq!(std::fs::read(&pointer).unwrap(), bytes, "{f}");
    }
    // What the revision lacks is remembered as huggingface_hub does.
    assert!(repo.join(".no_exist").join(&commit).join("tokenizer.json").is_file());
    assert!(!std::fs::read_dir(repo.join("blobs"))
        .unwrap()
        .any(|e| { e.unwrap().file_name().to_string_lossy().ends_with(".incomplete") }));
    let texts = ["a great film", "the movie was terrible and boring"];
    assert_eq!(local.classify(&texts).unwrap(), remote.classify(&texts).unwrap());
    let log = server.log();
    assert!(log.iter().any(|r| r.cdn && r.path.contains("model.safetensors")), "{log:?}");

    // A second load is served by the cache.
    let after_download = server.requests();
    TextClassifier::from_pretrained_with("test-org/tiny-cls", options()).unwrap();
    assert_eq!(server.requests(), after_download, "the second load made requests");

    // Offline: the cache still serves; anything else is a clear error, and nothing is requested.
    TextClassifier::from_pretrained_with("test-org/tiny-cls", options().with_offline(true)).unwrap();
    let err =
        failed(TextClassifier::from_pretrained_with("test-org/never-fetched", options().with_offline(true)));
    assert_eq!(hub_error(&err).0, HubErrorKind::NotCached, "{err}");
    assert!(err.to_string().contains("offline"), "{err}");
    assert_eq!(server.requests(), after_download);

    // A repo without weights names what is missing.
    let err = failed(TextClassifier::from_pretrained_with("test-org/no-weights", options()));
    assert_eq!(hub_error(&err), (HubErrorKind::EntryNotFound, Some(404), "model.safetensors"), "{err}");

    // A non-default revision, as junnyu's refs/pr/1 branches, beside main in the same cache.
    let pr = TextClassifier::from_pretrained_with("test-org/tiny-cls", options().with_revision("refs/pr/1"))
        .unwrap();
    assert_eq!(pr.problem_type(), ProblemType::MultiLabelClassification);
    assert_eq!(pr.config().num_labels(), 4);
    assert_eq!(remote.problem_type(), ProblemType::SingleLabelClassification);
    assert_eq!(
        std::fs::read_to_string(repo.join("refs/refs/pr/1")).unwrap(),
        commit_of(&pipeline("multilabel"))
    );
    // A commit hash is a revision too, and its snapshot needs no request.
    let before = server.requests();
    TextClassifier::from_pretrained_with("test-org/tiny-cls", options().with_revision(&commit)).unwrap();
    assert_eq!(server.requests(), before);

    let _ = std::fs::remove_dir_all(&cache);
}

#[cfg(unix)]
#[test]
fn a_cache_laid_out_by_huggingface_hub_loads_offline() {
    // What Python's hf_hub_download leaves: blobs by etag, relative links, refs, .no_exist, .locks.
    let cache = cache("python-layout");
    let repo = cache.join("models--someone--python-cls");
    let commit = "0123456789abcdef0123456789abcdef01234567";
    let snapshot = repo.join("snapshots").join(commit);
    std::fs::create_dir_all(&snapshot).unwrap();
    std::fs::create_dir_all(repo.join("blobs")).unwrap();
    std::fs::create_dir_all(repo.join("refs/refs/pr")).unwrap();
    std::fs::create_dir_all(repo.join(".no_exist").join(commit)).unwrap();
    std::fs::create_dir_all(cache.join(".locks/models--someone--python-cls")).unwrap();
    for f in ["config.json", "model.safetensors", "vocab.txt", "tokenizer_config.json"] {
        let bytes = std::fs::read(pipeline("cls").join(f)).unwrap();
        let etag = etag_of(&bytes);
        std::fs::write(repo.join("blobs").join(&etag), &bytes).unwrap();
        std::os::unix::fs::symlink(Path::new("../../blobs").join(&etag), snapshot.join(f)).unwrap();
    }
    std::fs::write(repo.join(".no_exist").join(commit).join("tokenizer.json"), b"").unwrap();
    std::fs::write(repo.join("refs/main"), commit).unwrap();
    std::fs::write(repo.join("refs/refs/pr/1"), commit).unwrap();
    let options = PipelineOptions::default().with_cache_dir(&cache).with_offline(true);
    for revision in ["main", "refs/pr/1", commit] {
        let classifier = TextClassifier::from_pretrained_with(
            "someone/python-cls",
            options.clone().with_revision(revision),
        )
        .unwrap();
        assert_eq!(classifier.path(), snapshot);
    }
    let _ = std::fs::remove_dir_all(&cache);
}

#[test]
fn hub_errors_are_typed_and_name_repo_revision_file_and_status() {
    let mut hub = Hub::default();
    for repo in ["test-org/gated", "test-org/flaky", "test-org/down"] {
        hub.repos.insert((repo.into(), "main".into()), pipeline("cls"));
    }
    hub.gated.insert("test-org/gated".into(), "hf_right".into());
    hub.failing.insert("test-org/flaky".into(), 2);
    hub.failing.insert("test-org/down".into(), usize::MAX);
    let server = FakeHub::start(hub);
    let cache = cache("errors");
    let options = || server.options(&cache);
    let load = |repo: &str, options: PipelineOptions| TextClassifier::from_pretrained_with(repo, options);

    // A missing repo: 401 with RepoNotFound, as huggingface.co answers anonymous requests.
    let err = failed(load("test-org/no-such-repo", options()));
    assert_eq!(hub_error(&err), (HubErrorKind::RepositoryNotFound, Some(401), "config.json"), "{err}");
    let text = err.to_string();
    for part in ["test-org/no-such-repo", "@main", "config.json", "401", "repository not found", "token"] {
        assert!(text.contains(part), "`{part}` missing from: {text}");
    }
    // A 401 without an error code is a missing (or private) repo too, as huggingface_hub reads it.
    let err = failed(load("test-org/private-thing", options()));
    assert_eq!(hub_error(&err).0, HubErrorKind::RepositoryNotFound, "{err}");

    // Gated: without a token, or with one that has no access, the error says what to do.
    for options in [options(), options().with_token("hf_wrong")] {
        let err = failed(load("test-org/gated", options));
        assert_eq!(hub_error(&err), (HubErrorKind::GatedRepo, Some(401), "config.json"), "{err}");
        let text = err.to_string();
        assert!(text.contains("token") && text.contains("accept its terms"), "{text}");
        assert!(text.contains(&format!("{}/test-org/gated", server.endpoint())), "{text}");
        assert!(!text.contains("hf_wrong"), "the token leaked into the error: {text}");
    }
    load("test-org/gated", options().with_token("hf_right")).unwrap();
    // A token the Hub does not know is named as such, not as a missing repo.
    let err = failed(load("test-org/flaky", options().with_token("hf_revoked")));
    assert_eq!(hub_error(&err), (HubErrorKind::Http, Some(401), "config.json"), "{err}");
    assert!(err.to_string().contains("token was refused"), "{err}");

    // A revision the repo does not have.
    let err = failed(load("test-org/gated", options().with_token("hf_right").with_revision("refs/pr/9")));
    assert_eq!(hub_error(&err), (HubErrorKind::RevisionNotFound, Some(404), "config.json"), "{err}");
    assert!(err.to_string().contains("refs/pr/9"), "{err}");

    // 5xx is retried a bounded number of times: two failures are absorbed, endless ones reported.
    load("test-org/flaky", options()).unwrap();
    server.clear_log();
    let err = failed(load("test-org/down", options()));
    assert_eq!(hub_error(&err), (HubErrorKind::ServerError, Some(500), "config.json"), "{err}");
    assert_eq!(server.requests(), 4, "tries on a server that always fails");
    assert!(err.to_string().contains("500") && err.to_string().contains("4 tries"), "{err}");

    // No server at all: a connection error, after the same bounded retries.
    let closed = TcpListener::bind("127.0.0.1:0").unwrap();
    let endpoint = format!("http://{}", closed.local_addr().unwrap());
    drop(closed);
    let err = failed(load("test-org/never-cached", options().with_endpoint(endpoint)));
    assert_eq!(hub_error(&err), (HubErrorKind::Connection, None, "config.json"), "{err}");
    assert!(std::error::Error::source(&err).is_some());
    let _ = std::fs::remove_dir_all(&cache);
}

#[test]
fn the_token_goes_to_the_hub_only_and_renamed_repos_are_followed() {
    let mut hub = Hub::default();
    hub.repos.insert(("test-org/new-name".into(), "main".into()), pipeline("cls"));
    hub.gated.insert("test-org/new-name".into(), "hf_secret".into());
    hub.renamed.insert("test-org/old-name".into(), "test-org/new-name".into());
    let server = FakeHub::start(hub);
    let cache = cache("token");
    let classifier = TextClassifier::from_pretrained_with(
        "test-org/old-name",
        server.options(&cache).with_token("hf_secret"),
    )
    .unwrap();
    // Python keeps a renamed repo under the name it was asked by.
    assert!(classifier.path().starts_with(cache.join("models--test-org--old-name/snapshots")));
    let log = server.log();
    let (cdn, hub): (Vec<&Logged>, Vec<&Logged>) = log.iter().partition(|r| r.cdn);
    assert!(hub.iter().any(|r| r.path.starts_with("/test-org/old-name/")), "{log:?}");
    assert!(hub.iter().any(|r| r.path.starts_with("/test-org/new-name/")), "{log:?}");
    assert!(hub.iter().all(|r| r.auth.as_deref() == Some("Bearer hf_secret")), "{log:?}");
    assert!(!cdn.is_empty(), "{log:?}");
    assert!(cdn.iter().all(|r| r.auth.is_none()), "the token reached the download host: {log:?}");
    let _ = std::fs::remove_dir_all(&cache);
}

#[test]
fn interrupted_downloads_resume_with_a_range_request() {
    let mut hub = Hub::default();
    hub.repos.insert(("test-org/cut-once".into(), "main".into()), pipeline("cls"));
    let weights = std::fs::read(pipeline("cls").join("model.safetensors")).unwrap();
    let size = weights.len() as u64;
    let server = FakeHub::start(hub);
    let cache = cache("resume");
    let events: Arc<Mutex<Vec<DownloadProgress>>> = Default::default();
    let seen = events.clone();
    let hub_options = HubOptions::from_env().with_progress(move |p| seen.lock().unwrap().push(p.clone()));
    let options = || {
        let options = PipelineOptions::default().with_hub(hub_options.clone());
        options.with_cache_dir(&cache).with_endpoint(server.endpoint()).with_offline(false)
    };
    let weight_gets = |server: &FakeHub| -> Vec<Option<String>> {
        server
            .log()
            .iter()
            .filter(|r| r.cdn && r.path.contains("model.safetensors"))
            .map(|r| r.range.clone())
            .collect()
    };

    // A connection cut halfway is retried from where it stopped.
    server.edit(|hub| {
        hub.cut.insert("model.safetensors".into(), 1);
    });
    TextClassifier::from_pretrained_with("test-org/cut-once", options()).unwrap();
    assert_eq!(weight_gets(&server), [None, Some(format!("{}-", size / 2))]);
    let progress: Vec<DownloadProgress> =
        events.lock().unwrap().iter().filter(|p| p.file == "model.safetensors").cloned().collect();
    assert_eq!(progress.first().map(|p| p.downloaded), Some(0));
    assert!(progress.iter().any(|p| p.downloaded == size / 2), "{progress:?}");
    assert_eq!(progress.last().map(|p| (p.downloaded, p.total)), Some((size, Some(size))));

    // Cut on every try: the load fails clearly, keeps what it got, and the next run resumes.
    let repo = "test-org/cut-always";
    server.edit(|hub| {
        hub.repos.insert((repo.into(), "main".into()), pipeline("multilabel"));
        hub.cut.insert("model.safetensors".into(), usize::MAX);
    });
    server.clear_log();
    let err = failed(TextClassifier::from_pretrained_with(repo, options()));
    assert_eq!(hub_error(&err), (HubErrorKind::Connection, None, "model.safetensors"), "{err}");
    assert_eq!(weight_gets(&server).len(), 4, "tries on a connection that always breaks");
    let bytes = std::fs::read(pipeline("multilabel").join("model.safetensors")).unwrap();
    let partial =
        cache.join("models--test-org--cut-always/blobs").join(format!("{}.incomplete", etag_of(&bytes)));
    let kept = std::fs::metadata(&partial).unwrap().len();
    assert!(kept > 0 && kept < bytes.len() as u64);
    assert_eq!(std::fs::read(&partial).unwrap(), bytes[..kept as usize]);
    server.edit(|hub| {
        hub.cut.clear();
    });
    server.clear_log();
    TextClassifier::from_pretrained_with(repo, options()).unwrap();
    assert_eq!(weight_gets(&server), [Some(format!("{kept}-"))]);
    assert!(!partial.exists());
    let _ = std::fs::remove_dir_all(&cache);
}

#[test]
fn blobs_the_cache_holds_are_not_downloaded_again() {
    let copy = crate::support::Scratch::copy_of(&pipeline("cls"), "hub-same-blobs");
    let mut hub = Hub::default();
    hub.repos.insert(("test-org/shared".into(), "main".into()), pipeline("cls"));
    // The same commit under a PR ref, and another commit with the same files.
    hub.repos.insert(("test-org/shared".into(), "refs/pr/1".into()), pipeline("cls"));
    hub.repos.insert(("test-org/shared".into(), "v2".into()), copy.path().into());
    let server = FakeHub::start(hub);
    let cache = cache("reuse");
    let options = |revision: &str| server.options(&cache).with_revision(revision);
    TextClassifier::from_pretrained_with("test-org/shared", options("main")).unwrap();

    // A revision whose commit is cached: one HEAD to learn the commit, nothing else.
    server.clear_log();
    let pr = TextClassifier::from_pretrained_with("test-org/shared", options("refs/pr/1")).unwrap();
    assert_eq!(pr.path(), cache.join("models--test-org--shared/snapshots").join(commit_of(&pipeline("cls"))));
    let log = server.log();
    assert_eq!(log.len(), 1, "{log:?}");
    assert_eq!(
        (log[0].method.as_str(), log[0].path.as_str()),
        ("HEAD", "/test-org/shared/resolve/refs%2Fpr%2F1/config.json")
    );

    // Another commit of the same blobs: metadata requests only, no file is fetched again.
    server.clear_log();
    let v2 = TextClassifier::from_pretrained_with("test-org/shared", options("v2")).unwrap();
    assert!(v2.path().ends_with(commit_of(copy.path())));
    let log = server.log();
    assert!(log.iter().all(|r| r.method == "HEAD" && !r.cdn), "{log:?}");
    assert_eq!(std::fs::read_dir(cache.join("models--test-org--shared/blobs")).unwrap().count(), 4);
    let _ = std::fs::remove_dir_all(&cache);
}

#[test]
fn sharded_pytorch_checkpoints_are_fetched() {
    // pytorch_model.bin.index.json over two shards (each holding the tensors the index gives it).
    let base = crate::support::model_fixture("base_bin");
    let folder = crate::support::Scratch::copy_of(&base, "hub-bin-shards");
    let vocab: Vec<&str> = include_str!("../fixtures/pipelines/cls/vocab.txt").lines().take(200).collect();
    std::fs::write(folder.path().join("vocab.txt"), vocab.join("\n") + "\n").unwrap();
    let names = roformer::Checkpoint::open(base.join("pytorch_model.bin")).unwrap().tensor_names();
    let shards = ["pytorch_model-00001-of-00002.bin", "pytorch_model-00002-of-00002.bin"];
    let map: serde_json::Map<String, serde_json::Value> =
        names.iter().enumerate().map(|(i, n)| (n.clone(), shards[i % 2].into())).collect();
    let index = serde_json::json!({ "metadata": {}, "weight_map": map });
    std::fs::write(folder.path().join("pytorch_model.bin.index.json"), index.to_string()).unwrap();
    for shard in shards {
        std::fs::copy(base.join("pytorch_model.bin"), folder.path().join(shard)).unwrap();
    }
    let local = SentenceEncoder::from_pretrained(folder.path()).unwrap();
    std::fs::remove_file(folder.path().join("pytorch_model.bin")).unwrap();

    let mut hub = Hub::default();
    hub.repos.insert(("test-org/bin-shards".into(), "main".into()), folder.path().into());
    let server = FakeHub::start(hub);
    let cache = cache("bin-shards");
    let remote =
        SentenceEncoder::from_pretrained_with("test-org/bin-shards", server.options(&cache)).unwrap();
    for shard in shards {
        assert!(remote.path().join(shard).is_file(), "{shard}");
    }
    let texts = ["! \" #", "#"];
    assert_eq!(local.encode(&texts).unwrap(), remote.encode(&texts).unwrap());
    // And the second load is the cache's.
    let before = server.requests();
    SentenceEncoder::from_pretrained_with("test-org/bin-shards", server.options(&cache)).unwrap();
    assert_eq!(server.requests(), before);
    let _ = std::fs::remove_dir_all(&cache);
}

#[test]
fn a_sentence_transformers_repo_brings_its_modules() {
    // modules.json names subfolders: their configs and weights come with the model.
    let folder = crate::support::fixture("sentence_transformers/st6_cls_dense");
    let mut hub = Hub::default();
    hub.repos.insert(("test-org/st".into(), "main".into()), folder.clone());
    let server = FakeHub::start(hub);
    let cache = cache("st");
    let remote = SentenceEncoder::from_pretrained_with("test-org/st", server.options(&cache)).unwrap();
    for file in [
        "modules.json",
        "config_sentence_transformers.json",
        "1_Pooling/config.json",
        "2_Dense/model.safetensors",
    ] {
        assert!(remote.path().join(file).is_file(), "{file}");
    }
    let local = SentenceEncoder::from_pretrained(&folder).unwrap();
    let texts = ["a great film", ""];
    assert_eq!(local.encode(&texts).unwrap(), remote.encode(&texts).unwrap());
    assert_eq!(remote.dim(), 24);
    let _ = std::fs::remove_dir_all(&cache);
}

#[test]
fn a_sentence_transformers_repo_brings_its_transformer_settings_under_an_older_name() {
    // The first of the names sentence-transformers reads is fetched, and a repo without modules.json is not
    // asked for any of them.
    let scratch = crate::support::Scratch::copy_of(
        &crate::support::fixture("sentence_transformers/old_mean"),
        "hub-st",
    );
    let legacy = "sentence_xlm-roberta_config.json";
    std::fs::rename(scratch.path().join("sentence_bert_config.json"), scratch.path().join(legacy)).unwrap();
    let mut hub = Hub::default();
    hub.repos.insert(("test-org/old-st".into(), "main".into()), scratch.path().to_path_buf());
    hub.repos.insert(("test-org/tiny-cls".into(), "main".into()), pipeline("cls"));
    let server = FakeHub::start(hub);
    let cache = cache("old-st");
    let remote = SentenceEncoder::from_pretrained_with("test-org/old-st", server.options(&cache)).unwrap();
    assert!(remote.path().join(legacy).is_file());
    assert_eq!(remote.max_length(), 24);
    let local = SentenceEncoder::from_pretrained(scratch.path()).unwrap();
    let texts = ["a great film", "the movie was terrible and boring"];
    assert_eq!(local.encode(&texts).unwrap(), remote.encode(&texts).unwrap());
    let asked = |name: &str| server.log().iter().filter(|r| r.path.ends_with(name)).count();
    assert_eq!(asked("sentence_bert_config.json"), 1);
    assert_eq!(asked("sentence_xlnet_config.json"), 0, "past the one found");

    // ModelFiles::from_fetch (the browser's loader) asks for the same files in the same order.
    let hub_asked: Vec<String> = server
        .log()
        .iter()
        .filter(|r| !r.cdn && r.method == "HEAD")
        .filter_map(|r| r.path.split_once("/resolve/").and_then(|(_, p)| p.split_once('/')))
        .map(|(_, file)| file.to_string())
        .collect();
    let mut fetched = Vec::new();
    let files = {
        let fetch = |name: String| {
            let path = scratch.path().join(&name);
            fetched.push(name);
            std::future::ready(Ok(path.is_file().then(|| std::fs::read(&path).unwrap())))
        };
        let mut load = std::pin::pin!(roformer::ModelFiles::from_fetch("old-st", fetch));
        let waker = std::task::Waker::noop();
        match std::future::Future::poll(load.as_mut(), &mut std::task::Context::from_waker(waker)) {
            std::task::Poll::Ready(files) => files.unwrap(),
            std::task::Poll::Pending => panic!("every fetch was ready"),
        }
    };
    let in_memory = SentenceEncoder::from_files(&files, PipelineOptions::default()).unwrap();
    assert_eq!(fetched, hub_asked);
    assert_eq!(in_memory.max_length(), 24);
    assert_eq!(in_memory.encode(&texts).unwrap(), remote.encode(&texts).unwrap());

    server.clear_log();
    TextClassifier::from_pretrained_with("test-org/tiny-cls", server.options(&cache)).unwrap();
    let log = server.log();
    assert!(!log.iter().any(|r| r.path.contains("/sentence_")), "{log:?}");
    let _ = std::fs::remove_dir_all(&cache);
}

#[test]
fn nothing_a_repo_or_server_says_writes_outside_the_cache() {
    let sharded =
        crate::support::Scratch::copy_of(&crate::support::model_fixture("base_sharded"), "hub-escape");
    sharded.redirect_a_shard("../../escaped.safetensors");
    std::fs::copy(pipeline("cls").join("vocab.txt"), sharded.path().join("vocab.txt")).unwrap();

    let mut hub = Hub::default();
    for repo in ["test-org/evil-etag", "test-org/evil-commit"] {
        hub.repos.insert((repo.into(), "main".into()), pipeline("cls"));
    }
    hub.repos.insert(("test-org/evil-index".into(), "main".into()), sharded.path().to_path_buf());
    let server = FakeHub::start(hub);
    let root = std::env::temp_dir().join(format!("roformer-hub-escape-{}", std::process::id()));
    let cache = root.join("cache");
    let _ = std::fs::remove_dir_all(&root);
    let options = server.options(&cache);

    for (repo, fault) in [
        ("test-org/evil-etag", "invalid ETag"),
        ("test-org/evil-commit", "invalid X-Repo-Commit"),
        ("test-org/evil-index", "escaped.safetensors"),
    ] {
        let err = failed(roformer::SentenceEncoder::from_pretrained_with(repo, options.clone()));
        assert!(err.to_string().contains(fault), "{repo}: {err}");
    }
    // A revision or repo id that could leave the cache is refused before any request.
    let before = server.requests();
    for (repo, revision) in [("test-org/x", "../../x"), ("../x", "main"), ("test-org/x", "refs/../../x")] {
        let err = failed(TextClassifier::from_pretrained_with(repo, options.clone().with_revision(revision)));
        assert!(err.to_string().contains("invalid") || err.to_string().contains("no such folder"), "{err}");
    }
    assert_eq!(server.requests(), before);
    // Everything written is under the cache folder.
    let mut stack = vec![root.clone()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap().flatten() {
            let path = entry.path();
            assert!(path.starts_with(&cache), "{} is outside the cache", path.display());
            if entry.file_type().unwrap().is_dir() {
                stack.push(path);
            }
        }
    }
    assert!(!root.parent().unwrap().join("escaped.safetensors").exists());
    let _ = std::fs::remove_dir_all(&root);
}
