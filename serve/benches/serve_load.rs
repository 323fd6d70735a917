//! Load on roformer-serve: single-sentence /predict requests (or another route's, `SERVE_ROUTE`) from 1, 8 and 32 client threads,
//! with dynamic batching on and off (`--max-batch-requests 1`); throughput, p50 and p99 latency, and the
//! mean number of inputs per batch the server ran.
//!
//! `cargo bench -p roformer-serve --bench serve_load` (cargo builds the server first)
//!
//! Environment: `SERVE_MODEL` (default models/roformer-sst2), `SERVE_SECONDS` per cell (5),
//! `SERVE_FLAGS` (more server flags), `SST2_DEV` (GLUE SST-2 dev.tsv; default ../shared/data/glue/SST-2/dev.tsv, else built-in sentences),
//! `SERVE_ROUTE`: `predict` (the default), `embed`, `embed_all`, or `rerank` (a query and 4 texts; a
//! cross-encoder's route), or, with `--features grpc`, `grpc-embed` (TEI's gRPC `Embed`, the same
//! request as `embed`, one HTTP/2 connection per client), and `SERVE_PROMPT`, a prompt name for `embed`.

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

const BUILT_IN: [&str; 12] = [
    "it 's a charming and often affecting journey .",
    "unflinchingly bleak and desperate",
    "allows us to hope that nolan is poised to embark a major career as a commercial yet inventive filmmaker .",
    "the acting , costumes , music , cinematography and sound are all astounding given the production 's austere locales .",
    "it 's slow -- very , very slow .",
    "although laced with humor and a few fanciful touches , the film is a refreshingly serious look at young women .",
    "a sometimes tedious film .",
    "or doing last year 's taxes with your ex-wife .",
    "you do n't have to know about music to appreciate the film 's easygoing blend of comedy and romance .",
    "in exactly 89 minutes , most of which passed as slowly as if i 'd been sitting naked on an igloo , formula 51 sank from quirky to jerky to utter turkey .",
    "the mesmerizing performances of the leads keep the film grounded and keep the audience riveted .",
    "it takes a strange kind of laziness to waste the talents of robert forster , anne meara , eugene levy , and reginald veljohnson all in the same movie .",
];

fn main() {
    // The workspace root, where models/ and the default data path are.
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
    let server_exe = PathBuf::from(env!("CARGO_BIN_EXE_roformer-serve"));
    let model = std::env::var("SERVE_MODEL")
        .unwrap_or_else(|_| root.join("models/roformer-sst2").display().to_string());
    // More server flags for every run, e.g. `--quantize int8`.
    let extra: Vec<String> =
        std::env::var("SERVE_FLAGS").unwrap_or_default().split_whitespace().map(String::from).collect();
    let seconds: f64 = std::env::var("SERVE_SECONDS").ok().and_then(|s| s.parse().ok()).unwrap_or(5.0);
    let sentences = Arc::new(sentences(&root));
    let route = Route::from_env();
    println!("model {model}, {} sentences, {seconds} s per cell, POST /{}\n", sentences.len(), route.path);
    println!("| dynamic batching | clients | requests | req/s | p50 ms | p99 ms | mean batch |");
    println!("|---|---:|---:|---:|---:|---:|---:|");
    for (label, flags) in
        [("on", &[][..]), ("off (--max-batch-requests 1)", &["--max-batch-requests", "1"][..])]
    {
        let flags: Vec<&str> = flags.iter().copied().chain(extra.iter().map(String::as_str)).collect();
        let (mut child, base) = start(&server_exe, &model, &flags);
        let mut throughput = Vec::new();
        run(&base, &route, &sentences, 4, 1.0); // warm-up
        for clients in [1, 8, 32] {
            let before = batches(&base);
            let (n, rate, p50, p99) = run(&base, &route, &sentences, clients, seconds);
            let after = batches(&base);
            let mean_batch = (after.0 - before.0) / (after.1 - before.1).max(1.0);
            throughput.push(rate);
            println!("| {label} | {clients} | {n} | {rate:.0} | {p50:.2} | {p99:.2} | {mean_batch:.1} |");
        }
        eprintln!(
            "batching {label}: 32 clients give {:.1}x the throughput of 1",
            throughput[2] / throughput[0]
        );
        let _ = Command::new("kill").args(["-TERM", &child.id().to_string()]).status();
        let _ = child.wait();
    }
}

/// The route the clients post to, and what each request holds.
#[derive(Clone)]
struct Route {
    path: String,
    prompt: Option<String>,
}

impl Route {
    fn from_env() -> Self {
        let path = std::env::var("SERVE_ROUTE").unwrap_or_else(|_| "predict".into());
        assert!(
            ["predict", "embed", "embed_all", "rerank", "grpc-embed"].contains(&path.as_str()),
            "SERVE_ROUTE={path}: expected predict, embed, embed_all, rerank or grpc-embed"
        );
        assert!(
            path != "grpc-embed" || cfg!(feature = "grpc"),
            "SERVE_ROUTE=grpc-embed needs `cargo bench -p roformer-serve --features grpc`"
        );
        Self { path, prompt: std::env::var("SERVE_PROMPT").ok() }
    }

    /// The body of request `i`: sentence `i` (the query of /rerank, before the next 4 as texts).
    fn body(&self, sentences: &[String], i: usize) -> String {
        let sentence = |k: usize| sentences[(i + k) % sentences.len()].as_str();
        let body = match self.path.as_str() {
            "rerank" => {
                serde_json::json!({"query": sentence(0), "texts": (1..5).map(sentence).collect::<Vec<_>>()})
            }
            "embed" => serde_json::json!({"inputs": sentence(0), "prompt_name": self.prompt}),
            _ => serde_json::json!({"inputs": sentence(0)}),
        };
        body.to_string()
    }
}

/// The server's `te_batch_next_size` sum and count: inputs per batch it ran.
fn batches(base: &str) -> (f64, f64) {
    let mut response = ureq::get(format!("{base}/metrics")).call().unwrap();
    let text = response.body_mut().read_to_string().unwrap();
    let value = |name: &str| {
        text.lines().find_map(|l| l.strip_prefix(name)).and_then(|v| v.trim().parse().ok()).unwrap_or(0.0)
    };
    (value("te_batch_next_size_sum "), value("te_batch_next_size_count "))
}

/// SST-2 dev sentences when the data is there, else a dozen of them built in.
fn sentences(root: &std::path::Path) -> Vec<String> {
    let path = std::env::var("SST2_DEV")
        .map(PathBuf::from)
        .unwrap_or_else(|_| root.join("../shared/data/glue/SST-2/dev.tsv"));
    match std::fs::read_to_string(&path) {
        Ok(text) => {
            text.lines().skip(1).filter_map(|l| l.split('\t').next()).map(|s| s.trim().to_string()).collect()
        }
        Err(_) => BUILT_IN.iter().map(|s| s.to_string()).collect(),
    }
}

fn start(exe: &std::path::Path, model: &str, flags: &[&str]) -> (Child, String) {
    let mut child = Command::new(exe)
        .args(["--model", model, "--port", "0"])
        .args(flags)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    // Under --json-output (from SERVE_FLAGS) the line is JSON, the address in `fields.address`.
    let json = flags.contains(&"--json-output");
    for line in BufReader::new(stdout).lines() {
        let line = line.unwrap();
        let address = if json {
            serde_json::from_str::<serde_json::Value>(&line)
                .ok()
                .and_then(|l| l["fields"]["address"].as_str().map(str::to_string))
        } else {
            line.strip_prefix("listening on ").map(str::to_string)
        };
        if let Some(address) = address {
            return (child, format!("http://{address}"));
        }
    }
    let status = child.wait();
    panic!("the server exited before listening: {status:?}");
}

/// `clients` threads send requests back to back for `seconds`; returns the count, requests per
/// second, and p50 / p99 latency in ms.
fn run(
    base: &str,
    route: &Route,
    sentences: &Arc<Vec<String>>,
    clients: usize,
    seconds: f64,
) -> (usize, f64, f64, f64) {
    let deadline = Instant::now() + Duration::from_secs_f64(seconds);
    let start = Instant::now();
    let threads: Vec<_> = (0..clients)
        .map(|c| {
            let url =
                if route.path == "grpc-embed" { base.to_string() } else { format!("{base}/{}", route.path) };
            let (sentences, route) = (sentences.clone(), route.clone());
            std::thread::spawn(move || {
                #[cfg(feature = "grpc")]
                if route.path == "grpc-embed" {
                    return grpc_client(&url, &route, &sentences, c, deadline);
                }
                let agent: ureq::Agent = ureq::Agent::config_builder().build().into();
                let mut latencies = Vec::new();
                let mut i = c * 7919;
                while Instant::now() < deadline {
                    let body = route.body(&sentences, i);
                    let t = Instant::now();
                    let mut response =
                        agent.post(&url).header("content-type", "application/json").send(&body).unwrap();
                    response.body_mut().read_to_string().unwrap();
                    latencies.push(t.elapsed().as_secs_f64() * 1e3);
                    i += 1;
                }
                latencies
            })
        })
        .collect();
    let mut latencies: Vec<f64> = threads.into_iter().flat_map(|t| t.join().unwrap()).collect();
    let elapsed = start.elapsed().as_secs_f64();
    latencies.sort_by(f64::total_cmp);
    let at = |q: f64| latencies[((latencies.len() - 1) as f64 * q).round() as usize];
    (latencies.len(), latencies.len() as f64 / elapsed, at(0.5), at(0.99))
}

#[cfg(feature = "grpc")]
mod pb {
    #![allow(clippy::all)]
    tonic::include_proto!("tei.v1");
}

/// One gRPC client: `Embed` calls back to back on its own connection until `deadline`; the
/// latencies in ms.
#[cfg(feature = "grpc")]
fn grpc_client(base: &str, route: &Route, sentences: &[String], c: usize, deadline: Instant) -> Vec<f64> {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    runtime.block_on(async {
        let channel =
            tonic::transport::Channel::from_shared(base.to_string()).unwrap().connect().await.unwrap();
        let mut client = pb::embed_client::EmbedClient::new(channel);
        let mut latencies = Vec::new();
        let mut i = c * 7919;
        while Instant::now() < deadline {
            let request = pb::EmbedRequest {
                inputs: sentences[i % sentences.len()].clone(),
                prompt_name: route.prompt.clone(),
                ..Default::default()
            };
            let t = Instant::now();
            client.embed(request).await.unwrap();
            latencies.push(t.elapsed().as_secs_f64() * 1e3);
            i += 1;
        }
        latencies
    })
}
