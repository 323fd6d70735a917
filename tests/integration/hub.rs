//! Hub loading for real, without the internet: a server on 127.0.0.1 answers hf-hub's requests
//! under `/{repo}/resolve/{revision}/{file}` with the headers it reads (ETag, X-Repo-Commit,
//! Content-Range), from fixture folders.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use roformer::{Error, PipelineOptions, ProblemType, TextClassifier};

/// (repo, revision) -> the folder whose files it serves.
type Repos = HashMap<(String, String), PathBuf>;

struct Server {
    port: u16,
    requests: Arc<AtomicUsize>,
}

impl Server {
    fn start(repos: Repos) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let requests = Arc::new(AtomicUsize::new(0));
        let counter = requests.clone();
        // Serves until the test process exits; only this test's client connects.
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                counter.fetch_add(1, Ordering::SeqCst);
                let _ = serve(stream, &repos);
            }
        });
        Server { port, requests }
    }

    fn requests(&self) -> usize {
        self.requests.load(Ordering::SeqCst)
    }
}

fn fnv(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf29ce484222325u64, |h, &b| (h ^ b as u64).wrapping_mul(0x100000001b3))
}

fn serve(mut stream: TcpStream, repos: &Repos) -> std::io::Result<()> {
    let mut reader = BufReader::new(stream.try_clone()?);
    let mut request_line = String::new();
    reader.read_line(&mut request_line)?;
    let mut range = None;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line)? == 0 || line == "\r\n" {
            break;
        }
        if let Some((name, value)) = line.split_once(':') {
            if name.eq_ignore_ascii_case("range") {
                range = value.trim().strip_prefix("bytes=").map(str::to_string);
            }
        }
    }
    let path = request_line.split_whitespace().nth(1).unwrap_or("/").replace("%2F", "/");
    // /{org}/{name}/resolve/{revision...}/{file}
    let found = path.split_once("/resolve/").and_then(|(repo, rest)| {
        let (revision, file) = rest.rsplit_once('/')?;
        let dir = repos.get(&(repo.trim_start_matches('/').to_string(), revision.to_string()))?;
        let body = std::fs::read(dir.join(file)).ok()?;
        Some((repo.to_string(), revision.to_string(), body))
    });
    let Some((repo, revision, body)) = found else {
        return stream.write_all(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
    };
    let size = body.len();
    let (start, end) = match range.as_deref().and_then(|r| r.split_once('-')) {
        Some((a, b)) => {
            let a: usize = a.parse().unwrap_or(0);
            let b: usize = b.parse().map(|b: usize| b.min(size - 1)).unwrap_or(size - 1);
            (a, b)
        }
        None => (0, size - 1),
    };
    let status = if range.is_some() { "206 Partial Content" } else { "200 OK" };
    // Repos named evil-* answer with headers that would write outside the cache if trusted.
    let etag = match repo.contains("evil-etag") {
        true => "../../../../escaped".to_string(),
        false => format!("{:016x}{size:08x}", fnv(&body)),
    };
    let commit = match repo.contains("evil-commit") {
        true => "../../../escaped".to_string(),
        false => format!("{:040x}", fnv(revision.as_bytes()) as u128),
    };
    let head = format!(
        "HTTP/1.1 {status}\r\nContent-Length: {}\r\nContent-Range: bytes {start}-{end}/{size}\r\n\
         ETag: \"{etag}\"\r\nX-Repo-Commit: {commit}\r\nConnection: close\r\n\r\n",
        end + 1 - start,
    );
    stream.write_all(head.as_bytes())?;
    stream.write_all(&body[start..=end])
}

fn pipeline(name: &str) -> PathBuf {
    crate::support::fixture(&format!("pipelines/{name}"))
}

#[test]
fn hub_download_cache_offline_missing_files_and_revisions() {
    let mut repos = Repos::new();
    repos.insert(("test-org/tiny-cls".into(), "main".into()), pipeline("cls"));
    repos.insert(("test-org/tiny-cls".into(), "refs/pr/1".into()), pipeline("multilabel"));
    // A repo with a config and a vocabulary, but no weights.
    let no_weights = std::env::temp_dir().join(format!("roformer-hub-noweights-{}", std::process::id()));
    std::fs::create_dir_all(&no_weights).unwrap();
    for f in ["config.json", "vocab.txt"] {
        std::fs::copy(pipeline("cls").join(f), no_weights.join(f)).unwrap();
    }
    repos.insert(("test-org/no-weights".into(), "main".into()), no_weights.clone());
    let server = Server::start(repos);

    let cache = std::env::temp_dir().join(format!("roformer-hub-cache-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&cache);
    // Every Hub setting comes from the options: no environment variable is read or set.
    let options = || {
        PipelineOptions::default()
            .with_cache_dir(&cache)
            .with_endpoint(format!("http://127.0.0.1:{}", server.port))
            .with_offline(false)
    };

    // Download: the files land in the standard cache layout and load as the local folder does.
    let local = TextClassifier::from_pretrained(pipeline("cls")).unwrap();
    let remote = TextClassifier::from_pretrained_with("test-org/tiny-cls", options()).unwrap();
    assert!(
        remote.path().starts_with(cache.join("models--test-org--tiny-cls/snapshots")),
        "{:?}",
        remote.path()
    );
    for f in ["config.json", "model.safetensors", "vocab.txt", "tokenizer_config.json"] {
        assert!(remote.path().join(f).exists(), "{f} was not downloaded");
    }
    let texts = ["a great film", "the movie was terrible and boring"];
    assert_eq!(local.classify(&texts).unwrap(), remote.classify(&texts).unwrap());
    let after_download = server.requests();
    assert!(after_download >= 4, "{after_download} requests");

    // A second load is served by the cache.
    TextClassifier::from_pretrained_with("test-org/tiny-cls", options()).unwrap();
    assert_eq!(server.requests(), after_download, "the second load made requests");

    // Offline: the cache still serves; anything else is a clear error, and nothing is requested.
    TextClassifier::from_pretrained_with("test-org/tiny-cls", options().with_offline(true)).unwrap();
    let err = TextClassifier::from_pretrained_with("test-org/never-fetched", options().with_offline(true))
        .unwrap_err();
    assert!(matches!(&err, Error::Hub { message, .. } if message.contains("offline")), "{err}");
    assert_eq!(server.requests(), after_download);

    // A repo without weights, and one that does not exist, name what is missing.
    let err = TextClassifier::from_pretrained_with("test-org/no-weights", options()).unwrap_err();
    assert!(matches!(&err, Error::Hub { file, .. } if file == "model.safetensors"), "{err}");
    let err = TextClassifier::from_pretrained_with("test-org/nothing-here", options()).unwrap_err();
    assert!(
        matches!(&err, Error::Hub { file, message, .. } if file == "config.json" && message.contains("404")),
        "{err}"
    );

    // A non-default revision, as junnyu's refs/pr/1 branches.
    let pr = TextClassifier::from_pretrained_with("test-org/tiny-cls", options().with_revision("refs/pr/1"))
        .unwrap();
    assert_eq!(pr.problem_type(), ProblemType::MultiLabelClassification);
    assert_eq!(pr.config().num_labels(), 4);
    assert_eq!(remote.problem_type(), ProblemType::SingleLabelClassification);

    let _ = std::fs::remove_dir_all(&cache);
    let _ = std::fs::remove_dir_all(&no_weights);
}

#[test]
fn nothing_a_repo_or_server_says_writes_outside_the_cache() {
    let sharded =
        crate::support::Scratch::copy_of(&crate::support::model_fixture("base_sharded"), "hub-escape");
    sharded.redirect_a_shard("../../escaped.safetensors");
    std::fs::copy(pipeline("cls").join("vocab.txt"), sharded.path().join("vocab.txt")).unwrap();

    let mut repos = Repos::new();
    for repo in ["test-org/evil-etag", "test-org/evil-commit"] {
        repos.insert((repo.into(), "main".into()), pipeline("cls"));
    }
    repos.insert(("test-org/evil-index".into(), "main".into()), sharded.path().to_path_buf());
    let server = Server::start(repos);
    let root = std::env::temp_dir().join(format!("roformer-hub-escape-{}", std::process::id()));
    let cache = root.join("cache");
    let _ = std::fs::remove_dir_all(&root);
    let options = PipelineOptions::default()
        .with_cache_dir(&cache)
        .with_endpoint(format!("http://127.0.0.1:{}", server.port))
        .with_offline(false);

    for (repo, fault) in [
        ("test-org/evil-etag", "etag"),
        ("test-org/evil-commit", "commit"),
        ("test-org/evil-index", "escaped.safetensors"),
    ] {
        let err = roformer::SentenceEncoder::from_pretrained_with(repo, options.clone()).unwrap_err();
        assert!(err.to_string().contains(fault), "{repo}: {err}");
    }
    // A revision or repo id that could leave the cache is refused before any request.
    let before = server.requests();
    for (repo, revision) in [("test-org/x", "../../x"), ("../x", "main"), ("test-org/x", "refs/../../x")] {
        let err =
            TextClassifier::from_pretrained_with(repo, options.clone().with_revision(revision)).unwrap_err();
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
