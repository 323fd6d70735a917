use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

use base64::Engine as _;
use roformer::{PipelineOptions, SentenceEncoder, TextClassifier};
use serde_json::{json, Value};

use crate::*;

#[test]
fn embed_and_openai_routes_answer_as_the_sentence_encoder() {
    let server = Server::start(&model("sim"), &[]);
    let normalized = SentenceEncoder::from_pretrained(model("sim")).unwrap();
    let raw =
        SentenceEncoder::from_pretrained_with(model("sim"), PipelineOptions::default().with_normalize(false))
            .unwrap();
    let want = normalized.encode(&TEXTS).unwrap();

    let got = vectors(&server.ok("/embed", json!({"inputs": TEXTS})));
    assert_vectors_close("/embed batch", &got, &want);
    let got = vectors(&server.ok("/embed", json!({"inputs": TEXTS[2]})));
    assert_vectors_close("/embed single", &got, &want[2..3]);
    let got = vectors(&server.ok("/embed", json!({"inputs": TEXTS, "normalize": false})));
    assert_vectors_close("/embed normalize=false", &got, &raw.encode(&TEXTS).unwrap());
    // POST / on an embedding model is /embed, as huggingface_hub's feature_extraction posts it.
    let got = vectors(&server.ok("/", json!({"inputs": [TEXTS[0]], "truncate": true})));
    assert_vectors_close("POST /", &got, &want[..1]);
    // Token ids are used as given.
    let ids = normalized.tokenizer().encode(TEXTS[1]).unwrap().input_ids;
    let got = vectors(&server.ok("/embed", json!({"inputs": [ids]})));
    assert_vectors_close("/embed ids", &got, &want[1..2]);
    // MRL dimensions: the first 8 values, then normalised.
    let got = vectors(&server.ok("/embed", json!({"inputs": TEXTS[0], "dimensions": 8})));
    let cut = &raw.encode(&TEXTS[..1]).unwrap()[0][..8];
    let norm = cut.iter().map(|x| x * x).sum::<f32>().sqrt();
    assert_vectors_close("/embed dimensions", &got, &[cut.iter().map(|x| x / norm).collect()]);

    let tokens: usize = TEXTS.iter().map(|t| normalized.tokenizer().encode(t).unwrap().len()).sum();
    for path in ["/v1/embeddings", "/embeddings"] {
        let answer =
            server.ok(path, json!({"input": TEXTS, "model": "anything", "encoding_format": "float"}));
        assert_eq!(answer["object"], "list");
        assert_eq!(answer["model"], model("sim"));
        assert_eq!(answer["usage"], json!({"prompt_tokens": tokens, "total_tokens": tokens}));
        let data = answer["data"].as_array().unwrap();
        for (i, d) in data.iter().enumerate() {
            assert_eq!(d["object"], "embedding");
            assert_eq!(d["index"], i);
        }
        let got: Vec<Vec<f32>> = data.iter().map(|d| vector(&d["embedding"])).collect();
        assert_vectors_close(path, &got, &want);
    }
    // base64 is what the openai client asks for: little-endian f32 bytes.
    let answer = server.ok("/v1/embeddings", json!({"input": TEXTS[3], "encoding_format": "base64"}));
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(answer["data"][0]["embedding"].as_str().unwrap())
        .unwrap();
    let got: Vec<f32> = bytes.chunks_exact(4).map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])).collect();
    assert_vectors_close("/v1/embeddings base64", &[got], &want[3..4]);
}

#[test]
fn predict_and_embed_on_a_classifier_answer_as_the_pipelines() {
    let server = Server::start(&model("cls"), &[]);
    let classifier = TextClassifier::from_pretrained(model("cls")).unwrap();
    let single = classifier.classify(&TEXTS).unwrap();

    let got = server.ok("/predict", json!({"inputs": TEXTS[0]}));
    assert_predictions("/predict str", &got, &classifier, &single[0].scores);
    // One string in a list is one input, not a batch.
    let got = server.ok("/predict", json!({"inputs": [TEXTS[1]]}));
    assert_predictions("/predict [str]", &got, &classifier, &single[1].scores);
    // Two strings in a list are ONE pair.
    let pair = classifier.classify_pairs(&[(TEXTS[0], TEXTS[2])]).unwrap();
    let got = server.ok("/predict", json!({"inputs": [TEXTS[0], TEXTS[2]]}));
    assert_predictions("/predict pair", &got, &classifier, &pair[0].scores);
    // A batch mixes texts and pairs, answered in order.
    let got = server.ok("/predict", json!({"inputs": [[TEXTS[3]], [TEXTS[0], TEXTS[2]], [TEXTS[4]]]}));
    let got = got.as_array().unwrap();
    assert_eq!(got.len(), 3);
    assert_predictions("/predict batch 0", &got[0], &classifier, &single[3].scores);
    assert_predictions("/predict batch 1", &got[1], &classifier, &pair[0].scores);
    assert_predictions("/predict batch 2", &got[2], &classifier, &single[4].scores);
    let got = server.ok("/predict", json!({"inputs": TEXTS[2], "raw_scores": true}));
    assert_predictions("/predict raw_scores", &got, &classifier, &single[2].logits);
    // POST / on a classifier is /predict, with huggingface_hub's extra `parameters` ignored.
    let got = server.ok("/", json!({"inputs": TEXTS[5], "parameters": {}}));
    assert_predictions("POST /", &got, &classifier, &single[5].scores);

    // /embed works on a task model, through its encoder.
    let encoder = SentenceEncoder::from_classifier(&classifier).unwrap();
    let got = vectors(&server.ok("/embed", json!({"inputs": TEXTS})));
    assert_vectors_close("/embed on a classifier", &got, &encoder.encode(&TEXTS).unwrap());
}

#[test]
fn tokenize_decode_health_info_and_metrics() {
    let server = Server::start(&model("cls"), &["--max-batch-requests", "8"]);
    let classifier = TextClassifier::from_pretrained(model("cls")).unwrap();
    let tokenizer = classifier.tokenizer();

    let text = TEXTS[4];
    let encoded = tokenizer.encode(text).unwrap();
    let got = server.ok("/tokenize", json!({"inputs": text}));
    let tokens = got[0].as_array().unwrap();
    assert_eq!(got.as_array().unwrap().len(), 1, "always nested");
    let ids: Vec<u32> = tokens.iter().map(|t| t["id"].as_u64().unwrap() as u32).collect();
    assert_eq!(ids, encoded.input_ids);
    for (i, t) in tokens.iter().enumerate() {
        let special = i == 0 || i == tokens.len() - 1;
        assert_eq!(t["special"], special, "{t}");
        if special {
            assert_eq!((&t["start"], &t["stop"]), (&Value::Null, &Value::Null));
            assert_eq!(t["text"], tokenizer.id_to_token(ids[i]).unwrap());
        } else {
            // Byte offsets into the text.
            let (start, stop) = (t["start"].as_u64().unwrap() as usize, t["stop"].as_u64().unwrap() as usize);
            assert_eq!(t["text"], &text[start..stop]);
        }
    }
    assert!(tokens.iter().any(|t| t["text"] == "é" || t["text"].as_str().unwrap().contains('é')), "{got}");
    let got = server.ok("/tokenize", json!({"inputs": [text, "a"], "add_special_tokens": false}));
    assert_eq!(got[0].as_array().unwrap().len(), tokens.len() - 2);
    assert_eq!(got[1].as_array().unwrap().len(), 1);

    let got = server.ok("/decode", json!({"ids": encoded.input_ids}));
    assert_eq!(got, json!([tokenizer.decode(&encoded.input_ids, true).unwrap()]));

    assert_eq!(server.get("/health"), (200, String::new()));

    let (status, info) = server.get("/info");
    assert_eq!(status, 200);
    let info: Value = serde_json::from_str(&info).unwrap();
    assert_eq!(info["model_id"], model("cls"));
    assert_eq!(info["max_input_length"], classifier.max_length());
    assert_eq!(info["max_batch_tokens"], 16384);
    assert_eq!(info["max_batch_requests"], 8);
    assert_eq!(info["max_client_batch_size"], 32);
    assert_eq!(info["max_concurrent_requests"], 512);
    assert_eq!(info["auto_truncate"], true);
    assert_eq!(info["version"], env!("CARGO_PKG_VERSION"));
    let id2label = &info["model_type"]["classifier"]["id2label"];
    for i in 0..classifier.config().num_labels() {
        assert_eq!(id2label[i.to_string()], classifier.config().label(i));
    }

    server.ok("/predict", json!({"inputs": [["a"], ["b"]]}));
    let (status, _) = server.post("/embed", r#"{"inputs": ""}"#);
    assert_eq!(status, 422);
    let (status, metrics) = server.get("/metrics");
    assert_eq!(status, 200);
    for line in [
        "te_request_count{method=\"batch\"} 1",
        "te_request_success{method=\"batch\"} 1",
        "te_predict_success 2",
        "te_request_failure{err=\"validation\"} 1",
        "te_queue_size 0",
        "te_request_duration_count 1",
    ] {
        assert!(metrics.lines().any(|l| l == line), "no `{line}` in\n{metrics}");
    }
    for name in
        ["te_batch_next_size_bucket", "te_request_input_length_sum", "te_request_queue_duration_bucket"]
    {
        assert!(metrics.contains(name), "no {name} in\n{metrics}");
    }
}

#[test]
fn errors_have_tei_statuses_and_bodies() {
    let server = Server::start(
        &model("cls"),
        &["--max-client-batch-size", "4", "--max-concurrent-requests", "3", "--payload-limit", "2000"],
    );
    let classifier = TextClassifier::from_pretrained(model("cls")).unwrap();
    let error = |path: &str, body: &str, status: u16, error_type: &str| {
        let (got, text) = server.post(path, body);
        assert_eq!(got, status, "POST {path} {body}: {text}");
        let value: Value = serde_json::from_str(&text).unwrap_or_else(|_| panic!("not JSON: {text}"));
        assert_eq!(value["error_type"], error_type, "{text}");
        value["error"].as_str().unwrap().to_string()
    };
    let message = error("/embed", r#"{"inputs": "a"#, 400, "Validation");
    assert!(message.contains("Failed to parse the request body as JSON"), "{message}");
    error("/embed", r#"{"input": "a"}"#, 422, "Validation");
    let message = error("/predict", r#"{"inputs": ["a", "b", "c"]}"#, 422, "Validation");
    assert!(message.contains("invalid length 3"), "{message}");
    let message = error("/embed", r#"{"inputs": ""}"#, 422, "Empty");
    assert_eq!(message, "Input validation error: `inputs` cannot be empty");
    error("/embed", r#"{"inputs": []}"#, 422, "Empty");
    error("/embed", r#"{"inputs": ["a", ""]}"#, 422, "Empty");
    // A batch over --max-client-batch-size: 422, as TEI 1.9 answers (TEI up to 1.8 said 413).
    let message = error("/embed", r#"{"inputs": ["a", "b", "c", "d", "e"]}"#, 422, "Validation");
    assert_eq!(message, "batch size 5 > maximum allowed batch size 4");
    // Four inputs pass the batch check; on an idle server they take the three permits in turn.
    let (status, text) = server.post("/embed", r#"{"inputs": ["a", "b", "c", "d"]}"#);
    assert_eq!(status, 200, "{text}");
    error("/predict", &json!({"inputs": "long ".repeat(500)}).to_string(), 413, "Validation");
    error("/embed", &json!({"inputs": [9_999_999]}).to_string(), 422, "Validation");
    let (status, text) = server.post_as("/embed", r#"{"inputs": "a"}"#, "text/plain");
    assert_eq!(status, 415, "{text}");

    // Past max_length: 422 when the request turns truncation off, truncated otherwise.
    let long = "good ".repeat(classifier.max_length());
    let n = classifier.tokenizer().encode(&long).unwrap();
    assert!(n.truncated);
    let message =
        error("/predict", &json!({"inputs": long, "truncate": false}).to_string(), 422, "Validation");
    assert!(
        message.starts_with(&format!(
            "Input validation error: `inputs` must have less than {} tokens. Given: ",
            classifier.max_length()
        )),
        "{message}"
    );
    let got = server.ok("/predict", json!({"inputs": long}));
    assert_predictions("truncated", &got, &classifier, &classifier.classify(&[&long]).unwrap()[0].scores);

    // OpenAI's route reports errors in OpenAI's shape.
    let (status, text) = server.post("/v1/embeddings", r#"{"input": ["a", "b", "c", "d", "e"]}"#);
    assert_eq!(status, 422);
    let value: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(
        value,
        json!({"message": "batch size 5 > maximum allowed batch size 4", "code": 422, "type": "Validation"})
    );

    assert_eq!(server.post("/nowhere", "{}").0, 404);
    assert_eq!(server.get("/embed").0, 405);

    // /predict needs a classifier.
    let encoder = Server::start(&model("sim"), &["--auto-truncate", "false"]);
    let (status, text) = encoder.post("/predict", r#"{"inputs": "a"}"#);
    assert_eq!(status, 424, "{text}");
    assert!(text.contains("Model is not a classifier model"), "{text}");
    // With --auto-truncate false, a request that does not say is not truncated.
    let long = "good ".repeat(100);
    let (status, text) = encoder.post("/embed", &json!({"inputs": long}).to_string());
    assert_eq!(status, 422, "{text}");
}

#[test]
fn concurrent_clients_each_get_their_own_answer() {
    let server = Arc::new(Server::start(&model("cls"), &[]));
    let classifier = TextClassifier::from_pretrained(model("cls")).unwrap();
    let encoder = SentenceEncoder::from_classifier(&classifier).unwrap();
    // Distinct sentences, so that an answer given to the wrong request shows.
    let words =
        ["good", "bad", "film", "boring", "great", "plot", "actors", "slow", "funny", "dull", "a", "the"];
    let sentences: Vec<String> = (0..96)
        .map(|i| {
            (0..1 + i % 9).map(|j| words[(i * 7 + j * 5) % words.len()]).collect::<Vec<_>>().join(" ")
                + &format!(" {i}")
        })
        .collect();
    let scores: Vec<Vec<f32>> =
        classifier.classify(&sentences).unwrap().into_iter().map(|c| c.scores).collect();
    let embeddings = encoder.encode(&sentences).unwrap();
    let (scores, embeddings, sentences) = (Arc::new(scores), Arc::new(embeddings), Arc::new(sentences));
    let classifier = Arc::new(classifier);

    let clients: Vec<_> = (0..24)
        .map(|client| {
            let (server, classifier) = (server.clone(), classifier.clone());
            let (scores, embeddings, sentences) = (scores.clone(), embeddings.clone(), sentences.clone());
            std::thread::spawn(move || {
                for k in 0..12 {
                    let i = (client * 12 + k) % sentences.len();
                    if k % 3 == 2 {
                        let got = vectors(&server.ok("/embed", json!({"inputs": sentences[i]})));
                        assert_vectors_close(&sentences[i], &got, &embeddings[i..i + 1]);
                    } else {
                        let got = server.ok("/predict", json!({"inputs": sentences[i]}));
                        assert_predictions(&sentences[i], &got, &classifier, &scores[i]);
                    }
                }
            })
        })
        .collect();
    for c in clients {
        c.join().unwrap();
    }
    let (_, metrics) = server.get("/metrics");
    assert!(metrics.lines().any(|l| l == "te_request_success{method=\"single\"} 288"), "{metrics}");
}

#[cfg(unix)]
#[test]
fn sigterm_finishes_the_request_in_flight_then_exits_0() {
    let mut server = Server::start(&model("cls"), &[]);
    let classifier = TextClassifier::from_pretrained(model("cls")).unwrap();
    let body = json!({"inputs": TEXTS[0]}).to_string();
    let mut stream = TcpStream::connect(server.address).unwrap();
    stream.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    // Headers and half the body: the request is in flight when the signal comes.
    write!(
        stream,
        "POST /predict HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n",
        body.len()
    )
    .unwrap();
    let (head, tail) = body.as_bytes().split_at(body.len() / 2);
    stream.write_all(head).unwrap();
    std::thread::sleep(Duration::from_millis(300));
    let killed = Command::new("kill").args(["-TERM", &server.child.id().to_string()]).status().unwrap();
    assert!(killed.success());
    std::thread::sleep(Duration::from_millis(300));
    assert!(server.child.try_wait().unwrap().is_none(), "exited with a request in flight");
    assert!(TcpStream::connect(server.address).is_err(), "still accepting connections after SIGTERM");

    stream.write_all(tail).unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    assert!(response.starts_with("HTTP/1.1 200"), "{response}");
    let json = &response[response.find("\r\n\r\n").unwrap() + 4..];
    let got: Value = serde_json::from_str(json).unwrap();
    assert_predictions("in flight", &got, &classifier, &classifier.classify(&[TEXTS[0]]).unwrap()[0].scores);

    let status = server.child.wait().unwrap();
    assert!(status.success(), "{status}: {}", server.stderr.lock().unwrap());
}

#[test]
fn clients_that_disconnect_do_not_stall_the_queue() {
    let server = Server::start(&model("cls"), &[]);
    let classifier = TextClassifier::from_pretrained(model("cls")).unwrap();
    let body = json!({"inputs": TEXTS.iter().cycle().take(32).collect::<Vec<_>>()}).to_string();
    // Whole requests whose clients hang up at once, without reading their answers.
    for _ in 0..16 {
        let mut stream = TcpStream::connect(server.address).unwrap();
        write!(
            stream,
            "POST /predict HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
            body.len()
        )
        .unwrap();
        drop(stream);
    }
    // The next client is answered, rightly, and the queue drains.
    let got = server.ok("/predict", json!({"inputs": TEXTS[1]}));
    assert_predictions(
        "after hang-ups",
        &got,
        &classifier,
        &classifier.classify(&[TEXTS[1]]).unwrap()[0].scores,
    );
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        let (_, metrics) = server.get("/metrics");
        if metrics.lines().any(|l| l == "te_queue_size 0") {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "the queue did not drain: {metrics}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn splade_answers_embed_sparse_as_transformers() {
    let want: Value =
        serde_json::from_str(&std::fs::read_to_string(format!("{}/splade.json", model("mlm"))).unwrap())
            .unwrap();
    // Without the empty text, which TEI's API refuses.
    let (texts, want): (Vec<&str>, Vec<&Value>) = want["texts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t.as_str().unwrap())
        .zip(want["sparse"].as_array().unwrap())
        .filter(|(t, _)| !t.is_empty())
        .unzip();
    let server = Server::start(&model("mlm"), &["--pooling", "splade", "--max-client-batch-size", "64"]);
    let got = server.ok("/embed_sparse", json!({"inputs": texts}));
    let got = got.as_array().unwrap();
    assert_eq!(got.len(), texts.len());
    for ((text, got), want) in texts.iter().zip(got).zip(want) {
        let (got, want) = (got.as_array().unwrap(), want.as_array().unwrap());
        assert_eq!(got.len(), want.len(), "{text:?}: the non-zero entries");
        for (g, w) in got.iter().zip(want) {
            assert_eq!(g["index"], w[0], "{text:?}");
            let (g, w) = (g["value"].as_f64().unwrap(), w[1].as_f64().unwrap());
            assert!((g - w).abs() < 1e-5, "{text:?}: {g} vs {w}");
        }
    }
    // One input, and POST /, answer the same.
    let one = server.ok("/embed_sparse", json!({"inputs": texts[0]}));
    assert_eq!(one[0], got[0]);
    assert_eq!(server.ok("/", json!({"inputs": texts[0]})), one);
    // /embed gives the dense vector, unnormalised only, as TEI; /embed_all and /predict are 424.
    let dense = server.ok("/embed", json!({"inputs": texts[0], "normalize": false}));
    let dense = vector(&dense[0]);
    assert_eq!(dense.len(), 1131);
    for entry in got[0].as_array().unwrap() {
        let (i, v) = (entry["index"].as_u64().unwrap() as usize, entry["value"].as_f64().unwrap() as f32);
        assert_eq!(dense[i], v);
    }
    assert_eq!(dense.iter().filter(|&&v| v != 0.0).count(), got[0].as_array().unwrap().len());
    for (path, body, message) in [
        ("/embed", json!({"inputs": "a"}), "`normalize` is not available for SPLADE models"),
        ("/embed_all", json!({"inputs": "a"}), "`embed_all` is not available for SPLADE models"),
        ("/predict", json!({"inputs": "a"}), "Model is not a classifier model"),
        ("/v1/embeddings", json!({"input": "a"}), "`normalize` is not available for SPLADE models"),
    ] {
        let (status, text) = server.post(path, &body.to_string());
        assert_eq!(status, 424, "{path}: {text}");
        assert!(text.contains(message), "{path}: {text}");
    }
    let (status, info) = server.get("/info");
    assert_eq!(status, 200);
    let info: Value = serde_json::from_str(&info).unwrap();
    assert_eq!(info["model_type"], json!({"embedding": {"pooling": "splade"}}));

    // Elsewhere /embed_sparse is 424; splade needs a masked-LM checkpoint.
    let classifier = Server::start(&model("cls"), &[]);
    let (status, text) = classifier.post("/embed_sparse", &json!({"inputs": "a"}).to_string());
    assert_eq!(status, 424, "{text}");
    assert!(text.contains("Model is not an embedding model with SPLADE pooling"), "{text}");
    let out = Command::new(env!("CARGO_BIN_EXE_roformer-serve"))
        .args(["--model", &model("cls"), "--port", "0", "--pooling", "splade"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && stderr.contains("not a ForMaskedLM model"), "{stderr}");
}
