//! The core's errors and axum's rejections as TEI's statuses and JSON error bodies.

use axum::extract::rejection::JsonRejection;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;

use crate::api::{ErrorResponse, ErrorType, OpenAiErrorResponse};
use crate::infer::error::InferError;

#[derive(Debug)]
pub struct ApiError {
    pub status: StatusCode,
    pub error_type: ErrorType,
    pub message: String,
}

impl ApiError {
    /// A body that did not arrive within `--body-read-timeout`.
    pub fn body_timeout() -> Self {
        Self {
            status: StatusCode::REQUEST_TIMEOUT,
            error_type: ErrorType::Validation,
            message: "the request body did not arrive in time".into(),
        }
    }

    /// A body that could not be read: 413 over `--payload-limit`, else 400.
    pub fn body(too_large: bool, e: impl std::fmt::Display) -> Self {
        Self {
            status: if too_large { StatusCode::PAYLOAD_TOO_LARGE } else { StatusCode::BAD_REQUEST },
            error_type: ErrorType::Validation,
            message: format!("Failed to buffer the request body: {e}"),
        }
    }
}

/// TEI's statuses: 422 for input refused after parsing (TEI 1.9; an empty input too, where TEI
/// 1.9.3 says 400), a batch over `--max-client-batch-size` included (TEI 1.9's validation
/// status; up to 1.8 it was 413), 429 when overloaded, 424 when the route does not fit the
/// model, 500 for a failed forward pass.
impl From<InferError> for ApiError {
    fn from(e: InferError) -> Self {
        let (status, error_type) = match &e {
            InferError::Empty(_) => (StatusCode::UNPROCESSABLE_ENTITY, ErrorType::Empty),
            InferError::Validation(_) => (StatusCode::UNPROCESSABLE_ENTITY, ErrorType::Validation),
            InferError::BatchSize { .. } => (StatusCode::UNPROCESSABLE_ENTITY, ErrorType::Validation),
            InferError::Tokenizer(_) => (StatusCode::UNPROCESSABLE_ENTITY, ErrorType::Tokenizer),
            InferError::Overloaded => (StatusCode::TOO_MANY_REQUESTS, ErrorType::Overloaded),
            InferError::ModelType(_) => (StatusCode::FAILED_DEPENDENCY, ErrorType::Backend),
            InferError::Backend(_) => (StatusCode::INTERNAL_SERVER_ERROR, ErrorType::Backend),
            InferError::Unhealthy => (StatusCode::SERVICE_UNAVAILABLE, ErrorType::Unhealthy),
        };
        Self { status, error_type, message: e.to_string() }
    }
}

/// axum's rejections keep their status (400 malformed JSON, 413 body over the limit, 415 not
/// JSON, 422 wrong shape) and its message, in TEI's JSON error body rather than plain text.
impl From<JsonRejection> for ApiError {
    fn from(rejection: JsonRejection) -> Self {
        Self { status: rejection.status(), error_type: ErrorType::Validation, message: rejection.body_text() }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = ErrorResponse { error: self.message, error_type: self.error_type };
        (self.status, Json(body)).into_response()
    }
}

/// The same error in the body OpenAI clients read: `{"message", "code", "type"}`.
pub struct OpenAiError(pub ApiError);

impl From<ApiError> for OpenAiError {
    fn from(e: ApiError) -> Self {
        Self(e)
    }
}

impl From<InferError> for OpenAiError {
    fn from(e: InferError) -> Self {
        Self(e.into())
    }
}

impl IntoResponse for OpenAiError {
    fn into_response(self) -> Response {
        let e = self.0;
        let body =
            OpenAiErrorResponse { message: e.message, code: e.status.as_u16(), error_type: e.error_type };
        (e.status, Json(body)).into_response()
    }
}
