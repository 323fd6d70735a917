//! The routes, their middleware, and the OpenAPI document made from the handlers' `#[utoipa::path]`
//! attributes and the bodies' schemas (serve/src/api.rs), with every error status each route can
//! answer.

use std::sync::Arc;

use axum::extract::DefaultBodyLimit;
use axum::http::{header, HeaderValue};
use axum::middleware;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use serde_json::{json, Value};
use utoipa::OpenApi;

use super::handlers::{self, App};
use super::middleware::{authorize, cors, read_body, Guard};
use crate::api;
use crate::infer::inference::Kind;

#[derive(OpenApi)]
#[openapi(
    info(
        title = "roformer-serve",
        description = "text-embeddings-inference's HTTP API for RoFormer checkpoints"
    ),
    paths(
        handlers::embed,
        handlers::predict,
        handlers::openai_embeddings,
        handlers::rerank,
        handlers::similarity,
        handlers::embed_all,
        handlers::tokenize,
        handlers::decode,
        handlers::health,
        handlers::info,
        handlers::metrics,
    ),
    components(schemas(api::ErrorResponse, api::OpenAiErrorResponse, api::ErrorType, api::TextInput))
)]
struct ApiDoc;

/// The error statuses of every POST route: each answers TEI's error body (OpenAI's on the
/// OpenAI routes). 401 has no body.
const ERRORS: [(u16, &str); 9] = [
    (400, "The body is not JSON"),
    (401, "`--api-key` is set and the request does not carry it"),
    (408, "The body did not arrive within `--body-read-timeout`"),
    (413, "The body is over `--payload-limit`, or the batch over `--max-client-batch-size`"),
    (415, "The body is not `application/json`"),
    (422, "The body does not fit the schema, or an input is refused (empty, too long without truncation)"),
    (424, "The model does not serve this route (e.g. /rerank without a cross-encoder)"),
    (429, "Every permit of `--max-concurrent-requests` is taken"),
    (500, "The forward pass failed"),
];

/// The OpenAPI document of every route the router serves, for the loaded model: `POST /` takes
/// and answers what the model's own route does.
pub fn openapi(kind: Kind) -> Value {
    let mut doc = serde_json::to_value(ApiDoc::openapi()).expect("the OpenAPI document serialises");
    // A prompt goes before text: a request that names one takes no token ids.
    for (schema, field) in [("EmbedRequest", "inputs"), ("OpenAiRequest", "input")] {
        let schema = &mut doc["components"]["schemas"][schema];
        schema["if"] =
            json!({"properties": {"prompt_name": {"type": "string"}}, "required": ["prompt_name"]});
        schema["then"] = json!({"properties": {field: {"$ref": "#/components/schemas/TextInput"}}});
    }
    let paths = doc["paths"].as_object_mut().expect("paths");
    for (path, item) in paths.iter_mut() {
        let Some(post) = item.get_mut("post") else { continue };
        let schema = if path.as_str() == "/v1/embeddings" { "OpenAiErrorResponse" } else { "ErrorResponse" };
        let responses = post["responses"].as_object_mut().expect("responses");
        for (status, description) in ERRORS {
            let response = if status == 401 {
                json!({"description": description})
            } else {
                json!({
                    "description": description,
                    "content": {"application/json": {"schema": {"$ref": format!("#/components/schemas/{schema}")}}}
                })
            };
            responses.insert(status.to_string(), response);
        }
    }
    let same = |paths: &mut serde_json::Map<String, Value>, from: &str, method: &str, to: &str, id: &str| {
        let mut operation = paths[from][method].clone();
        operation["operationId"] = json!(id);
        let item = paths.entry(to.to_string()).or_insert_with(|| json!({}));
        item[method] = operation;
    };
    same(paths, "/v1/embeddings", "post", "/embeddings", "openai_embeddings_alias");
    same(paths, "/health", "get", "/ping", "ping");
    same(paths, "/health", "get", "/", "root_health");
    let own = match kind {
        Kind::Classifier => "/predict",
        Kind::Reranker => "/rerank",
        Kind::Embedding => "/embed",
    };
    same(paths, own, "post", "/", "root");
    paths.insert(
        "/docs".into(),
        json!({"get": {"operationId": "docs", "tags": ["Text Embeddings Inference"],
            "summary": "Swagger UI over this document",
            "responses": {"200": {"description": "An HTML page", "content": {"text/html": {"schema": {"type": "string"}}}}}}}),
    );
    paths.insert(
        "/api-doc/openapi.json".into(),
        json!({"get": {"operationId": "openapi", "tags": ["Text Embeddings Inference"],
            "summary": "This document",
            "responses": {"200": {"description": "The OpenAPI document", "content": {"application/json": {"schema": {"type": "object"}}}}}}}),
    );
    doc
}

pub fn router(app: Arc<App>, guard: Guard) -> Router {
    let guard = Arc::new(guard);
    let document: Arc<str> = openapi(app.infer.kind).to_string().into();
    let router = Router::new()
        .route("/", post(handlers::root).get(handlers::health))
        .route("/embed", post(handlers::embed))
        .route("/embed_all", post(handlers::embed_all))
        .route("/predict", post(handlers::predict))
        .route("/rerank", post(handlers::rerank))
        .route("/similarity", post(handlers::similarity))
        .route("/v1/embeddings", post(handlers::openai_embeddings))
        .route("/embeddings", post(handlers::openai_embeddings))
        .route("/tokenize", post(handlers::tokenize))
        .route("/decode", post(handlers::decode))
        .route("/health", get(handlers::health))
        .route("/ping", get(handlers::health))
        .route("/info", get(handlers::info))
        .route("/metrics", get(handlers::metrics))
        .route("/docs", get(docs))
        .route("/api-doc/openapi.json", get(move || document_response(document.clone())))
        // The body is read (within the limit and the timeout) before the extractors see it.
        .layer(DefaultBodyLimit::disable())
        .layer(middleware::from_fn_with_state(guard.clone(), read_body))
        .layer(middleware::from_fn_with_state(guard.clone(), authorize))
        .with_state(app);
    match &guard.cors_allow_origin {
        // Outermost, so that a preflight (which carries no key) is answered.
        Some(origins) => router.layer(cors(origins)),
        None => router,
    }
}

async fn document_response(document: Arc<str>) -> Response {
    ([(header::CONTENT_TYPE, HeaderValue::from_static("application/json"))], document.to_string())
        .into_response()
}

/// Swagger UI over the document, as TEI serves it (its scripts come from a CDN).
async fn docs() -> Response {
    let page = r##"<!doctype html>
<html><head><meta charset="utf-8"><title>roformer-serve API</title>
<link rel="stylesheet" href="https://unpkg.com/swagger-ui-dist@5/swagger-ui.css"></head>
<body><div id="swagger-ui"></div>
<script src="https://unpkg.com/swagger-ui-dist@5/swagger-ui-bundle.js"></script>
<script>SwaggerUIBundle({url: "/api-doc/openapi.json", dom_id: "#swagger-ui"});</script>
</body></html>"##;
    ([(header::CONTENT_TYPE, HeaderValue::from_static("text/html; charset=utf-8"))], page).into_response()
}
