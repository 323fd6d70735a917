//! What the server does around the routes: `--api-key`, `--cors-allow-origin`,
//! `--payload-limit` and `--body-read-timeout`.

use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{header, HeaderValue, Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use super::error::{ApiError, OpenAiError};
use crate::infer::error::InferError;

pub struct Guard {
    pub api_key: Option<String>,
    pub cors_allow_origin: Option<Vec<String>>,
    pub payload_limit: usize,
    pub body_read_timeout: Duration,
}

/// TEI's CORS: `*` allows any origin, else the listed ones; GET and POST.
pub fn cors(origins: &[String]) -> tower_http::cors::CorsLayer {
    use tower_http::cors::{AllowOrigin, CorsLayer};
    let allow_origin = if origins.iter().any(|o| o == "*") {
        AllowOrigin::any()
    } else {
        AllowOrigin::list(origins.iter().filter_map(|o| o.parse::<HeaderValue>().ok()))
    };
    CorsLayer::new()
        .allow_methods([Method::GET, Method::POST])
        .allow_headers([header::CONTENT_TYPE, header::AUTHORIZATION])
        .allow_origin(allow_origin)
}

/// `--api-key`: every route but health, metrics and the API's documents wants
/// `Authorization: Bearer <key>`, else 401 with no body, as TEI.
pub async fn authorize(State(guard): State<Arc<Guard>>, request: Request, next: Next) -> Response {
    let Some(key) = &guard.api_key else { return next.run(request).await };
    let public = request.method() == Method::GET
        && matches!(
            request.uri().path(),
            "/" | "/health" | "/ping" | "/metrics" | "/docs" | "/api-doc/openapi.json"
        );
    let given = request.headers().get(header::AUTHORIZATION).and_then(|v| v.to_str().ok());
    if public || given.and_then(|v| v.strip_prefix("Bearer ")) == Some(key.as_str()) {
        next.run(request).await
    } else {
        StatusCode::UNAUTHORIZED.into_response()
    }
}

/// The OpenAI routes answer errors in OpenAI's body.
fn is_openai(path: &str) -> bool {
    matches!(path, "/v1/embeddings" | "/embeddings")
}

/// Reads the whole body within `--payload-limit` bytes (413) and `--body-read-timeout` (408), so
/// that a client sending a byte at a time cannot hold a connection open with no answer.
pub async fn read_body(State(guard): State<Arc<Guard>>, request: Request, next: Next) -> Response {
    let (parts, body) = request.into_parts();
    let openai = is_openai(parts.uri.path());
    let respond = |e: ApiError| if openai { OpenAiError(e).into_response() } else { e.into_response() };
    let read = axum::body::to_bytes(body, guard.payload_limit);
    let bytes = match tokio::time::timeout(guard.body_read_timeout, read).await {
        Ok(Ok(bytes)) => bytes,
        Ok(Err(e)) => {
            let too_large =
                std::error::Error::source(&e).is_some_and(|s| s.is::<http_body_util::LengthLimitError>());
            return respond(ApiError::body(too_large, e));
        }
        Err(_) => {
            let mut response = respond(ApiError::body_timeout());
            // The rest of the body may still come: the connection cannot carry another request.
            response.headers_mut().insert(header::CONNECTION, HeaderValue::from_static("close"));
            return response;
        }
    };
    if parts.method == Method::POST && is_json(&parts.headers) {
        if let Some(kind) = not_an_object(&bytes) {
            let message =
                format!("Failed to deserialize the JSON body into the target type: invalid type: {kind}, expected an object");
            return respond(ApiError::from(InferError::Validation(message)));
        }
    }
    next.run(Request::from_parts(parts, Body::from(bytes))).await
}

/// Whether the request says its body is JSON (`application/json`, or `+json`), as axum reads it.
fn is_json(headers: &axum::http::HeaderMap) -> bool {
    let Some(value) = headers.get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok()) else { return false };
    let essence = value.split(';').next().unwrap_or_default().trim().to_ascii_lowercase();
    essence == "application/json" || (essence.starts_with("application/") && essence.ends_with("+json"))
}

/// Every body is an object: serde would also read a struct from a JSON array of its fields. The
/// kind of JSON value a well-formed body that is no object holds; malformed JSON is left to the
/// handler (400).
fn not_an_object(bytes: &[u8]) -> Option<&'static str> {
    if bytes.iter().find(|b| !b.is_ascii_whitespace()) == Some(&b'{') {
        return None;
    }
    match serde_json::from_slice::<serde_json::Value>(bytes).ok()? {
        serde_json::Value::Object(_) => None,
        serde_json::Value::Array(_) => Some("sequence"),
        serde_json::Value::String(_) => Some("string"),
        serde_json::Value::Number(_) => Some("number"),
        serde_json::Value::Bool(_) => Some("boolean"),
        serde_json::Value::Null => Some("null"),
    }
}
