//! roformer-serve over real HTTP on 127.0.0.1, started as a user starts it, on the library's
//! fixture checkpoints: `routes` has TEI's original routes, answers against the library's
//! pipelines, its error statuses, many clients at once and a graceful SIGTERM; `surface` has the
//! rest of TEI's surface (rerank, similarity, embed_all, API key, CORS, OpenAPI), admission and
//! read timeouts; `flags` the flags and environment variables around them; `grpc` (feature `grpc`)
//! TEI's gRPC API through a client generated from its proto.

mod flags;
#[cfg(feature = "grpc")]
mod grpc;
mod openapi;
#[cfg(feature = "otlp")]
mod otlp;
mod routes;
mod surface;

use std::io::{BufRead, BufReader, Read};
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use roformer::TextClassifier;
use serde_json::Value;

const TOLERANCE: f32 = 1e-5;

struct Server {
    child: Child,
    address: SocketAddr,
    base: String,
    agent: ureq::Agent,
    stderr: Arc<Mutex<String>>,
}

impl Server {
    /// Starts the server on a free port and waits for its `listening on` line (its JSON form
    /// under `--json-output`).
    fn start(model: &str, flags: &[&str]) -> Self {
        let json = flags.contains(&"--json-output");
        let mut child = Command::new(env!("CARGO_BIN_EXE_roformer-serve"))
            .args(["--model", model, "--port", "0"])
            .args(flags)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let stderr = Arc::new(Mutex::new(String::new()));
        let mut pipe = child.stderr.take().unwrap();
        let sink = stderr.clone();
        std::thread::spawn(move || {
            let mut text = String::new();
            let _ = pipe.read_to_string(&mut text);
            sink.lock().unwrap().push_str(&text);
        });
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let address = loop {
            match lines.next() {
                Some(Ok(line)) => {
                    if let Some(address) = listening_address(&line, json) {
                        break address.parse::<SocketAddr>().unwrap();
                    }
                }
                _ => {
                    let status = child.wait().unwrap();
                    std::thread::sleep(Duration::from_millis(100));
                    panic!("the server stopped ({status}) before listening: {}", stderr.lock().unwrap());
                }
            }
        };
        let agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_global(Some(Duration::from_secs(60)))
            .build()
            .into();
        Self { child, address, base: format!("http://{address}"), agent, stderr }
    }

    fn post(&self, path: &str, body: &str) -> (u16, String) {
        self.post_as(path, body, "application/json")
    }

    fn post_as(&self, path: &str, body: &str, content_type: &str) -> (u16, String) {
        let mut response = self
            .agent
            .post(format!("{}{path}", self.base))
            .header("content-type", content_type)
            .send(body)
            .unwrap_or_else(|e| panic!("POST {path}: {e}"));
        (response.status().as_u16(), response.body_mut().read_to_string().unwrap())
    }

    /// POSTs JSON, asserts 200 and returns the parsed answer.
    fn ok(&self, path: &str, body: Value) -> Value {
        let (status, text) = self.post(path, &body.to_string());
        assert_eq!(status, 200, "POST {path} {body}: {text}");
        serde_json::from_str(&text).unwrap()
    }

    /// A request with extra headers: (status, headers, body).
    fn request(
        &self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: &str,
    ) -> (u16, Vec<(String, String)>, String) {
        let mut request = http_request(method, &format!("{}{path}", self.base));
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        let request = request.body(body.to_string()).unwrap();
        let mut response = self.agent.run(request).unwrap_or_else(|e| panic!("{method} {path}: {e}"));
        let headers = response
            .headers()
            .iter()
            .map(|(k, v)| (k.as_str().to_string(), v.to_str().unwrap_or_default().to_string()))
            .collect();
        (response.status().as_u16(), headers, response.body_mut().read_to_string().unwrap())
    }

    fn get(&self, path: &str) -> (u16, String) {
        let mut response = self.agent.get(format!("{}{path}", self.base)).call().unwrap();
        (response.status().as_u16(), response.body_mut().read_to_string().unwrap())
    }
}

fn http_request(method: &str, uri: &str) -> ureq::http::request::Builder {
    ureq::http::Request::builder().method(method).uri(uri)
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A sentence-transformers folder of the library's fixtures.
fn st_model(name: &str) -> String {
    format!("{}/../tests/fixtures/sentence_transformers/{name}", env!("CARGO_MANIFEST_DIR"))
}

/// The address of the server's line on stdout once it listens: `listening on ADDRESS`, or under
/// `--json-output` (`json`) a JSON log line that says so, the address in `fields.address`.
fn listening_address(line: &str, json: bool) -> Option<String> {
    if !json {
        return line.strip_prefix("listening on ").map(str::to_string);
    }
    let line: Value = serde_json::from_str(line).ok()?;
    let address = line["fields"]["address"].as_str()?;
    (line["fields"]["message"].as_str()? == format!("listening on {address}")).then(|| address.to_string())
}

/// A checkpoint of the library's fixtures (tests/fixtures/pipelines at the workspace root).
fn model(name: &str) -> String {
    format!("{}/../tests/fixtures/pipelines/{name}", env!("CARGO_MANIFEST_DIR"))
}

const TEXTS: [&str; 6] = [
    "it 's a charming and often affecting journey .",
    "the movie was terrible and boring",
    "a great film",
    "unflinchingly bleak and desperate",
    "Héllo wörld, ça va ?",
    "x",
];

fn vectors(value: &Value) -> Vec<Vec<f32>> {
    value.as_array().unwrap().iter().map(vector).collect()
}

fn vector(value: &Value) -> Vec<f32> {
    value.as_array().unwrap().iter().map(|x| x.as_f64().unwrap() as f32).collect()
}

fn assert_vectors_close(what: &str, ours: &[Vec<f32>], want: &[Vec<f32>]) {
    assert_eq!(ours.len(), want.len(), "{what}: count");
    for (i, (a, b)) in ours.iter().zip(want).enumerate() {
        assert_eq!(a.len(), b.len(), "{what}[{i}]: length");
        let diff = a.iter().zip(b).map(|(x, y)| (x - y).abs()).fold(0.0, f32::max);
        assert!(diff <= TOLERANCE, "{what}[{i}]: max abs diff {diff:e}");
    }
}

/// TEI's predictions for one input: every label, best first, equal to the pipeline's scores.
fn assert_predictions(what: &str, got: &Value, classifier: &TextClassifier, scores: &[f32]) {
    let got = got.as_array().unwrap_or_else(|| panic!("{what}: {got}"));
    assert_eq!(got.len(), scores.len(), "{what}: every label");
    let mut want: Vec<(String, f32)> =
        scores.iter().enumerate().map(|(i, &s)| (classifier.config().label(i), s)).collect();
    want.sort_by(|a, b| b.1.total_cmp(&a.1));
    for (g, (label, score)) in got.iter().zip(&want) {
        assert_eq!(g["label"], label.as_str(), "{what}: order {got:?}");
        let s = g["score"].as_f64().unwrap() as f32;
        assert!((s - score).abs() <= TOLERANCE, "{what}: {label} {s} vs {score}");
    }
}
