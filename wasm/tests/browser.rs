//! The browser test: the demo page's functions (web/demo.js), run by web/test.html in headless
//! Chromium on the test fixtures, against the native crate in this process, once with each of
//! the package's modules (relaxed SIMD and plain simd128), with and without Web Workers. A local
//! server on 127.0.0.1 serves the page, the npm package unpacked from its tarball, the fixtures
//! and the test plan, and takes the page's results by POST.
//!
//! It needs Debian's `chromium` (or `CHROMIUM=path`) and the tarball that
//! scripts/build/build_wasm.sh packs into target/npm; `.ci/run` makes both, then runs
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

fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR").map_or_else(|| root().join("target"), PathBuf::from)
}

/// The npm package's tarball, as `npm pack` names it.
fn tarball() -> PathBuf {
    target_dir().join("npm").join(format!("roformer-wasm-{}.tgz", env!("CARGO_PKG_VERSION")))
}

/// Where the test unpacks the tarball (`package/` inside, as npm packs it).
fn unpacked_dir() -> PathBuf {
    work_dir().join("unpacked").join("package")
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
    /// What the relaxed-SIMD module must give instead, where it differs from the plain one:
    /// its int8 kernel takes weights up to ±63 (`int8_at_63`).
    relaxed: Option<Expect>,
    /// The case without workers whose rows this one's must repeat (within `TWIN_TOLERANCE`).
    twin: Option<&'static str>,
}

/// How far a pool's rows may stray from the same call's without workers: each chunk is batched
/// and padded on its own, which moves the last bits of a float.
const TWIN_TOLERANCE: f64 = 1e-6;

enum Expect {
    Classes(Vec<(String, f32)>),
    Vectors(Vec<Vec<f32>>),
    Numbers(Vec<f32>),
    /// An `Error` whose message holds this text.
    Error(&'static str),
    /// A row for each text the page asked for, and the page's timer kept firing while the call
    /// ran (a Worker did the work).
    Responsive,
    /// A row for each text the page asked for, and the page's timer stood still for most of the
    /// call (it ran on the page's thread): the evidence that `Responsive` measures what it claims to.
    Frozen,
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
    Case { plan, expect, relaxed: None, twin: None }
}

impl Case {
    fn relaxed(mut self, expect: Expect) -> Self {
        self.relaxed = Some(expect);
        self
    }

    fn twin(mut self, id: &'static str) -> Self {
        self.twin = Some(id);
        self
    }
}

fn classes(out: roformer::Result<Vec<roformer::Classification>>) -> Expect {
    Expect::Classes(out.unwrap().into_iter().map(|c| (c.label, c.score)).collect())
}

fn cosine(x: &[f32], y: &[f32]) -> f32 {
    let dot: f32 = x.iter().zip(y).map(|(a, b)| a * b).sum();
    dot / (x.iter().map(|a| a * a).sum::<f32>() * y.iter().map(|b| b * b).sum::<f32>()).sqrt()
}

/// Set in the child of this test that computes the int8 outputs at the ±63 weight range.
const INT8_AT_63: &str = "ROFORMER_BROWSER_INT8_AT_63";

/// The int8 classifications the page checks, by fixture: the texts of cls and of the built-in
/// SST-2 model, at the native level in force.
fn int8_outputs() -> BTreeMap<String, Vec<(String, f32)>> {
    let int8 = PipelineOptions::default().with_quantization(Quantization::Int8);
    [
        ("cls", "tests/fixtures/pipelines/cls", texts_of("tests/fixtures/pipelines/cls")),
        ("sst2", SST2, sst2_texts()),
    ]
    .into_iter()
    .map(|(name, folder, texts)| {
        let classifier = TextClassifier::from_pretrained_with(fixture(folder), int8.clone()).unwrap();
        let rows = classifier.classify(&texts).unwrap().into_iter().map(|c| (c.label, c.score)).collect();
        (name.to_string(), rows)
    })
    .collect()
}

/// The bf16 classifications of `texts` by the classifier in `folder`, at the native level in
/// force. No level of this process has bf16 instructions (it runs at `portable`), so its products
/// run the f32 kernel on bf16 weights and rounded inputs, as the WebAssembly modules' do. They are
/// checked to differ from `in_f32`'s by more than the page's tolerance, so that a module which ran
/// f32 instead fails. (The built-in SST-2 model's probabilities on its texts are too sure to tell:
/// bf16 moves them by about 2e-6.)
fn bf16_classes(folder: &str, texts: &[String], in_f32: &TextClassifier) -> Expect {
    let bf16 = PipelineOptions::default().with_quantization(Quantization::Bf16);
    let rows = TextClassifier::from_pretrained_with(fixture(folder), bf16).unwrap().classify(texts).unwrap();
    let full = in_f32.classify(texts).unwrap();
    let moved = rows.iter().zip(&full).map(|(a, b)| (a.score - b.score).abs()).fold(0.0, f32::max);
    assert!(moved > TOLERANCE, "{folder}: bf16 moved no probability beyond {TOLERANCE} ({moved:.1e})");
    classes(Ok(rows))
}

/// The int8 outputs with weights up to ±63, as the relaxed-SIMD module quantizes them. The
/// native crate's AVX2 level takes the same range and computes the same integer sums; since
/// `ROFORMER_CPU_LEVEL` is read once per process, a child of this test binary runs at that level
/// and writes them to a file.
fn int8_at_63() -> BTreeMap<String, Vec<(String, f32)>> {
    let out = work_dir().join("int8-at-63.json");
    let status = Command::new(std::env::current_exe().unwrap())
        .args(["--ignored", "--exact", "the_page_matches_the_native_crate", "--test-threads=1"])
        .env("ROFORMER_CPU_LEVEL", "avx2")
        .env(INT8_AT_63, &out)
        .stdout(Stdio::null())
        .status()
        .unwrap();
    assert!(status.success(), "the child computing the int8 outputs at ROFORMER_CPU_LEVEL=avx2 failed");
    serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap()
}

const SST2: &str = "models/roformer-sst2";

const SIMILAR: [(&str, &str); 2] = [
    ("a gorgeous , witty , seductive movie .", "a charming film that i enjoyed ."),
    ("the plot is a mess .", "a gorgeous , witty , seductive movie ."),
];

fn sst2_texts() -> Vec<String> {
    SIMILAR.iter().flat_map(|(a, b)| [a.to_string(), b.to_string()]).collect()
}

/// The cases, with the native crate's outputs.
fn cases() -> Vec<Case> {
    let cls = "tests/fixtures/pipelines/cls";
    let sst2 = SST2;
    // int8 at this process's portable level (±127), as the plain module; at ±63 for the relaxed.
    let (at_127, at_63) = (int8_outputs(), int8_at_63());
    let plain_int8 = |name: &str| Expect::Classes(at_127[name].clone());
    let relaxed_int8 = |name: &str| Expect::Classes(at_63[name].clone());
    let st6 = "tests/fixtures/sentence_transformers/st6_cls_dense";
    let old = "tests/fixtures/sentence_transformers/old_mean";
    let zh = "tests/fixtures/pipelines/ner_zh";
    let cls_texts = texts_of(cls);
    let pairs: Vec<(String, String)> =
        cls_texts.iter().zip(cls_texts.iter().rev()).map(|(a, b)| (a.clone(), b.clone())).collect();
    let classifier = TextClassifier::from_pretrained(fixture(cls)).unwrap();
    let sst2_f32 = TextClassifier::from_pretrained(fixture(sst2)).unwrap();
    let under_sst2 = SentenceEncoder::from_classifier(&sst2_f32).unwrap();
    let st6_texts = texts_of(st6);
    let st6_encoder = SentenceEncoder::from_pretrained(fixture(st6)).unwrap();
    let old_encoder = SentenceEncoder::from_pretrained(fixture(old)).unwrap();
    let zh_texts = texts_of(zh);
    let zh_encoder = SentenceEncoder::from_pretrained(fixture(zh)).unwrap();
    let similar = SIMILAR;
    let sims: Vec<f32> = similar
        .iter()
        .map(|(a, b)| {
            let e = under_sst2.encode(&[a, b]).unwrap();
            cosine(&e[0], &e[1])
        })
        .collect();
    let sst2_texts = sst2_texts();
    let none = json!({});
    let two = json!({"workers": 2});
    // The page repeats the texts for a call of about this many seconds (it times a first call).
    let seconds = 3;
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
            plain_int8("cls"),
        )
        .relaxed(relaxed_int8("cls")),
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
            plain_int8("sst2"),
        )
        .relaxed(relaxed_int8("sst2")),
        case(
            "classify bf16, fromFiles",
            "classify",
            cls,
            "files",
            json!({"quantize": "bf16"}),
            json!(cls_texts),
            bf16_classes(cls, &cls_texts, &classifier),
        ),
        case(
            "built-in SST-2, demo similarity",
            "demoSimilarity",
            sst2,
            "url",
            none.clone(),
            json!(similar),
            Expect::Numbers(sims.clone()),
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
            "pairs that are not an array",
            "classifyPairs",
            cls,
            "files",
            none.clone(),
            json!(null),
            Expect::Error("pairs must be an array"),
        ),
        case(
            "classifyPairs after a refused call",
            "classifyPairsAfterABadCall",
            cls,
            "files",
            none.clone(),
            json!(pairs),
            classes(classifier.classify_pairs(&pairs)),
        ),
        case(
            "a folder that is not there",
            "classify",
            "tests/fixtures/nothing-here",
            "url",
            none.clone(),
            json!(["x"]),
            Expect::Error("config.json"),
        ),
        // The same calls, each split across 2 Web Workers: the same rows in the same order.
        case(
            "2 workers: classify, fromFiles",
            "classify",
            cls,
            "files",
            two.clone(),
            json!(cls_texts),
            classes(classifier.classify(&cls_texts)),
        )
        .twin("classify, fromFiles"),
        case(
            "2 workers: classifyPairs, fromUrl",
            "classifyPairs",
            cls,
            "url",
            two.clone(),
            json!(pairs),
            classes(classifier.classify_pairs(&pairs)),
        )
        .twin("classifyPairs, fromFiles"),
        case(
            "2 workers: classify int8, fromFiles",
            "classify",
            cls,
            "files",
            json!({"quantize": "int8", "workers": 2}),
            json!(cls_texts),
            plain_int8("cls"),
        )
        .twin("classify int8, fromUrl")
        .relaxed(relaxed_int8("cls")),
        case(
            "2 workers: built-in SST-2, demo similarity",
            "demoSimilarity",
            sst2,
            "url",
            two.clone(),
            json!(similar),
            Expect::Numbers(sims),
        )
        .twin("built-in SST-2, demo similarity"),
        case(
            "2 workers: sentence-transformers 6, fromFiles",
            "encode",
            st6,
            "files",
            two.clone(),
            json!({"texts": st6_texts}),
            Expect::Vectors(st6_encoder.encode(&st6_texts).unwrap()),
        )
        .twin("sentence-transformers 6 (tokenizer.json, Dense, Normalize), fromFiles"),
        case(
            "2 workers: Chinese with jieba, fromUrl",
            "encode",
            zh,
            "url",
            two.clone(),
            json!({"texts": zh_texts}),
            Expect::Vectors(zh_encoder.encode(&zh_texts).unwrap()),
        )
        .twin("Chinese with jieba, fromUrl"),
        case(
            "2 workers: a missing tensor",
            "classify",
            "broken",
            "files",
            two.clone(),
            json!(["x"]),
            Expect::Error("roformer.encoder.layer.0.attention.self.query.weight"),
        ),
        case(
            "2 workers: a folder that is not there",
            "classify",
            "tests/fixtures/nothing-here",
            "url",
            two.clone(),
            json!(["x"]),
            Expect::Error("config.json"),
        ),
        case(
            "2 workers: an unknown option",
            "classify",
            cls,
            "files",
            json!({"quantise": "int8", "workers": 2}),
            json!(["x"]),
            Expect::Error("options.quantise"),
        ),
        case(
            "2 workers: a bad pair",
            "classifyPairs",
            cls,
            "files",
            two,
            json!([["a", "b"], ["c", "d"], ["only one"]]),
            Expect::Error("pairs[2]"),
        ),
        case(
            "workers: -1",
            "classify",
            cls,
            "files",
            json!({"workers": -1}),
            json!(["x"]),
            Expect::Error("options.workers"),
        ),
        // The demo's promise: a Worker classifies while the page's timer keeps firing; the same
        // call on the page's thread, for contrast, stops it.
        case(
            "the page answers while a Worker classifies",
            "responsive",
            sst2,
            "url",
            json!({"workers": 1}),
            json!({"texts": sst2_texts, "seconds": seconds}),
            Expect::Responsive,
        ),
        case(
            "the page's thread stands still while it classifies",
            "responsive",
            sst2,
            "url",
            none,
            json!({"texts": sst2_texts, "seconds": seconds}),
            Expect::Frozen,
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

/// Serves `GET /plan.json`, the repository's files (the unpacked package's under
/// `/target/npm/package/`, where web/demo.js finds it in a checkout; the broken fixture under
/// `/broken/`), and hands each `POST /result` body to `results`.
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
        let file = if let Some(rest) = path.strip_prefix("/target/npm/package/") {
            unpacked_dir().join(rest)
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

/// The largest difference between the numbers of two JSON values of the same shape, whose other
/// leaves (labels) are equal; `None` when they differ otherwise.
fn max_leaf_diff(a: &Value, b: &Value) -> Option<f64> {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => Some((x.as_f64()? - y.as_f64()?).abs()),
        (Value::Array(x), Value::Array(y)) if x.len() == y.len() => {
            x.iter().zip(y).try_fold(0f64, |m, (x, y)| Some(m.max(max_leaf_diff(x, y)?)))
        }
        (Value::Object(x), Value::Object(y)) if x.len() == y.len() => {
            x.iter().try_fold(0f64, |m, (k, v)| Some(m.max(max_leaf_diff(v, y.get(k)?)?)))
        }
        _ => (a == b).then_some(0.0),
    }
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
        Expect::Responsive | Expect::Frozen => {
            let number = |key: &str| output[key].as_f64().unwrap_or(f64::NAN);
            let (ms, gap, ticks) = (number("ms"), number("maxGapMs"), number("ticks"));
            let rows = output["asked"].as_u64().ok_or("no count of texts asked for")?;
            if output["rows"] != json!(rows) {
                return Err(format!("{} rows for {rows} texts", output["rows"]));
            }
            let summary = format!(
                "{rows} rows in {ms:.0} ms; the 10 ms timer fired {ticks} times, longest gap {gap:.0} ms"
            );
            // Half a second of work is enough to tell a page that answers (gaps of a few timer
            // periods) from one that froze (one gap as long as the call); a NaN is no timing at all.
            if ms.is_nan() || ms < 500.0 {
                return Err(format!("{summary}: too short a call to tell"));
            }
            match expect {
                Expect::Responsive if gap <= 250.0 => Ok(summary),
                Expect::Frozen if gap >= 0.5 * ms => Ok(summary),
                _ => Err(summary),
            }
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

/// Runs the plan in a fresh headless Chromium with the module `simd` picks ("plain" or "auto");
/// returns the page's report.
fn run_page(chromium: &str, port: u16, simd: &str, results: &mpsc::Receiver<Vec<u8>>) -> Value {
    let profile = work_dir().join(format!("profile-{simd}"));
    let mut browser = Command::new(chromium)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            &format!("--user-data-dir={}", profile.display()),
            &format!("http://127.0.0.1:{port}/web/test.html?simd={simd}"),
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| {
            panic!("cannot start {chromium}: {e} (install Debian's chromium, or set CHROMIUM)")
        });
    let body = results.recv_timeout(Duration::from_secs(600));
    let _ = browser.kill();
    let _ = browser.wait();
    let body = body.unwrap_or_else(|_| panic!("the page (simd={simd}) posted no result within 600 s"));
    serde_json::from_slice(&body).unwrap()
}

/// Checks one run's results against the cases; returns the ids that failed.
fn failures(cases: &[Case], report: &Value, relaxed: bool) -> Vec<String> {
    let results: BTreeMap<String, Value> = report["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| (r["id"].as_str().unwrap().to_string(), r.clone()))
        .collect();
    let mut failed = Vec::new();
    for case in cases {
        let id = case.plan["id"].as_str().unwrap();
        let expect = case.relaxed.as_ref().filter(|_| relaxed).unwrap_or(&case.expect);
        let twin = |summary: String| match case.twin {
            None => Ok(summary),
            Some(twin) => {
                let (ours, theirs) =
                    (&results[id]["output"], &results.get(twin).ok_or("no twin result")?["output"]);
                match max_leaf_diff(ours, theirs) {
                    Some(d) if d <= TWIN_TOLERANCE => {
                        Ok(format!("{summary}; {d:.1e} from the rows without workers"))
                    }
                    _ => Err(format!(
                        "rows differ from the rows without workers ({twin:?}): {ours} against {theirs}"
                    )),
                }
            }
        };
        match results
            .get(id)
            .ok_or_else(|| "no result".to_string())
            .and_then(|r| verdict(expect, r))
            .and_then(twin)
        {
            Ok(summary) => println!("ok   {id}: {summary}"),
            Err(problem) => {
                println!("FAIL {id}: {problem}");
                failed.push(id.to_string());
            }
        }
    }
    failed
}

#[test]
#[ignore = "needs Chromium and target/npm's tarball (scripts/build/build_wasm.sh); .ci/run runs it"]
fn the_page_matches_the_native_crate() {
    if let Some(out) = std::env::var_os(INT8_AT_63) {
        // This process is the child of `int8_at_63`: its whole job is that file.
        std::fs::write(out, serde_json::to_vec(&int8_outputs()).unwrap()).unwrap();
        return;
    }
    let tarball = tarball();
    assert!(tarball.is_file(), "no {}: run scripts/build/build_wasm.sh first", tarball.display());
    let work = work_dir();
    let unpacked = unpacked_dir();
    std::fs::create_dir_all(unpacked.parent().unwrap()).unwrap();
    let status = Command::new("tar")
        .arg("-xzf")
        .arg(&tarball)
        .arg("-C")
        .arg(unpacked.parent().unwrap())
        .status()
        .expect("tar runs");
    assert!(
        status.success() && unpacked.join("package.json").is_file(),
        "cannot unpack {}",
        tarball.display()
    );
    broken_fixture();
    // The plain module's int8 kernel takes weights up to ±127, as the native portable level does
    // (the relaxed module's are compared with the AVX2 level's, `int8_at_63`): the native side
    // runs at that level, read once, before any load.
    std::env::set_var("ROFORMER_CPU_LEVEL", "portable");
    let cases = cases();
    let plan = json!({ "cases": cases.iter().map(|c| c.plan.clone()).collect::<Vec<_>>() });
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let (send, receive) = mpsc::channel();
    let plan_bytes = serde_json::to_vec(&plan).unwrap();
    std::thread::spawn(move || serve(listener, plan_bytes, broken_dir(), send));

    let chromium = std::env::var("CHROMIUM").unwrap_or_else(|_| "chromium".into());
    println!("chromium: {}", version(&chromium, "--version"));
    println!("wasm-bindgen: {}", version("wasm-bindgen", "--version"));
    println!("package: {} unpacked into {}", tarball.display(), unpacked.display());
    for wasm in ["roformer_wasm_bg.wasm", "roformer_wasm_relaxed_bg.wasm"] {
        println!("  {wasm}: {} bytes", std::fs::metadata(unpacked.join(wasm)).unwrap().len());
    }
    let mut failed = Vec::new();
    // Chromium validates relaxed SIMD (since 114), so "auto" must pick the relaxed module there.
    for (simd, module) in [("plain", "plain"), ("auto", "relaxed")] {
        let report = run_page(&chromium, port, simd, &receive);
        println!("\n{module} module (init simd: {simd:?}), user agent {}", report["userAgent"]);
        if report["simd"] != json!(module) {
            println!("FAIL init({{simd: {simd:?}}}) loaded the {} module", report["simd"]);
            failed.push(format!("{simd}: module"));
        }
        failed.extend(
            failures(&cases, &report, module == "relaxed").into_iter().map(|id| format!("{module}: {id}")),
        );
    }
    let _ = std::fs::remove_dir_all(&work);
    assert!(failed.is_empty(), "{} failures of {} cases × 2 modules: {failed:?}", failed.len(), cases.len());
}
