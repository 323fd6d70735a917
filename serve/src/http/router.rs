//! The routes, their middleware, and the OpenAPI document: made by utoipa from the handlers'
//! `#[utoipa::path]` attributes (each with every error status its route can answer) and the
//! bodies' schemas (serve/src/api.rs), with no editing of the result.

use std::sync::Arc;

use axum::extract::DefaultBodyLimit;
use axum::http::{header, HeaderValue};
use axum::middleware;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use utoipa::OpenApi;

use super::handlers::{self, App};
use super::middleware::{authorize, cors, read_body, Guard};
use crate::api;
use crate::infer::inference::Kind;

/// Every route but POST /, whose body is the loaded model's own route's.
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
        handlers::openai_embeddings_alias,
        handlers::rerank,
        handlers::similarity,
        handlers::embed_all,
        handlers::embed_sparse,
        handlers::tokenize,
        handlers::decode,
        handlers::health,
        handlers::ping,
        handlers::root_health,
        handlers::info,
        handlers::metrics,
        docs,
        openapi_json,
    ),
    components(schemas(api::ErrorResponse, api::OpenAiErrorResponse, api::ErrorType))
)]
struct ApiDoc;

/// POST / on a classifier.
#[derive(OpenApi)]
#[openapi(paths(handlers::root_predict))]
struct ClassifierRoot;

/// POST / on a cross-encoder.
#[derive(OpenApi)]
#[openapi(paths(handlers::root_rerank))]
struct RerankerRoot;

/// POST / on an embedding model.
#[derive(OpenApi)]
#[openapi(paths(handlers::root_embed))]
struct EmbeddingRoot;

/// POST / on a SPLADE model.
#[derive(OpenApi)]
#[openapi(paths(handlers::root_embed_sparse))]
struct SpladeRoot;

/// The OpenAPI document of the loaded model: the operations it serves, and `POST /` taking and
/// answering what the model's own route does. A route the model does not serve still answers, as
/// TEI's does (424), but is not listed: a generated client, the Swagger page and a checker see
/// only operations that can succeed.
pub fn openapi(kind: Kind) -> utoipa::openapi::OpenApi {
    let root = match kind {
        Kind::Classifier => ClassifierRoot::openapi(),
        Kind::Reranker => RerankerRoot::openapi(),
        Kind::Embedding => EmbeddingRoot::openapi(),
        Kind::Splade => SpladeRoot::openapi(),
    };
    let mut document = ApiDoc::openapi().merge_from(root);
    document.paths.paths.retain(|path, _| serves(kind, path));
    document
}

/// Whether the loaded model serves the route at `path`. Every model embeds (a classifier and a
/// cross-encoder through their encoder); a SPLADE model sparsely, and densely only unnormalised:
/// its /embed answers only with `"normalize": false`, which the document cannot state, and
/// OpenAI's route always normalises. Its /similarity compares the dense vectors.
fn serves(kind: Kind, path: &str) -> bool {
    match path {
        "/predict" => matches!(kind, Kind::Classifier | Kind::Reranker),
        "/rerank" => kind == Kind::Reranker,
        "/embed_sparse" => kind == Kind::Splade,
        "/embed" | "/embed_all" | "/v1/embeddings" | "/embeddings" => kind != Kind::Splade,
        _ => true,
    }
}

/// /metrics alone, for `--prometheus-port`.
pub fn metrics_router(app: Arc<App>) -> Router {
    Router::new().route("/metrics", get(handlers::metrics)).with_state(app)
}

pub fn router(app: Arc<App>, guard: Guard) -> Router {
    let guard = Arc::new(guard);
    let document: Arc<str> =
        openapi(app.infer.kind).to_json().expect("the OpenAPI document serialises").into();
    let router = Router::new()
        .route("/", post(handlers::root).get(handlers::root_health))
        .route("/embed", post(handlers::embed))
        .route("/embed_all", post(handlers::embed_all))
        .route("/embed_sparse", post(handlers::embed_sparse))
        .route("/predict", post(handlers::predict))
        .route("/rerank", post(handlers::rerank))
        .route("/similarity", post(handlers::similarity))
        .route("/v1/embeddings", post(handlers::openai_embeddings))
        .route("/embeddings", post(handlers::openai_embeddings_alias))
        .route("/tokenize", post(handlers::tokenize))
        .route("/decode", post(handlers::decode))
        .route("/health", get(handlers::health))
        .route("/ping", get(handlers::ping))
        .route("/info", get(handlers::info))
        .route("/metrics", get(handlers::metrics))
        .route("/docs", get(docs))
        .route("/api-doc/openapi.json", get(move || openapi_json(document.clone())))
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

/// This document.
#[utoipa::path(get, path = "/api-doc/openapi.json", operation_id = "openapi", tag = "Text Embeddings Inference",
    responses((status = 200, description = "The OpenAPI document", body = Object)))]
async fn openapi_json(document: Arc<str>) -> Response {
    ([(header::CONTENT_TYPE, HeaderValue::from_static("application/json"))], document.to_string())
        .into_response()
}

/// Swagger UI over this document, as TEI serves it (its scripts come from a CDN).
#[utoipa::path(get, path = "/docs", operation_id = "docs", tag = "Text Embeddings Inference",
    responses((status = 200, description = "An HTML page", body = String, content_type = "text/html")))]
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
