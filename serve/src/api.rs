//! TEI's request and response bodies, and its error shapes.

use axum::extract::rejection::JsonRejection;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::de::Error as _;
use serde::{Deserialize, Deserializer, Serialize};
use serde_json::Value;

/// TEI's `ErrorType`, serialised PascalCase as TEI does.
#[derive(Debug, Clone, Copy, Serialize)]
pub enum ErrorType {
    Unhealthy,
    Backend,
    Overloaded,
    Validation,
    Tokenizer,
    Empty,
}

#[derive(Debug)]
pub struct ApiError {
    pub status: StatusCode,
    pub error_type: ErrorType,
    pub message: String,
    /// The `err` label of `te_request_failure`.
    pub metric: &'static str,
}

impl ApiError {
    /// An empty input or batch: 422, as the issue asks of this server (TEI 1.9.3 says 400).
    pub fn empty(message: impl Into<String>) -> Self {
        Self {
            status: StatusCode::UNPROCESSABLE_ENTITY,
            error_type: ErrorType::Empty,
            message: message.into(),
            metric: "validation",
        }
    }

    /// Input TEI rejects after parsing it: 422 (TEI 1.9; 413 up to 1.8).
    pub fn validation(message: impl Into<String>) -> Self {
        Self {
            status: StatusCode::UNPROCESSABLE_ENTITY,
            error_type: ErrorType::Validation,
            message: message.into(),
            metric: "validation",
        }
    }

    /// A batch over `--max-client-batch-size`: 413, a request too large (TEI up to 1.8; 1.9 says 422).
    pub fn batch_size(n: usize, max: usize) -> Self {
        Self {
            status: StatusCode::PAYLOAD_TOO_LARGE,
            metric: "batch_size",
            ..Self::validation(format!("batch size {n} > maximum allowed batch size {max}"))
        }
    }

    pub fn tokenizer(e: impl std::fmt::Display) -> Self {
        Self {
            status: StatusCode::UNPROCESSABLE_ENTITY,
            error_type: ErrorType::Tokenizer,
            message: format!("tokenizer error {e}"),
            metric: "tokenization",
        }
    }

    /// A body that did not arrive within `--body-read-timeout`.
    pub fn body_timeout() -> Self {
        Self {
            status: StatusCode::REQUEST_TIMEOUT,
            error_type: ErrorType::Validation,
            message: "the request body did not arrive in time".into(),
            metric: "timeout",
        }
    }

    pub fn overloaded() -> Self {
        Self {
            status: StatusCode::TOO_MANY_REQUESTS,
            error_type: ErrorType::Overloaded,
            message: "Model is overloaded".into(),
            metric: "overloaded",
        }
    }

    /// The route does not fit the model (TEI's 424).
    pub fn model_type(message: &str) -> Self {
        Self {
            status: StatusCode::FAILED_DEPENDENCY,
            error_type: ErrorType::Backend,
            message: format!("Backend error: {message}"),
            metric: "model_type",
        }
    }

    /// A forward pass that failed: the one 5xx, a fault of the server and not of the input.
    pub fn inference(message: impl std::fmt::Display) -> Self {
        Self {
            status: StatusCode::INTERNAL_SERVER_ERROR,
            error_type: ErrorType::Backend,
            message: format!("Backend error: {message}"),
            metric: "inference",
        }
    }

    pub fn unhealthy() -> Self {
        Self {
            status: StatusCode::SERVICE_UNAVAILABLE,
            error_type: ErrorType::Unhealthy,
            message: "unhealthy".into(),
            metric: "inference",
        }
    }
}

/// axum's rejections keep their status (400 malformed JSON, 413 body over the limit, 415 not
/// JSON, 422 wrong shape) and its message, in TEI's JSON error body rather than plain text.
impl From<JsonRejection> for ApiError {
    fn from(rejection: JsonRejection) -> Self {
        Self {
            status: rejection.status(),
            error_type: ErrorType::Validation,
            message: rejection.body_text(),
            metric: "validation",
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = serde_json::json!({"error": self.message, "error_type": self.error_type});
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

impl IntoResponse for OpenAiError {
    fn into_response(self) -> Response {
        let e = self.0;
        let body = serde_json::json!({"message": e.message, "code": e.status.as_u16(), "type": e.error_type});
        (e.status, Json(body)).into_response()
    }
}

/// `"text"`, `[ids]`, or a batch of either; tried in this order, so `[]` is one empty input.
#[derive(Deserialize)]
#[serde(untagged)]
pub enum Input {
    Single(InputType),
    Batch(Vec<InputType>),
}

#[derive(Deserialize)]
#[serde(untagged)]
pub enum InputType {
    String(String),
    Ids(Vec<u32>),
}

impl Input {
    pub fn into_items(self) -> (Vec<Item>, bool) {
        let item = |i: InputType| match i {
            InputType::String(s) => Item::Text(s),
            InputType::Ids(ids) => Item::Ids(ids),
        };
        match self {
            Input::Single(i) => (vec![item(i)], false),
            Input::Batch(v) => (v.into_iter().map(item).collect(), true),
        }
    }
}

/// One input of any route, before tokenization.
pub enum Item {
    Text(String),
    Ids(Vec<u32>),
    Pair(String, String),
}

#[derive(Deserialize, Default, PartialEq, Eq, Clone, Copy)]
pub enum TruncationDirection {
    #[serde(alias = "left")]
    Left,
    #[default]
    #[serde(alias = "right")]
    Right,
}

#[derive(Deserialize)]
pub struct EmbedRequest {
    pub inputs: Input,
    #[serde(default)]
    pub truncate: Option<bool>,
    #[serde(default)]
    pub truncation_direction: TruncationDirection,
    #[serde(default)]
    pub prompt_name: Option<String>,
    #[serde(default = "yes")]
    pub normalize: bool,
    #[serde(default)]
    pub dimensions: Option<usize>,
}

fn yes() -> bool {
    true
}

#[derive(Deserialize)]
pub struct PredictRequest {
    pub inputs: PredictInput,
    #[serde(default)]
    pub truncate: Option<bool>,
    #[serde(default)]
    pub truncation_direction: TruncationDirection,
    #[serde(default)]
    pub raw_scores: bool,
    /// What huggingface_hub's `text_classification` sends to `POST /`; only `top_k` is read.
    #[serde(default)]
    pub parameters: Option<PredictParameters>,
}

#[derive(Deserialize, Default)]
pub struct PredictParameters {
    #[serde(default)]
    pub top_k: Option<usize>,
}

/// TEI's reading of /predict inputs, where the first element decides: `"a"` and `["a"]` are one
/// text, `["a", "b"]` is ONE pair, `[["a"], ["b", "c"]]` is a batch of texts and pairs.
pub enum PredictInput {
    Single(Item),
    Batch(Vec<Item>),
    /// A flat list of more than two strings: neither a text, a pair nor a batch. Kept until the
    /// handler, which answers 413 when it is longer than a batch may be, else 422.
    Invalid {
        length: usize,
        message: String,
    },
}

const PREDICT_EXPECTING: &str =
    "a string, a pair of strings [string, string] or a batch of mixed strings and pairs [[string], [string, string], ...]";

impl<'de> Deserialize<'de> for PredictInput {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        parse_predict_input(Value::deserialize(deserializer)?).map_err(D::Error::custom)
    }
}

fn parse_predict_input(value: Value) -> Result<PredictInput, String> {
    fn strings(items: &[Value]) -> Result<Item, String> {
        let texts = items
            .iter()
            .map(|v| {
                v.as_str().map(str::to_string).ok_or_else(|| format!("invalid type: {v}, expected a string"))
            })
            .collect::<Result<Vec<String>, String>>()?;
        let mut texts = texts.into_iter();
        match (texts.next(), texts.next(), texts.next()) {
            (Some(a), None, _) => Ok(Item::Text(a)),
            (Some(a), Some(b), None) => Ok(Item::Pair(a, b)),
            _ => Err(format!("invalid length {}, expected {PREDICT_EXPECTING}", items.len())),
        }
    }
    match value {
        Value::String(s) => Ok(PredictInput::Single(Item::Text(s))),
        Value::Array(items) => match items.first() {
            Some(Value::Array(_)) => items
                .iter()
                .map(|v| match v {
                    Value::Array(pair) => strings(pair),
                    other => Err(format!("invalid type: {other}, expected a list of 1 or 2 strings")),
                })
                .collect::<Result<Vec<Item>, String>>()
                .map(PredictInput::Batch),
            _ if items.len() > 2 && items.iter().all(Value::is_string) => Ok(PredictInput::Invalid {
                length: items.len(),
                message: format!("invalid length {}, expected {PREDICT_EXPECTING}", items.len()),
            }),
            _ => strings(&items).map(PredictInput::Single),
        },
        other => Err(format!("invalid type: {other}, expected {PREDICT_EXPECTING}")),
    }
}

/// A single input's labels (a flat list), or one list per input of a batch.
#[derive(Serialize)]
#[serde(untagged)]
pub enum PredictResponse {
    Single(Vec<Prediction>),
    Batch(Vec<Vec<Prediction>>),
}

#[derive(Serialize)]
pub struct Prediction {
    pub score: f32,
    pub label: String,
}

#[derive(Deserialize)]
pub struct RerankRequest {
    pub query: String,
    pub texts: Vec<String>,
    #[serde(default)]
    pub truncate: Option<bool>,
    #[serde(default)]
    pub truncation_direction: TruncationDirection,
    #[serde(default)]
    pub raw_scores: bool,
    #[serde(default)]
    pub return_text: bool,
}

#[derive(Serialize)]
pub struct Rank {
    pub index: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    pub score: f32,
}

#[derive(Deserialize)]
pub struct SimilarityRequest {
    pub inputs: SimilarityInput,
    #[serde(default)]
    pub parameters: Option<SimilarityParameters>,
}

#[derive(Deserialize)]
pub struct SimilarityInput {
    pub source_sentence: String,
    pub sentences: Vec<String>,
}

#[derive(Deserialize, Default)]
pub struct SimilarityParameters {
    #[serde(default)]
    pub truncate: Option<bool>,
    #[serde(default)]
    pub truncation_direction: TruncationDirection,
    #[serde(default)]
    pub prompt_name: Option<String>,
}

#[derive(Deserialize)]
pub struct EmbedAllRequest {
    pub inputs: Input,
    #[serde(default)]
    pub truncate: Option<bool>,
    #[serde(default)]
    pub truncation_direction: TruncationDirection,
    #[serde(default)]
    pub prompt_name: Option<String>,
}

#[derive(Deserialize)]
pub struct OpenAiRequest {
    pub input: Input,
    /// Ignored, as TEI does: the server has one model.
    #[serde(default)]
    #[allow(dead_code)]
    pub model: Option<String>,
    #[serde(default)]
    pub encoding_format: EncodingFormat,
    #[serde(default)]
    pub dimensions: Option<usize>,
    /// Not OpenAI's, but what TEI's /v1/embeddings also takes.
    #[serde(default)]
    pub prompt_name: Option<String>,
}

#[derive(Deserialize, Default, PartialEq, Eq, Clone, Copy)]
#[serde(rename_all = "snake_case")]
pub enum EncodingFormat {
    #[default]
    Float,
    Base64,
}

#[derive(Deserialize)]
pub struct TokenizeRequest {
    pub inputs: TokenizeInput,
    #[serde(default = "yes")]
    pub add_special_tokens: bool,
    #[serde(default)]
    pub prompt_name: Option<String>,
}

#[derive(Deserialize)]
#[serde(untagged)]
pub enum TokenizeInput {
    Single(String),
    Batch(Vec<String>),
}

#[derive(Serialize)]
pub struct Token {
    pub id: u32,
    pub text: String,
    pub special: bool,
    pub start: Option<usize>,
    pub stop: Option<usize>,
}

#[derive(Deserialize)]
pub struct DecodeRequest {
    pub ids: InputIds,
    #[serde(default = "yes")]
    pub skip_special_tokens: bool,
}

#[derive(Deserialize)]
#[serde(untagged)]
pub enum InputIds {
    Single(Vec<u32>),
    Batch(Vec<Vec<u32>>),
}
