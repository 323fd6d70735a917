//! The browser test: the demo page's functions (web/demo.js), run by web/test.html in headless
//! Chromium on the test fixtures, against the native crate in this process. A local server on
//! 127.0.0.1 serves the page, the package, the fixtures and the test plan, and takes the page's
//! results by POST.
//!
//! It needs Debian's `chromium` (or `CHROMIUM=path`) and the package that scripts/build/build_wasm.sh
//! builds into target/wasm-pkg; `.ci/run` installs both, then runs
//! `cargo test --release -p roformer-wasm --test browser -- --ignored`.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use roformer::{PipelineOptions, Quantization, SentenceEncoder, TextClassifier};
use serde_json::{json, Value};

/// The bound of the issue: the browser's outputs within 1e-4 of the native crate's.
const TOLERANCE: f32 = 1e-4;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf()
}

fn package_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR").map_or_else(|| root().join("target"), PathBuf::from).join("wasm-pkg")
}

fn fixture(path: &str) -> PathBuf {
    root().join(path)
}

/// The texts of a fixture's expected.json: strings, or (for a classifier) `{"input": [text, pair]}`.
fn texts_of(path: &str) -> Vec<String> {
    let expected: Value =
        serde_json::from_slice(&std::fs::read(fixture(path).join("expected.json")).unwrap()).unwrap();
    let text = |t: &Value| t.as_str().or_else(|| t["input"][0].as_str()).unwrap().to_string();
    expected["texts"].as_array().unwrap().iter().map(text).collect()
}

/// Every file under `dir`, by its `/`-separated path inside it.
fn files_of(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else if path.file_name().unwrap() != "expected.json" {
                out.push(path.strip_prefix(dir).unwrap().to_string_lossy().replace('\\', "/"));
            }
        }
    }
    out.sort();
    out
}

/// One check the page runs: what it loads and calls, and what the native crate gave.
struct Case {
    plan: Value,
    expect: Expect,
}

enum Expect {
    Classes(Vec<(String, f32)>),
    Vectors(Vec<Vec<f32>>),
    Numbers(Vec<f32>),
    /// An `Error` whose message holds this text.
    Error(&'static str),
}

fn case(
    id: &str,
    call: &str,
    folder: &str,
    source: &str,
    options: Value,
    input: Value,
    expect: Expect,
) -> Case {
    // `/broken/` is served from the test's own folder (`broken_fixture`).
    let dir = match folder.strip_prefix("broken") {
        Some("") => broken_dir(),
        _ => fixture(folder),
    };
    let files = if source == "files" && dir.is_dir() { files_of(&dir) } else { Vec::new() };
    let plan = json!({
        "id": id, "call": call, "folder": folder, "source": source, "files": files,
        "options": options, "input": input,
    });
    Case { plan, expect }
}

fn classes(out: roformer::Result<Vec<roformer::Classification>>) -> Expect {
    Expect::Classes(out.unwrap().into_iter().map(|c| (c.label, c.score)).collect())
}

fn cosine(x: &[f32], y: &[f32]) -> f32 {
    let dot: f32 = x.iter().zip(y).map(|(a, b)| a * b).sum();
    dot / (x.iter().map(|a| a * a).sum::<f32>() * y.iter().map(|b| b * b).sum::<f32>()).sqrt()
}

/// The cases, with the native crate's outputs.
fn cases() -> Vec<Case> {
    let int8 = PipelineOptions::default().with_quantization(Quantization::Int8);
    let cls = "tests/fixtures/pipelines/cls";
    let sst2 = "models/roformer-sst2";
    let st6 = "tests/fixtures/sentence_transformers/st6_cls_dense";
    let old = "tests/fixtures/sentence_transformers/old_mean";
    let zh = "tests/fixtures/pipelines/ner_zh";
    let cls_texts = texts_of(cls);
    let pairs: Vec<(String, String)> =
        cls_texts.iter().zip(cls_texts.iter().rev()).map(|(a, b)| (a.clone(), b.clone())).collect();
    let classifier = TextClassifier::from_pretrained(fixture(cls)).unwrap();
    let classifier8 = TextClassifier::from_pretrained_with(fixture(cls), int8.clone()).unwrap();
    let sst2_f32 = TextClassifier::from_pretrained(fixture(sst2)).unwrap();
    let sst2_int8 = TextClassifier::from_pretrained_with(fixture(sst2), int8.clone()).unwrap();
    let under_sst2 = SentenceEncoder::from_classifier(&sst2_f32).unwrap();
    let st6_texts = texts_of(st6);
    let st6_encoder = SentenceEncoder::from_pretrained(fixture(st6)).unwrap();
    let old_encoder = SentenceEncoder::from_pretrained(fixture(old)).unwrap();
    let zh_texts = texts_of(zh);
    let zh_encoder = SentenceEncoder::from_pretrained(fixture(zh)).unwrap();
    let similar = [
        ("a gorgeous , witty , seductive movie .", "a charming film that i enjoyed ."),
        ("the plot is a mess .", "a gorgeous , witty , seductive movie ."),
    ];
    let sims = similar
        .iter()
        .map(|(a, b)| {
            let e = under_sst2.encode(&[a, b]).unwrap();
            cosine(&e[0], &e[1])
        })
        .collect();
    let sst2_texts: Vec<&str> = similar.iter().flat_map(|(a, b)| [*a, *b]).collect();
    let none = json!({});
    vec![
        case(
            "classify, fromFiles",
            "classify",
            cls,
            "files",
            none.clone(),
            json!(cls_texts),
            classes(classifier.classify(&cls_texts)),
        ),
        case(
            "classifyPairs, fromFiles",
            "classifyPairs",
            cls,
            "files",
            none.clone(),
            json!(pairs),
            classes(classifier.classify_pairs(&pairs)),
        ),
        case(
            "classify int8, fromUrl",
            "classify",
            cls,
            "url",
            json!({"quantize": "int8"}),
            json!(cls_texts),
            classes(classifier8.classify(&cls_texts)),
        ),
        case(
            "built-in SST-2, demo classify",
            "demoClassify",
            sst2,
            "url",
            none.clone(),
            json!(sst2_texts),
            classes(sst2_f32.classify(&sst2_texts)),
        ),
        case(
            "built-in SST-2 int8, fromFiles",
            "classify",
            sst2,
            "files",
            json!({"quantize": "int8"}),
            json!(sst2_texts),
            classes(sst2_int8.classify(&sst2_texts)),
        ),
        case(
            "built-in SST-2, demo similarity",
            "demoSimilarity",
            sst2,
            "url",
            none.clone(),
            json!(similar),
            Expect::Numbers(sims),
        ),
        case(
            "sentence-transformers 6 (tokenizer.json, Dense, Normalize), fromFiles",
            "encode",
            st6,
            "files",
            none.clone(),
            json!({"texts": st6_texts}),
            Expect::Vectors(st6_encoder.encode(&st6_texts).unwrap()),
        ),
        case(
            "sentence-transformers prompt per call",
            "encode",
            st6,
            "files",
            none.clone(),
            json!({"texts": st6_texts, "prompt": "passage"}),
            Expect::Vectors(st6_encoder.encode_with(&st6_texts, roformer::Prompt::Named("passage")).unwrap()),
        ),
        case(
            "sentence-transformers 2 (modules by URL)",
            "encode",
            old,
            "url",
            none.clone(),
            json!({"texts": st6_texts}),
            Expect::Vectors(old_encoder.encode(&st6_texts).unwrap()),
        ),
        case(
            "Chinese with jieba, fromUrl",
            "encode",
            zh,
            "url",
            none.clone(),
            json!({"texts": zh_texts}),
            Expect::Vectors(zh_encoder.encode(&zh_texts).unwrap()),
        ),
        case(
            "no files",
            "classify",
            "none",
            "files",
            none.clone(),
            json!(["x"]),
            Expect::Error("config.json"),
        ),
        case(
            "a missing tensor",
            "classify",
            "broken",
            "files",
            none.clone(),
            json!(["x"]),
            Expect::Error("roformer.encoder.layer.0.attention.self.query.weight"),
        ),
        case(
            "an unknown option",
            "classify",
            cls,
            "files",
            json!({"quantise": "int8"}),
            json!(["x"]),
            Expect::Error("options.quantise"),
        ),
        case(
            "a bad pair",
            "classifyPairs",
            cls,
            "files",
            none.clone(),
            json!([["a", "b"], ["only one"]]),
            Expect::Error("pairs[1]"),
        ),
        case(
            "a folder that is not there",
            "classify",
            "tests/fixtures/nothing-here",
            "url",
            none,
            json!(["x"]),
            Expect::Error("config.json"),
        ),
    ]
}

/// This test's scratch folder.
fn work_dir() -> PathBuf {
    std::env::temp_dir().join(format!("roformer-browser-{}", std::process::id()))
}

fn broken_dir() -> PathBuf {
    work_dir().join("broken")
}

/// The cls fixture without one of its tensors, in the folder the server serves as `/broken/`.
fn broken_fixture() {
    let (source, dir) = (fixture("tests/fixtures/pipelines/cls"), broken_dir());
    std::fs::create_dir_all(&dir).unwrap();
    for name in ["config.json", "vocab.txt", "tokenizer_config.json"] {
        std::fs::copy(source.join(name), dir.join(name)).unwrap();
    }
    let mut tensors =
        candle_core::safetensors::load(source.join("model.safetensors"), &candle_core::Device::Cpu).unwrap();
    tensors
        .remove("roformer.encoder.layer.0.attention.self.query.weight")
        .expect("the fixture has the tensor");
    candle_core::safetensors::save(&tensors, dir.join("model.safetensors")).unwrap();
}

fn content_type(path: &Path) -> &'static str {
    match path.extension().and_then(|e| e.to_str()) {
        Some("html") => "text/html; charset=utf-8",
        Some("js") => "text/javascript",
        Some("wasm") => "application/wasm",
        Some("json") => "application/json",
        _ => "application/octet-stream",
    }
}

/// Serves `GET /plan.json`, the repository's files (the package's under `/target/wasm-pkg/`,
/// the broken fixture under `/broken/`), and hands each `POST /result` body to `results`.
fn serve(listener: TcpListener, plan: Vec<u8>, broken: PathBuf, results: mpsc::Sender<Vec<u8>>) {
    for stream in listener.incoming() {
        let Ok(stream) = stream else { continue };
        let (plan, broken, results) = (plan.clone(), broken.clone(), results.clone());
        std::thread::spawn(move || {
            let _ = answer(stream, &plan, &broken, &results);
        });
    }
}

fn answer(
    mut stream: TcpStream,
    plan: &[u8],
    broken: &Path,
    results: &mpsc::Sender<Vec<u8>>,
) -> std::io::Result<()> {
    let mut reader = BufReader::new(stream.try_clone()?);
    let mut line = String::new();
    reader.read_line(&mut line)?;
    let mut parts = line.split_whitespace();
    let (method, target) = (parts.next().unwrap_or(""), parts.next().unwrap_or("/"));
    let mut length = 0;
    loop {
        let mut header = String::new();
        reader.read_line(&mut header)?;
        if header.trim().is_empty() {
            break;
        }
        if let Some((name, value)) = header.split_once(':') {
            if name.eq_ignore_ascii_case("content-length") {
                length = value.trim().parse().unwrap_or(0);
            }
        }
    }
    let path = target.split('?').next().unwrap_or("/");
    let (status, kind, body) = if method == "POST" && path == "/result" {
        let mut body = vec![0; length];
        reader.read_exact(&mut body)?;
        let _ = results.send(body);
        ("200 OK", "text/plain", b"ok".to_vec())
    } else if path == "/plan.json" {
        ("200 OK", "application/json", plan.to_vec())
    } else {
        let file = if let Some(rest) = path.strip_prefix("/target/wasm-pkg/") {
            package_dir().join(rest)
        } else if let Some(rest) = path.strip_prefix("/broken/") {
            broken.join(rest)
        } else {
            root().join(path.trim_start_matches('/'))
        };
        match (path.contains(".."), std::fs::read(&file)) {
            (false, Ok(bytes)) => ("200 OK", content_type(&file), bytes),
            _ => ("404 Not Found", "text/plain", b"not found".to_vec()),
        }
    };
    write!(
        stream,
        "HTTP/1.1 {status}\r\nContent-Type: {kind}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    )?;
    stream.write_all(&body)
}

fn version(program: &str, arg: &str) -> String {
    Command::new(program)
        .arg(arg)
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_else(|e| format!("{program}: {e}"))
}

/// Whether a difference is within the tolerance (a NaN is not).
fn within(difference: f32) -> bool {
    difference <= TOLERANCE
}

fn max_diff(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(x, y)| (x - y).abs()).fold(0.0, f32::max)
}

/// What is wrong with one case's result, if anything.
fn verdict(expect: &Expect, result: &Value) -> Result<String, String> {
    let output = &result["output"];
    let floats = |v: &Value| {
        v.as_array()
            .unwrap_or(&Vec::new())
            .iter()
            .map(|x| x.as_f64().unwrap_or(f64::NAN) as f32)
            .collect::<Vec<f32>>()
    };
    if let (Some(error), false) = (result["error"].as_str(), matches!(expect, Expect::Error(_))) {
        return Err(format!("threw {error}"));
    }
    match expect {
        Expect::Error(wanted) => {
            let message = result["error"].as_str().ok_or_else(|| format!("no error; gave {output}"))?;
            if result["isError"] != json!(true) {
                return Err(format!("threw something that is not an Error: {message}"));
            }
            if !message.contains(wanted) {
                return Err(format!("the message does not name {wanted:?}: {message}"));
            }
            Ok(format!("Error: {message}"))
        }
        Expect::Classes(want) => {
            let got = output.as_array().ok_or("no array")?;
            if got.len() != want.len() {
                return Err(format!("{} rows for {} inputs", got.len(), want.len()));
            }
            let mut worst = 0f32;
            for (i, ((label, score), row)) in want.iter().zip(got).enumerate() {
                let (l, s) =
                    (row["label"].as_str().unwrap_or(""), row["score"].as_f64().unwrap_or(f64::NAN) as f32);
                if l != label || !within((s - score).abs()) {
                    return Err(format!("row {i}: {l} {s} against native {label} {score}"));
                }
                worst = worst.max((s - score).abs());
            }
            Ok(format!("{} rows, labels equal, scores within {worst:.1e}", want.len()))
        }
        Expect::Vectors(want) => {
            let got = output.as_array().ok_or("no array")?;
            if got.len() != want.len() {
                return Err(format!("{} rows for {} inputs", got.len(), want.len()));
            }
            let mut worst = 0f32;
            for (i, (w, g)) in want.iter().zip(got).enumerate() {
                let g = floats(g);
                let d = max_diff(w, &g);
                if g.len() != w.len() || !within(d) {
                    return Err(format!("row {i}: {} values, max abs diff {d:e}", g.len()));
                }
                worst = worst.max(d);
            }
            Ok(format!("{} embeddings of {}, max abs diff {worst:.1e}", want.len(), want[0].len()))
        }
        Expect::Numbers(want) => {
            let got = floats(output);
            let d = max_diff(want, &got);
            if got.len() != want.len() || !within(d) {
                return Err(format!("{got:?} against native {want:?}"));
            }
            Ok(format!("{got:?}, max abs diff {d:.1e}"))
        }
    }
}

#[test]
#[ignore = "needs Chromium and target/wasm-pkg (scripts/build/build_wasm.sh); .ci/run runs it"]
fn the_page_matches_the_native_crate() {
    // The browser's int8 kernel takes weights up to ±127, as the native portable level does
    // (the AVX2 one takes ±63): the native side runs at that level, read once, before any load.
    std::env::set_var("ROFORMER_CPU_LEVEL", "portable");
    let package = package_dir();
    assert!(
        package.join("roformer_wasm_bg.wasm").is_file(),
        "no package in {}: run scripts/build/build_wasm.sh first",
        package.display()
    );
    let chromium = std::env::var("CHROMIUM").unwrap_or_else(|_| "chromium".into());
    let work = work_dir();
    broken_fixture();
    let cases = cases();
    let plan = json!({ "cases": cases.iter().map(|c| c.plan.clone()).collect::<Vec<_>>() });
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let (send, receive) = mpsc::channel();
    let plan_bytes = serde_json::to_vec(&plan).unwrap();
    std::thread::spawn(move || serve(listener, plan_bytes, broken_dir(), send));

    println!("chromium: {}", version(&chromium, "--version"));
    println!("wasm-bindgen: {}", version("wasm-bindgen", "--version"));
    let wasm = std::fs::metadata(package.join("roformer_wasm_bg.wasm")).unwrap().len();
    println!("package: {} ({wasm} bytes of .wasm)", package.display());
    let mut browser = Command::new(&chromium)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            &format!("--user-data-dir={}", work.join("profile").display()),
            &format!("http://127.0.0.1:{port}/web/test.html"),
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| {
            panic!("cannot start {chromium}: {e} (install Debian's chromium, or set CHROMIUM)")
        });
    let body = receive.recv_timeout(Duration::from_secs(300));
    let _ = browser.kill();
    let _ = browser.wait();
    let _ = std::fs::remove_dir_all(&work);
    let body = body.expect("the page posted no result within 300 s");
    let report: Value = serde_json::from_slice(&body).unwrap();
    println!("user agent: {}", report["userAgent"]);
    let results: BTreeMap<String, Value> = report["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| (r["id"].as_str().unwrap().to_string(), r.clone()))
        .collect();
    let mut failures = Vec::new();
    for case in &cases {
        let id = case.plan["id"].as_str().unwrap();
        match results.get(id).ok_or_else(|| "no result".to_string()).and_then(|r| verdict(&case.expect, r)) {
            Ok(summary) => println!("ok   {id}: {summary}"),
            Err(problem) => {
                println!("FAIL {id}: {problem}");
                failures.push(id);
            }
        }
    }
    assert!(failures.is_empty(), "{} of {} cases failed: {failures:?}", failures.len(), cases.len());
}
