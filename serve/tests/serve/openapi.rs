//! The OpenAPI document against the server, without schemathesis (scripts/checks/check_openapi.sh runs
//! schemathesis itself): every route the loaded model serves in it and nothing else, TEI's error
//! body for every error status, and requests the server refuses or answers get a status the
//! document lists and a body its schema accepts.

use serde_json::{json, Value};

use crate::*;

/// Every route the router serves.
pub const ROUTES: [(&str, &str); 18] = [
    ("post", "/"),
    ("get", "/"),
    ("post", "/embed"),
    ("post", "/embed_all"),
    ("post", "/embed_sparse"),
    ("post", "/predict"),
    ("post", "/rerank"),
    ("post", "/similarity"),
    ("post", "/v1/embeddings"),
    ("post", "/embeddings"),
    ("post", "/tokenize"),
    ("post", "/decode"),
    ("get", "/health"),
    ("get", "/ping"),
    ("get", "/info"),
    ("get", "/metrics"),
    ("get", "/docs"),
    ("get", "/api-doc/openapi.json"),
];

/// Follows `$ref`s within the document.
fn resolve<'a>(doc: &'a Value, schema: &'a Value) -> &'a Value {
    match schema.get("$ref").and_then(Value::as_str) {
        Some(r) => resolve(doc, doc.pointer(r.trim_start_matches('#')).unwrap_or_else(|| panic!("no {r}"))),
        None => schema,
    }
}

/// Whether `value` fits `schema`, for the keywords the document uses: type, enum, required,
/// properties, items, prefixItems, oneOf, allOf, anyOf, minItems, maxItems, minLength, minimum,
/// maximum.
fn fits(doc: &Value, schema: &Value, value: &Value) -> bool {
    let schema = resolve(doc, schema);
    if let Some(one_of) = schema.get("oneOf").and_then(Value::as_array) {
        return one_of.iter().filter(|s| fits(doc, s, value)).count() == 1;
    }
    if let Some(all_of) = schema.get("allOf").and_then(Value::as_array) {
        return all_of.iter().all(|s| fits(doc, s, value));
    }
    if let Some(any_of) = schema.get("anyOf").and_then(Value::as_array) {
        return any_of.iter().any(|s| fits(doc, s, value));
    }
    if let Some(types) = schema.get("type") {
        let types: Vec<&str> = match types {
            Value::String(t) => vec![t.as_str()],
            Value::Array(ts) => ts.iter().filter_map(Value::as_str).collect(),
            _ => vec![],
        };
        let ok = types.iter().any(|t| match *t {
            "null" => value.is_null(),
            "boolean" => value.is_boolean(),
            "integer" => value.as_f64().is_some_and(|x| x.fract() == 0.0),
            "number" => value.is_number(),
            "string" => value.is_string(),
            "array" => value.is_array(),
            "object" => value.is_object(),
            _ => false,
        });
        if !ok {
            return false;
        }
    }
    if let Some(values) = schema.get("enum").and_then(Value::as_array) {
        if !values.contains(value) {
            return false;
        }
    }
    let bound = |key: &str| schema.get(key).and_then(Value::as_f64);
    if let Some(x) = value.as_f64() {
        if bound("minimum").is_some_and(|m| x < m) || bound("maximum").is_some_and(|m| x > m) {
            return false;
        }
    }
    if let Some(s) = value.as_str() {
        if bound("minLength").is_some_and(|m| (s.chars().count() as f64) < m) {
            return false;
        }
    }
    if let Some(items) = value.as_array() {
        let n = items.len() as f64;
        if bound("minItems").is_some_and(|m| n < m) || bound("maxItems").is_some_and(|m| n > m) {
            return false;
        }
        // `prefixItems` holds the first items' schemas, `items` the rest's.
        let prefix = schema.get("prefixItems").and_then(Value::as_array).map_or(&[][..], Vec::as_slice);
        if !items.iter().zip(prefix).all(|(v, s)| fits(doc, s, v)) {
            return false;
        }
        if let Some(item) = schema.get("items") {
            if !items.iter().skip(prefix.len()).all(|v| fits(doc, item, v)) {
                return false;
            }
        }
    }
    if let Some(object) = value.as_object() {
        let required = schema.get("required").and_then(Value::as_array).cloned().unwrap_or_default();
        if !required.iter().filter_map(Value::as_str).all(|k| object.contains_key(k)) {
            return false;
        }
        if let Some(properties) = schema.get("properties").and_then(Value::as_object) {
            for (key, v) in object {
                if properties.get(key).is_some_and(|p| !fits(doc, p, v)) {
                    return false;
                }
            }
        }
    }
    true
}

fn operation<'a>(doc: &'a Value, method: &str, path: &str) -> &'a Value {
    doc["paths"]
        .get(path)
        .and_then(|p| p.get(method))
        .unwrap_or_else(|| panic!("{method} {path} undocumented"))
}

fn request_schema<'a>(doc: &'a Value, path: &str) -> &'a Value {
    &operation(doc, "post", path)["requestBody"]["content"]["application/json"]["schema"]
}

/// POSTs `body` with `content_type`: the status must be documented, and the body must fit its
/// schema. Returns the status.
fn documented(server: &Server, doc: &Value, path: &str, body: &str, content_type: &str) -> u16 {
    let (status, text) = server.post_as(path, body, content_type);
    let responses = &operation(doc, "post", path)["responses"];
    let response = responses
        .get(status.to_string())
        .unwrap_or_else(|| panic!("POST {path} {body}: {status} is not documented ({text})"));
    let schema = &response["content"]["application/json"]["schema"];
    let value: Value =
        serde_json::from_str(&text).unwrap_or_else(|_| panic!("POST {path}: not JSON: {text}"));
    assert!(fits(doc, schema, &value), "POST {path} {body}: {status} {text} does not fit {schema}");
    status
}

fn document(server: &Server) -> Value {
    let (status, text) = server.get("/api-doc/openapi.json");
    assert_eq!(status, 200);
    serde_json::from_str(&text).unwrap()
}

/// The routes a model of each kind does not serve, left out of its document (they answer 424).
fn unserved(kind: &str) -> &'static [&'static str] {
    match kind {
        "classifier" => &["/rerank", "/embed_sparse"],
        "reranker" => &["/embed_sparse"],
        "embedding" => &["/predict", "/rerank", "/embed_sparse"],
        "splade" => &["/predict", "/rerank", "/embed", "/embed_all", "/v1/embeddings", "/embeddings"],
        _ => unreachable!(),
    }
}

/// The document lists exactly the routes the model serves, and every route answers.
fn assert_lists_what_it_serves(server: &Server, doc: &Value, kind: &str) {
    let paths = doc["paths"].as_object().unwrap();
    let mut listed = 0;
    for (method, path) in ROUTES {
        let missing = unserved(kind).contains(&path) && method == "post";
        assert_eq!(paths.get(path).and_then(|p| p.get(method)).is_none(), missing, "{kind}: {method} {path}");
        listed += usize::from(!missing);
        // And the route answers (not 404, nor 405).
        let (status, _, _) =
            server.request(&method.to_uppercase(), path, &[("content-type", "application/json")], "{}");
        assert!(status != 404 && status != 405, "{method} {path}: {status}");
    }
    let operations: usize = paths.values().map(|p| p.as_object().unwrap().len()).sum();
    assert_eq!(operations, listed, "{kind}: routes the server does not serve: {:?}", paths.keys());
}

#[test]
fn each_model_s_document_lists_the_routes_it_serves() {
    for (model, flags, kind) in [
        (st_model("cross_encoder"), &[][..], "reranker"),
        (st_model("st6_cls_dense"), &[][..], "embedding"),
        (model("mlm"), &["--pooling", "splade"][..], "splade"),
    ] {
        let server = Server::start(&model, flags);
        assert_lists_what_it_serves(&server, &document(&server), kind);
    }
}

#[test]
fn the_document_lists_every_route_and_every_error_body() {
    let server = Server::start(&model("cls"), &["--max-client-batch-size", "4"]);
    let doc = document(&server);
    assert_lists_what_it_serves(&server, &doc, "classifier");

    // TEI's error body, with its fields required, for every error status of every POST route.
    let error = &doc["components"]["schemas"]["ErrorResponse"];
    assert_eq!(error["required"], json!(["error", "error_type"]));
    for (method, path) in ROUTES.iter().filter(|(m, p)| *m == "post" && !unserved("classifier").contains(p)) {
        let responses = &operation(&doc, method, path)["responses"];
        for status in ["400", "413", "415", "422", "424", "429", "500"] {
            let schema = &responses[status]["content"]["application/json"]["schema"];
            let want = if path.ends_with("embeddings") { "OpenAiErrorResponse" } else { "ErrorResponse" };
            assert_eq!(schema["$ref"], format!("#/components/schemas/{want}"), "{method} {path} {status}");
        }
    }

    // The bounds of this server: a batch of at most 4, token ids below the vocabulary, top_k of at
    // least 1, inputs not empty. The document refuses what the server refuses.
    let vocab = TextClassifier::from_pretrained(model("cls")).unwrap().config().vocab_size as u64;
    let embed = request_schema(&doc, "/embed");
    for (body, ok) in [
        (json!({"inputs": "a"}), true),
        (json!({"inputs": ["a", "b", "c", "d"]}), true),
        (json!({"inputs": [1, 2, vocab - 1]}), true),
        (json!({"inputs": ""}), false),
        (json!({"inputs": []}), false),
        (json!({"inputs": ["a", ""]}), false),
        (json!({"inputs": ["a", "b", "c", "d", "e"]}), false),
        (json!({"inputs": [vocab]}), false),
        (json!({"inputs": "a", "dimensions": 0}), false),
        (json!({"inputs": "a", "truncation_direction": "left"}), false),
        (json!({"inputs": "a", "prompt_name": "query"}), false),
        // serde would read a struct from an array of its fields.
        (json!(["a"]), false),
    ] {
        assert_eq!(fits(&doc, embed, &body), ok, "{body}");
        let status = documented(&server, &doc, "/embed", &body.to_string(), "application/json");
        assert_eq!(status == 200, ok, "/embed {body}: {status}");
    }
    let predict = request_schema(&doc, "/predict");
    for (body, ok) in [
        (json!({"inputs": ["a", "b"], "parameters": {"top_k": 1}}), true),
        (json!({"inputs": [["a"], ["b", "c"]]}), true),
        (json!({"inputs": "a", "parameters": {"top_k": 0}}), false),
        (json!({"inputs": ["a", "b", "c"]}), false),
        // A pair is empty only when both its texts are, as TEI has it.
        (json!({"inputs": ["a", ""]}), true),
        (json!({"inputs": [["", "b"], ["c"]]}), true),
        (json!({"inputs": ["", ""]}), false),
        (json!({"inputs": [["a", "b"], [""]]}), false),
        (json!({"inputs": []}), false),
        (json!({"inputs": "a", "parameters": []}), false),
        (json!({"inputs": "a", "parameters": {"top_k": 2.0}}), true),
    ] {
        assert_eq!(fits(&doc, predict, &body), ok, "{body}");
        let status = documented(&server, &doc, "/predict", &body.to_string(), "application/json");
        assert_eq!(status == 200, ok, "/predict {body}: {status}");
    }
    // Not JSON, malformed JSON, an oversized batch, a route the model does not serve: each status
    // documented, each body TEI's (OpenAI's on its route).
    assert_eq!(documented(&server, &doc, "/embed", r#"{"inputs": "a"}"#, "text/plain"), 415);
    assert_eq!(documented(&server, &doc, "/embed", r#"{"inputs": "#, "application/json"), 400);
    assert_eq!(documented(&server, &doc, "/v1/embeddings", r#"{"input": "a"}"#, "text/plain"), 415);
    let five = json!({"input": ["a", "b", "c", "d", "e"]}).to_string();
    assert_eq!(documented(&server, &doc, "/v1/embeddings", &five, "application/json"), 422);
    // A route the model does not serve answers as TEI's does, 424 with TEI's error body; a body
    // that route refuses gets 422 first.
    let rerank = json!({"query": "a", "texts": ["b"]}).to_string();
    let (status, text) = server.post("/rerank", &rerank);
    assert_eq!(status, 424, "{text}");
    assert!(fits(
        &doc,
        &doc["components"]["schemas"]["ErrorResponse"],
        &serde_json::from_str(&text).unwrap()
    ));
    for body in [
        json!({"query": "", "texts": ["b"]}),
        json!({"query": "a", "texts": []}),
        json!({"query": "a", "texts": ["b"], "truncation_direction": "left"}),
    ] {
        assert_eq!(server.post("/rerank", &body.to_string()).0, 422, "{body}");
    }
    // POST / is the model's own route.
    assert_eq!(request_schema(&doc, "/"), predict);
    assert_eq!(documented(&server, &doc, "/", r#"{"inputs": "a"}"#, "application/json"), 200);
}

#[test]
fn the_document_names_the_prompts_it_serves() {
    let st = Server::start(&st_model("st6_cls_dense"), &[]);
    let doc = document(&st);
    let embed = request_schema(&doc, "/embed");
    for (body, ok) in [
        (json!({"inputs": "a", "prompt_name": "query"}), true),
        (json!({"inputs": "a", "prompt_name": null}), true),
        (json!({"inputs": "a", "prompt_name": "nope"}), false),
        // A prompt goes before text, not token ids; the empty prompt too.
        (json!({"inputs": [1, 2], "prompt_name": "query"}), false),
        (json!({"inputs": [[1, 2], "a"], "prompt_name": "empty"}), false),
        (json!({"inputs": ["a", "b"], "prompt_name": "empty"}), true),
        (json!({"inputs": [1, 2], "prompt_name": null}), true),
        (json!({"inputs": "a", "dimensions": 1}), true),
    ] {
        assert_eq!(fits(&doc, embed, &body), ok, "{body}");
        let status = documented(&st, &doc, "/embed", &body.to_string(), "application/json");
        assert_eq!(status == 200, ok, "/embed {body}: {status}");
    }
    assert_eq!(request_schema(&doc, "/"), embed);
    // /predict on an embedding model, which its document leaves out: 424 for a body /predict
    // takes, 422 before it otherwise.
    for (body, status) in [
        (json!({"inputs": "a"}), 424),
        (json!({"inputs": ""}), 422),
        (json!({"inputs": ["a", ""]}), 424),
        (json!({"inputs": ["", ""]}), 422),
        (json!({"inputs": "a", "parameters": {"top_k": 0}}), 422),
        (json!({"inputs": "a", "truncation_direction": "left"}), 422),
    ] {
        assert_eq!(st.post("/predict", &body.to_string()).0, status, "{body}");
    }
}
