//! TEI's surface beyond the original routes: /rerank, /similarity, /embed_all, prompt names,
//! the API key, CORS, the OpenAPI document, the 422 of an oversized batch, admission (429) and
//! read timeouts.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::Arc;
use std::time::{Duration, Instant};

use roformer::{cosine_similarity, Inputs, PipelineOptions, Reranker, SentenceEncoder, TextClassifier};
use serde_json::{json, Value};

use crate::*;

const DOCS: [&str; 5] =
    ["the movie was terrible", "a great film", "the cat sat on the mat", "a great film", "what a good movie"];

#[test]
fn rerank_answers_as_the_reranker_sorted_best_first() {
    let server = Server::start(&st_model("cross_encoder"), &[]);
    let reranker = Reranker::from_pretrained(st_model("cross_encoder")).unwrap();
    let query = "a good movie";
    for raw in [false, true] {
        let want =
            if raw { reranker.rank_raw(query, &DOCS).unwrap() } else { reranker.rank(query, &DOCS).unwrap() };
        let got = server.ok("/rerank", json!({"query": query, "texts": DOCS, "raw_scores": raw}));
        let got = got.as_array().unwrap();
        assert_eq!(got.len(), DOCS.len());
        for (g, w) in got.iter().zip(&want) {
            assert_eq!(g["index"], w.index, "raw {raw}: order {got:?}");
            let score = g["score"].as_f64().unwrap() as f32;
            assert!((score - w.score).abs() <= TOLERANCE, "raw {raw}: {score} vs {}", w.score);
            assert!(g.get("text").is_none(), "{g}");
        }
        let scores: Vec<f64> = got.iter().map(|g| g["score"].as_f64().unwrap()).collect();
        assert!(scores.windows(2).all(|w| w[0] >= w[1]), "not sorted: {scores:?}");
    }
    // sentence-transformers' CrossEncoder.predict, from the committed fixture.
    let expected: Value = serde_json::from_str(
        &std::fs::read_to_string(format!("{}/expected.json", st_model("cross_encoder"))).unwrap(),
    )
    .unwrap();
    let pairs = expected["pairs"].as_array().unwrap();
    let scores = expected["scores"].as_array().unwrap();
    for (pair, want) in pairs.iter().zip(scores).take(5) {
        let (q, t) = (pair[0].as_str().unwrap(), pair[1].as_str().unwrap());
        let got = server.ok("/rerank", json!({"query": q, "texts": [t], "return_text": true}));
        assert_eq!(got[0]["text"], t);
        let score = got[0]["score"].as_f64().unwrap();
        assert!((score - want.as_f64().unwrap()).abs() <= 1e-4, "{q} / {t}: {score} vs {want}");
    }
    // An empty text is scored, as TEI scores it: the pair [CLS] query [SEP] [SEP], as CrossEncoder
    // encodes it (the fixture's last pair).
    let (pair, want) = (pairs.last().unwrap(), scores.last().unwrap().as_f64().unwrap());
    assert_eq!(pair[1], "");
    let got = server.ok("/rerank", json!({"query": pair[0], "texts": ["", DOCS[0]]}));
    let empty = got.as_array().unwrap().iter().find(|r| r["index"] == 0).unwrap();
    assert!((empty["score"].as_f64().unwrap() - want).abs() <= 1e-4, "{got:?} vs {want}");
    // POST / on a reranker is /rerank; /predict works too (one label).
    let got = server.ok("/", json!({"query": query, "texts": DOCS}));
    assert_eq!(got.as_array().unwrap().len(), DOCS.len());
    server.ok("/predict", json!({"inputs": [query, DOCS[0]]}));
    assert_eq!(server.post("/rerank", r#"{"query": "q", "texts": []}"#).0, 422);

    // A model that is no reranker: 424.
    let classifier = Server::start(&model("cls"), &[]);
    let (status, text) = classifier.post("/rerank", &json!({"query": query, "texts": DOCS}).to_string());
    assert_eq!(status, 424, "{text}");
}

#[test]
fn rerank_follows_a_cross_encoder_folders_transformer_module() {
    // sentence_bert_config.json's max_seq_length (8) and do_lower_case over a cased tokenizer.json: the
    // server tokenizes as sentence-transformers' CrossEncoder does, from the committed reference.
    let expected: Value = serde_json::from_str(
        &std::fs::read_to_string(format!("{}/expected.json", st_model("cross_encoder"))).unwrap(),
    )
    .unwrap();
    let want = &expected["transformer_config"];
    let dir = std::env::temp_dir().join(format!("roformer-serve-ce-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    for entry in std::fs::read_dir(st_model("cross_encoder")).unwrap().flatten() {
        std::fs::copy(entry.path(), dir.join(entry.file_name())).unwrap();
    }
    let edit = |name: &str, edit: &dyn Fn(&mut Value)| {
        let path = dir.join(name);
        let mut value: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        edit(&mut value);
        std::fs::write(&path, value.to_string()).unwrap();
    };
    edit("sentence_bert_config.json", &|c| {
        want["sentence_bert_config"].as_object().unwrap().iter().for_each(|(k, v)| c[k] = v.clone())
    });
    edit("tokenizer.json", &|t| t["normalizer"]["lowercase"] = want["tokenizer_lowercase"].clone());
    let server = Server::start(dir.to_str().unwrap(), &[]);
    for (pair, score) in want["pairs"].as_array().unwrap().iter().zip(want["scores"].as_array().unwrap()) {
        let (q, t) = (pair[0].as_str().unwrap(), pair[1].as_str().unwrap());
        let got = server.ok("/rerank", json!({"query": q, "texts": [t], "truncate": true}));
        let got = got[0]["score"].as_f64().unwrap();
        assert!((got - score.as_f64().unwrap()).abs() <= 1e-4, "{q} / {t}: {got} vs {score}");
    }
    drop(server);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn the_pooling_flag_overrides_a_sentence_transformers_folders_pooling_as_in_tei() {
    // The mean-pooled folder under --pooling cls gives what sentence-transformers gives with a CLS Pooling
    // module over the same transformer (the committed reference).
    let expected: Value = serde_json::from_str(
        &std::fs::read_to_string(format!("{}/expected.json", st_model("old_mean"))).unwrap(),
    )
    .unwrap();
    let cls = expected["variants"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| {
            v["pooling_config"]["pooling_mode"] == "cls" && v["pooling_config"]["include_prompt"] == true
        })
        .unwrap();
    let server = Server::start(&st_model("old_mean"), &["--pooling", "cls"]);
    // TEI refuses an empty input; the long one is cut at the folder's 24 tokens, as truncate asks.
    let (texts, want): (Vec<&str>, Vec<Vec<f32>>) = expected["texts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t.as_str().unwrap())
        .zip(vectors(&cls["embeddings"]))
        .filter(|(t, _)| !t.is_empty())
        .unzip();
    let got = vectors(&server.ok("/embed", json!({"inputs": texts, "normalize": false, "truncate": true})));
    assert_eq!(got.len(), want.len());
    for (i, (g, w)) in got.iter().zip(&want).enumerate() {
        let diff = g.iter().zip(w).map(|(a, b)| (a - b).abs()).fold(0f32, f32::max);
        assert!(diff <= 1e-4, "text {i}: max abs diff {diff:e}");
    }
    let (status, info) = server.get("/info");
    assert_eq!(status, 200, "{info}");
    let info: Value = serde_json::from_str(&info).unwrap();
    assert_eq!(info["model_type"]["embedding"]["pooling"], "cls", "{info}");
}

#[test]
fn similarity_embed_all_and_prompts_answer_as_the_library() {
    let server = Server::start(&model("sim"), &[]);
    let encoder =
        SentenceEncoder::from_pretrained_with(model("sim"), PipelineOptions::default().with_normalize(false))
            .unwrap();
    let pooled = encoder.encode(&TEXTS).unwrap();
    let got =
        server.ok("/similarity", json!({"inputs": {"source_sentence": TEXTS[0], "sentences": &TEXTS[1..]}}));
    let got = vector(&got);
    assert_eq!(got.len(), TEXTS.len() - 1);
    for (i, g) in got.iter().enumerate() {
        let want = cosine_similarity(&pooled[0], &pooled[i + 1]);
        assert!((g - want).abs() <= TOLERANCE, "/similarity[{i}]: {g} vs {want}");
    }
    let (status, _) = server.post("/similarity", r#"{"inputs": {"source_sentence": "a", "sentences": []}}"#);
    assert_eq!(status, 422);

    // Every token's last hidden state, special tokens included: the inputs of mixed lengths run in
    // the pipeline's batches, and each answer is the library's, and that input's forward pass alone.
    let model_ = encoder.model();
    let got = server.ok("/embed_all", json!({"inputs": TEXTS}));
    let got = got.as_array().unwrap();
    assert_eq!(got.len(), TEXTS.len());
    let encodings = encoder.tokenizer().encode_batch(&TEXTS).unwrap();
    let library = encoder.token_embeddings_tokenized(&encodings).unwrap();
    for ((g, text), (encoded, library)) in got.iter().zip(TEXTS).zip(encodings.iter().zip(&library)) {
        let ids = candle_core::Tensor::new(encoded.input_ids.as_slice(), model_.device())
            .unwrap()
            .unsqueeze(0)
            .unwrap();
        let want = model_.forward(Inputs::new(&ids)).unwrap().squeeze(0).unwrap().to_vec2::<f32>().unwrap();
        let rows = vectors_of(g);
        assert_eq!(rows.len(), encoded.len(), "{text}: one row per token");
        assert_vectors_close(&format!("/embed_all {text}"), &rows, &want);
        assert_vectors_close(&format!("/embed_all {text}, the library's"), &rows, library);
    }
    // Token ids as given.
    let got = server.ok("/embed_all", json!({"inputs": [&encodings[2].input_ids]}));
    assert_vectors_close("/embed_all ids", &vectors_of(&got[0]), &library[2]);
    let single = server.ok("/embed_all", json!({"inputs": TEXTS[2]}));
    assert_eq!(single.as_array().unwrap().len(), 1, "a single input is nested too");

    // A folder without prompts refuses a prompt name.
    let (status, text) = server.post("/embed", &json!({"inputs": "a", "prompt_name": "query"}).to_string());
    assert_eq!(status, 422, "{text}");

    // A sentence-transformers folder with prompts: one encoder answers each request with its prompt,
    // and TEI's `normalize` (true unless asked otherwise) scales the vectors to unit length, whatever
    // modules the folder lists.
    let st = Server::start(&st_model("old_mean"), &[]);
    for name in ["query", "passage"] {
        let options = PipelineOptions::default().with_prompt_name(name).with_normalize(false);
        let want: Vec<Vec<f32>> = SentenceEncoder::from_pretrained_with(st_model("old_mean"), options)
            .unwrap()
            .encode(&TEXTS[..3])
            .unwrap()
            .into_iter()
            .map(|v| {
                let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
                v.into_iter().map(|x| x / norm).collect()
            })
            .collect();
        let got = vectors(&st.ok("/embed", json!({"inputs": &TEXTS[..3], "prompt_name": name})));
        assert_vectors_close(&format!("/embed prompt {name}"), &got, &want);
        let answer = st.ok("/v1/embeddings", json!({"input": &TEXTS[..3], "prompt_name": name}));
        let got: Vec<Vec<f32>> =
            answer["data"].as_array().unwrap().iter().map(|d| vector(&d["embedding"])).collect();
        assert_vectors_close(&format!("/v1/embeddings prompt {name}"), &got, &want);
    }
    let (status, text) = st.post("/embed", &json!({"inputs": "a", "prompt_name": "nope"}).to_string());
    assert_eq!(status, 422, "{text}");
    assert!(text.contains("query"), "names the prompts there are: {text}");
}

fn vectors_of(value: &Value) -> Vec<Vec<f32>> {
    value.as_array().unwrap().iter().map(vector).collect()
}

#[test]
fn api_key_cors_and_the_openapi_document() {
    let server =
        Server::start(&model("cls"), &["--api-key", "s3cret", "--cors-allow-origin", "https://example.com"]);
    let body = json!({"inputs": "a great film"}).to_string();
    let json_type = ("content-type", "application/json");
    let (status, _, _) = server.request("POST", "/predict", &[json_type], &body);
    assert_eq!(status, 401, "no key");
    let (status, _, _) =
        server.request("POST", "/predict", &[json_type, ("authorization", "Bearer wrong")], &body);
    assert_eq!(status, 401, "wrong key");
    let (status, _, text) =
        server.request("POST", "/predict", &[json_type, ("authorization", "Bearer s3cret")], &body);
    assert_eq!(status, 200, "{text}");
    // Health and metrics stay open, as in TEI.
    assert_eq!(server.get("/health").0, 200);
    assert_eq!(server.get("/metrics").0, 200);
    assert_eq!(server.get("/info").0, 401);

    // A browser's preflight carries no key; it is answered for the allowed origin only.
    let preflight = |origin: &str| {
        let (status, headers, _) = server.request(
            "OPTIONS",
            "/embed",
            &[
                ("origin", origin),
                ("access-control-request-method", "POST"),
                ("access-control-request-headers", "authorization,content-type"),
            ],
            "",
        );
        let allow = headers.iter().find(|(k, _)| k == "access-control-allow-origin").map(|(_, v)| v.clone());
        (status, allow)
    };
    let (status, allow) = preflight("https://example.com");
    assert_eq!(status, 200);
    assert_eq!(allow.as_deref(), Some("https://example.com"));
    assert_eq!(preflight("https://evil.example").1, None);

    // The document (open to all, as /health is) is served, and every route answers with the key.
    let (status, doc) = server.get("/api-doc/openapi.json");
    assert_eq!(status, 200);
    let doc: Value = serde_json::from_str(&doc).unwrap();
    assert!(doc["paths"].as_object().is_some_and(|p| p.contains_key("/embed")));
    for (method, path) in crate::openapi::ROUTES {
        let auth = ("authorization", "Bearer s3cret");
        let (status, _, _) = server.request(&method.to_uppercase(), path, &[json_type, auth], "{}");
        assert!(status != 404 && status != 405, "{method} {path}: {status}");
    }
    let (status, page) = server.get("/docs");
    assert_eq!(status, 200);
    assert!(page.contains("/api-doc/openapi.json"), "{page}");
}

#[test]
fn oversized_batches_get_422_whatever_their_shape_and_top_k_is_honoured() {
    let server = Server::start(&model("cls"), &[]);
    let classifier = TextClassifier::from_pretrained(model("cls")).unwrap();
    let texts: Vec<String> = (0..5000).map(|i| format!("sentence {i}")).collect();
    let nested: Vec<Vec<&str>> = texts.iter().map(|t| vec![t.as_str()]).collect();
    for (path, body) in [
        ("/predict", json!({"inputs": texts})),
        ("/predict", json!({"inputs": nested})),
        ("/embed", json!({"inputs": texts})),
        ("/v1/embeddings", json!({"input": texts})),
        ("/tokenize", json!({"inputs": texts})),
    ] {
        let (status, text) = server.post(path, &body.to_string());
        assert_eq!(status, 422, "{path}: {}", &text[..text.len().min(200)]);
        assert!(text.contains("batch size 5000 > maximum allowed batch size 32"), "{path}: {text}");
    }
    // Three strings are neither a text, a pair nor a batch: still 422.
    assert_eq!(server.post("/predict", r#"{"inputs": ["a", "b", "c"]}"#).0, 422);

    // huggingface_hub's text_classification posts `parameters.top_k` to POST /.
    let want = classifier.classify(&["a great film"]).unwrap();
    let got = server.ok("/", json!({"inputs": "a great film", "parameters": {"top_k": 1}}));
    let got = got.as_array().unwrap();
    assert_eq!(got.len(), 1, "{got:?}");
    assert_eq!(got[0]["label"], want[0].label);
}

#[test]
fn an_idle_server_takes_a_batch_larger_than_its_permits_and_429_means_all_are_taken() {
    let server = Arc::new(Server::start(
        &model("cls"),
        &["--max-concurrent-requests", "1", "--max-batch-requests", "1", "--max-client-batch-size", "256"],
    ));
    let classifier = TextClassifier::from_pretrained(model("cls")).unwrap();
    let batch: Vec<String> =
        (0..256).map(|i| format!("{} {i}", "a rather long sentence about a film ".repeat(8))).collect();
    let want = classifier.classify(&batch).unwrap();
    let got = server.ok("/predict", json!({"inputs": batch.iter().map(|t| vec![t]).collect::<Vec<_>>()}));
    let got = got.as_array().unwrap();
    assert_eq!(got.len(), 256);
    for (i, (g, w)) in got.iter().zip(&want).enumerate() {
        assert_predictions(&format!("batch[{i}]"), g, &classifier, &w.scores);
    }

    // While that batch runs input by input on its one permit, a request that finds the permit
    // taken is refused; every request gets 200 or 429.
    let runner = {
        let (server, body) =
            (server.clone(), json!({"inputs": batch.iter().map(|t| vec![t]).collect::<Vec<_>>()}));
        // It may itself find the permit taken by a probe below; then it tries again.
        std::thread::spawn(move || {
            let mut status = 0;
            for _ in 0..100 {
                status = server.post("/predict", &body.to_string()).0;
                if status != 429 {
                    break;
                }
            }
            status
        })
    };
    let mut refused = 0;
    let start = Instant::now();
    while !runner.is_finished() && start.elapsed() < Duration::from_secs(60) {
        let (status, text) = server.post("/predict", r#"{"inputs": "a"}"#);
        assert!(status == 200 || status == 429, "{status}: {text}");
        if status == 429 {
            assert!(text.contains("Model is overloaded"), "{text}");
            refused += 1;
        }
    }
    assert_eq!(runner.join().unwrap(), 200);
    assert!(refused > 0, "no request was refused while the one permit was taken");
}

#[test]
fn slow_clients_are_cut_off() {
    let server = Server::start(&model("cls"), &["--header-read-timeout", "1", "--body-read-timeout", "1"]);
    // Headers a few bytes at a time: the connection closes, with no answer.
    let mut stream = TcpStream::connect(server.address).unwrap();
    stream.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let start = Instant::now();
    let head = b"POST /predict HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n";
    let mut closed = false;
    for chunk in head.chunks(4) {
        if stream.write_all(chunk).is_err() {
            closed = true;
            break;
        }
        std::thread::sleep(Duration::from_millis(300));
        if start.elapsed() > Duration::from_secs(3) {
            break;
        }
    }
    if !closed {
        let mut rest = Vec::new();
        let read = stream.read_to_end(&mut rest);
        closed = read.is_err() || rest.is_empty() || rest.starts_with(b"HTTP/1.1 408");
    }
    assert!(closed, "headers sent slowly kept the connection");
    assert!(start.elapsed() < Duration::from_secs(10), "took {:?}", start.elapsed());

    // Headers in time, the body not: 408.
    let mut stream = TcpStream::connect(server.address).unwrap();
    stream.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    write!(stream, "POST /predict HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: 100\r\n\r\n{{\"in").unwrap();
    let start = Instant::now();
    let mut response = String::new();
    let _ = stream.read_to_string(&mut response);
    assert!(response.starts_with("HTTP/1.1 408"), "{response}");
    assert!(start.elapsed() < Duration::from_secs(10), "took {:?}", start.elapsed());

    // Prompt clients are not affected.
    server.ok("/predict", json!({"inputs": "a great film"}));
}
