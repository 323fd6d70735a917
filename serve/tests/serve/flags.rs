//! TEI's flags beyond the routes: every flag from its environment variable, HOSTNAME, the
//! Prometheus port, JSON logs, the Unix socket, default prompts, and the TEI flags refused by name.

use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use serde_json::{json, Value};

use crate::*;

/// The server started with `flags` and `env`, its stderr lines arriving on a channel.
struct Logged {
    child: Child,
    address: String,
    lines: mpsc::Receiver<String>,
}

impl Logged {
    fn start(flags: &[&str], env: &[(&str, &str)]) -> Self {
        let mut command = Command::new(env!("CARGO_BIN_EXE_roformer-serve"));
        command.args(flags).stdout(Stdio::piped()).stderr(Stdio::piped());
        // Nothing of the test runner's environment reaches the flags but what a test sets.
        for var in ["MODEL_ID", "PORT", "HOSTNAME", "PROMETHEUS_PORT", "JSON_OUTPUT", "DEFAULT_PROMPT_NAME"] {
            command.env_remove(var);
        }
        command.envs(env.iter().copied());
        let json = flags.contains(&"--json-output") || env.contains(&("JSON_OUTPUT", "true"));
        let mut child = command.spawn().unwrap();
        let (tx, lines) = mpsc::channel();
        let stderr = child.stderr.take().unwrap();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                let _ = tx.send(line);
            }
        });
        let mut stdout = BufReader::new(child.stdout.take().unwrap()).lines();
        let address = match stdout.next() {
            Some(Ok(line)) => listening_address(&line, json).unwrap_or_else(|| panic!("{line}")),
            _ => {
                let _ = child.wait();
                let log: Vec<String> = lines.try_iter().collect();
                panic!("the server stopped before listening: {log:?}")
            }
        };
        Self { child, address, lines }
    }

    /// The stderr lines so far (after `listening on`, the startup's are all there).
    fn log(&self) -> Vec<String> {
        std::thread::sleep(Duration::from_millis(200));
        self.lines.try_iter().collect()
    }
}

impl Drop for Logged {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn get(url: &str) -> (u16, String) {
    let agent: ureq::Agent = ureq::Agent::config_builder().http_status_as_error(false).build().into();
    let mut response = agent.get(url).call().unwrap();
    (response.status().as_u16(), response.body_mut().read_to_string().unwrap())
}

/// A server whose every setting comes from TEI's environment variables.
#[test]
fn flags_come_from_tei_s_environment_variables() {
    let cls = model("cls");
    let server = Logged::start(
        &[],
        &[
            ("MODEL_ID", cls.as_str()),
            ("PORT", "0"),
            ("PROMETHEUS_PORT", "0"),
            ("MAX_CLIENT_BATCH_SIZE", "3"),
            ("DTYPE", "float32"),
            ("SERVED_MODEL_NAME", "from-env"),
            ("JSON_OUTPUT", "true"),
        ],
    );
    let (status, info) = get(&format!("http://{}/info", server.address));
    assert_eq!(status, 200);
    let info: Value = serde_json::from_str(&info).unwrap();
    assert_eq!(
        (info["max_client_batch_size"].as_u64(), info["served_model_name"].as_str()),
        (Some(3), Some("from-env"))
    );
    assert_eq!(info["model_dtype"], "float32");
    // A flag wins over its variable.
    let flagged = Logged::start(
        &["--model", &cls, "--port", "0", "--max-client-batch-size", "5"],
        &[("MAX_CLIENT_BATCH_SIZE", "3"), ("PROMETHEUS_PORT", "0")],
    );
    let (_, info) = get(&format!("http://{}/info", flagged.address));
    assert_eq!(serde_json::from_str::<Value>(&info).unwrap()["max_client_batch_size"], 5);

    // HOSTNAME is an address only when it is one: Docker and Kubernetes put the container's name there.
    for (hostname, host) in [("my-container-7f9c", "127.0.0.1"), ("127.0.0.1", "127.0.0.1")] {
        let server = Logged::start(
            &["--model", &cls, "--port", "0", "--prometheus-port", "0"],
            &[("HOSTNAME", hostname)],
        );
        assert!(server.address.starts_with(host), "HOSTNAME={hostname}: {}", server.address);
    }
}

#[test]
fn metrics_scrape_from_their_own_port_and_logs_parse_as_json() {
    let server = Logged::start(
        &["--model", &model("cls"), "--port", "0", "--prometheus-port", "0", "--json-output"],
        &[],
    );
    let agent: ureq::Agent = ureq::Agent::config_builder().http_status_as_error(false).build().into();
    let mut response = agent
        .post(format!("http://{}/predict", server.address))
        .header("content-type", "application/json")
        .send(r#"{"inputs": "a"}"#)
        .unwrap();
    assert_eq!(response.status().as_u16(), 200, "{}", response.body_mut().read_to_string().unwrap());
    let log = server.log();
    let lines: Vec<Value> = log
        .iter()
        .map(|line| serde_json::from_str(line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}")))
        .collect();
    for line in &lines {
        assert!(
            line["timestamp"].is_string()
                && line["level"].is_string()
                && line["fields"]["message"].is_string(),
            "{line}"
        );
    }
    let metrics_at = lines
        .iter()
        .find_map(|l| l["fields"]["message"].as_str()?.strip_prefix("metrics on ").map(str::to_string))
        .unwrap_or_else(|| panic!("no `metrics on` line: {log:?}"));
    let (status, metrics) = get(&format!("http://{metrics_at}/metrics"));
    assert_eq!(status, 200);
    assert!(metrics.contains("te_request_success{method=\"single\"} 1"), "{metrics}");
    // That port serves the metrics alone.
    assert_eq!(get(&format!("http://{metrics_at}/info")).0, 404);

    // A port already taken (this server's API port) is reported, and the API serves regardless.
    let port = server.address.rsplit(':').next().unwrap();
    let second = Logged::start(&["--model", &model("cls"), "--port", "0", "--prometheus-port", port], &[]);
    assert_eq!(get(&format!("http://{}/health", second.address)).0, 200);
    let log = second.log();
    assert!(
        log.iter().any(|l| l.starts_with("warn: --prometheus-port") && l.contains("/metrics")),
        "{log:?}"
    );
    assert_eq!(get(&format!("http://{}/metrics", second.address)).0, 200);
}

/// Under `--json-output` every line the server writes, on stdout and stderr, from its start through
/// a request to its shutdown, is a JSON object; its one line on stdout gives the address it
/// listens on in `fields.address`, as does the log line on stderr.
#[cfg(unix)]
#[test]
fn json_output_makes_every_line_json_the_listening_address_included() {
    let mut command = Command::new(env!("CARGO_BIN_EXE_roformer-serve"));
    command
        .args(["--model", &model("cls"), "--port", "0", "--prometheus-port", "0", "--json-output"])
        .env_remove("JSON_OUTPUT")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = command.spawn().unwrap();
    let stderr = child.stderr.take().unwrap();
    let stderr =
        std::thread::spawn(move || BufReader::new(stderr).lines().map_while(Result::ok).collect::<Vec<_>>());
    let mut stdout = BufReader::new(child.stdout.take().unwrap()).lines();
    let first = match stdout.next() {
        Some(Ok(line)) => line,
        _ => {
            let status = child.wait().unwrap();
            let log: Vec<String> = stderr.join().unwrap();
            panic!("the server stopped ({status}) before listening: {log:?}")
        }
    };
    let parse = |line: &str| -> Value {
        let value: Value = serde_json::from_str(line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}"));
        assert!(
            value["timestamp"].is_string()
                && value["level"].is_string()
                && value["fields"]["message"].is_string(),
            "{line}"
        );
        value
    };
    let listening = parse(&first);
    let address = listening["fields"]["address"].as_str().unwrap_or_else(|| panic!("no address: {first}"));
    assert_eq!(listening["fields"]["message"], format!("listening on {address}"), "{first}");
    assert_eq!(listening["level"], "INFO", "{first}");
    let address: std::net::SocketAddr = address.parse().unwrap();
    assert!(address.ip().is_loopback() && address.port() != 0, "{address}");

    // It answers there.
    let agent: ureq::Agent = ureq::Agent::config_builder().http_status_as_error(false).build().into();
    let mut response = agent
        .post(format!("http://{address}/predict"))
        .header("content-type", "application/json")
        .send(r#"{"inputs": "a great film"}"#)
        .unwrap();
    assert_eq!(response.status().as_u16(), 200, "{}", response.body_mut().read_to_string().unwrap());
    // And refuses a malformed one.
    let refused =
        agent.post(format!("http://{address}/predict")).header("content-type", "application/json").send("{");
    assert_eq!(refused.unwrap().status().as_u16(), 400);

    let killed = Command::new("kill").args(["-TERM", &child.id().to_string()]).status().unwrap();
    assert!(killed.success());
    let status = child.wait().unwrap();
    let stdout: Vec<String> = std::iter::once(first).chain(stdout.map_while(Result::ok)).collect();
    let stderr: Vec<String> = stderr.join().unwrap();
    assert!(status.success(), "{status}: {stderr:?}");
    assert_eq!(stdout.len(), 1, "{stdout:?}");
    let logged: Vec<Value> = stderr.iter().map(|line| parse(line)).collect();
    assert!(
        logged.iter().any(|l| l["fields"]["address"].as_str() == Some(&address.to_string())),
        "no log line with the address {address}: {stderr:?}"
    );
}

#[cfg(unix)]
#[test]
fn the_api_answers_on_a_unix_socket_too() {
    let path = std::env::temp_dir().join(format!("roformer-serve-{}.sock", std::process::id()));
    let server = Logged::start(
        &[
            "--model",
            &model("cls"),
            "--port",
            "0",
            "--prometheus-port",
            "0",
            "--uds-path",
            path.to_str().unwrap(),
        ],
        &[],
    );
    let mut stream = std::os::unix::net::UnixStream::connect(&path).unwrap();
    let body = r#"{"inputs": "a great film"}"#;
    write!(
        stream,
        "POST /predict HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).unwrap();
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    let over_tcp = crate::Server::start(&model("cls"), &["--prometheus-port", "0"]).post("/predict", body).1;
    assert!(answer.ends_with(&over_tcp), "{answer}\nvs TCP: {over_tcp}");
    drop(server);
    std::thread::sleep(Duration::from_millis(100));
}

#[test]
fn a_default_prompt_goes_before_texts_that_name_none() {
    let folder = st_model("st6_cls_dense");
    let plain = crate::Server::start(&folder, &["--prometheus-port", "0"]);
    let query = plain.ok("/embed", json!({"inputs": "a great film", "prompt_name": "query"}));
    let none = plain.ok("/embed", json!({"inputs": "a great film"}));
    assert_ne!(query, none);
    let by_name =
        crate::Server::start(&folder, &["--prometheus-port", "0", "--default-prompt-name", "query"]);
    assert_eq!(by_name.ok("/embed", json!({"inputs": "a great film"})), query);
    // A request's own prompt name still wins.
    let other = by_name.ok("/embed", json!({"inputs": "a great film", "prompt_name": "query"}));
    assert_eq!(other, query);
    let texts = serde_json::from_str::<Value>(
        &std::fs::read_to_string(format!("{folder}/config_sentence_transformers.json")).unwrap(),
    )
    .unwrap();
    let query_text = texts["prompts"]["query"].as_str().unwrap().to_string();
    let by_text = crate::Server::start(&folder, &["--prometheus-port", "0", "--default-prompt", &query_text]);
    let got = vectors(&by_text.ok("/embed", json!({"inputs": "a great film"})));
    assert_vectors_close("--default-prompt", &got, &vectors(&query));
}

#[test]
fn flags_without_a_meaning_here_or_out_of_range_are_refused_by_name() {
    // --otlp-endpoint is refused only where the feature that exports is off.
    let otlp = (&["--otlp-endpoint", "http://127.0.0.1:4317"][..], "built without OpenTelemetry export");
    let dense = (&["--dense-path", "2_Dense_1024"][..], "--dense-path 2_Dense_1024: not supported");
    for (flags, message) in [
        dense,
        if cfg!(feature = "otlp") { dense } else { otlp },
        (&["--default-prompt-name", "query", "--default-prompt", "q: "][..], "cannot be used with"),
        (&["--pooling", "splade"][..], "not a ForMaskedLM model"),
        (&["--dtype", "float64"][..], "unknown dtype `float64`"),
        (
            &["--max-batch-tokens", "0", "--max-client-batch-size", "0"][..],
            "--max-batch-tokens, --max-client-batch-size must be at least 1",
        ),
        (&["--api-key", " "][..], "--api-key (or API_KEY) is empty"),
        (
            &["--max-batch-tokens", "2"][..],
            "--max-batch-tokens 2 is the longest input, and too short for this model",
        ),
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_roformer-serve"))
            .args(["--model", &model("cls"), "--port", "0"])
            .args(flags)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success() && stderr.contains(message), "{flags:?}: {stderr}");
    }
}

/// `--threads` and TEI's `THREADS` reach the inference pool: a count of 0 is refused by name
/// either way. (A server that ignored it would start and serve: that fails here after 60 s.)
#[test]
fn threads_come_from_the_flag_or_its_variable() {
    for (flags, env) in [(&["--threads", "0"][..], None), (&[][..], Some(("THREADS", "0")))] {
        let mut command = Command::new(env!("CARGO_BIN_EXE_roformer-serve"));
        command.args(["--model", &model("cls"), "--port", "0", "--prometheus-port", "0"]).args(flags);
        if let Some((name, value)) = env {
            command.env(name, value);
        }
        let mut child = command.stdout(Stdio::null()).stderr(Stdio::piped()).spawn().unwrap();
        let started = std::time::Instant::now();
        let status = loop {
            if let Some(status) = child.try_wait().unwrap() {
                break status;
            }
            if started.elapsed() > std::time::Duration::from_secs(60) {
                let _ = child.kill();
                panic!("{flags:?} {env:?}: the server started with 0 threads");
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        };
        let mut stderr = String::new();
        std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut stderr).unwrap();
        assert!(
            !status.success() && stderr.contains("threads must be at least 1"),
            "{flags:?} {env:?}: {stderr}"
        );
    }
}
