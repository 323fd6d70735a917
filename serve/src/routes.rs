//! TEI's routes: validation and tokenization in the handler, inference through the queue.

use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::extract::rejection::JsonRejection;
use axum::extract::{DefaultBodyLimit, FromRequest, Request, State};
use axum::http::{header, HeaderMap, HeaderValue, Method, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use base64::Engine as _;
use roformer::{Config, Encoded, Tokenizer};
use tokio::sync::Semaphore;

use crate::api::*;
use crate::metrics::Metrics;
use crate::queue::{Job, Output, Queue, Task, Value};

#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Embedding,
    Classifier,
    /// A classifier of one label: /rerank, and /predict too.
    Reranker,
}

/// What the server does around the routes: `--api-key`, `--cors-allow-origin`,
/// `--payload-limit` and `--body-read-timeout`.
pub struct Guard {
    pub api_key: Option<String>,
    pub cors_allow_origin: Option<Vec<String>>,
    pub payload_limit: usize,
    pub body_read_timeout: Duration,
}

/// The OpenAPI document of every route, written by hand (utoipa's derive macros would double the
/// server's build); a test checks that it lists every route the server answers.
pub const OPENAPI: &str = include_str!("openapi.json");

pub struct App {
    pub kind: Kind,
    /// Truncates to `max_input_length`, as the pipelines do.
    pub tokenizer: Tokenizer,
    /// No truncation: lengths for error messages, and /tokenize.
    pub untruncated: Tokenizer,
    pub config: Config,
    pub max_input_length: usize,
    pub max_client_batch_size: usize,
    pub auto_truncate: bool,
    pub served_model_name: String,
    pub compute_type: &'static str,
    /// The encoder's prompt names (sorted), as `Backend::prompt_names`.
    pub prompt_names: Vec<String>,
    pub info: serde_json::Value,
    pub queue: Arc<Queue>,
    pub permits: Arc<Semaphore>,
    pub metrics: Arc<Metrics>,
}

pub fn router(app: Arc<App>, guard: Guard) -> Router {
    let guard = Arc::new(guard);
    let router = Router::new()
        .route("/", post(root).get(health))
        .route("/embed", post(embed))
        .route("/embed_all", post(embed_all))
        .route("/predict", post(predict))
        .route("/rerank", post(rerank))
        .route("/similarity", post(similarity))
        .route("/v1/embeddings", post(openai_embeddings))
        .route("/embeddings", post(openai_embeddings))
        .route("/tokenize", post(tokenize))
        .route("/decode", post(decode))
        .route("/health", get(health))
        .route("/ping", get(health))
        .route("/info", get(info))
        .route("/metrics", get(metrics))
        .route("/docs", get(docs))
        .route("/api-doc/openapi.json", get(openapi))
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

/// TEI's CORS: `*` allows any origin, else the listed ones; GET and POST.
fn cors(origins: &[String]) -> tower_http::cors::CorsLayer {
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
async fn authorize(State(guard): State<Arc<Guard>>, request: Request, next: Next) -> Response {
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

/// Reads the whole body within `--payload-limit` bytes (413) and `--body-read-timeout` (408), so
/// that a client sending a byte at a time cannot hold a connection open with no answer.
async fn read_body(State(guard): State<Arc<Guard>>, request: Request, next: Next) -> Response {
    let (parts, body) = request.into_parts();
    let read = axum::body::to_bytes(body, guard.payload_limit);
    let bytes = match tokio::time::timeout(guard.body_read_timeout, read).await {
        Ok(Ok(bytes)) => bytes,
        Ok(Err(e)) => {
            let too_large =
                std::error::Error::source(&e).is_some_and(|s| s.is::<http_body_util::LengthLimitError>());
            let status = if too_large { StatusCode::PAYLOAD_TOO_LARGE } else { StatusCode::BAD_REQUEST };
            let error = ApiError {
                status,
                error_type: ErrorType::Validation,
                message: format!("Failed to buffer the request body: {e}"),
                metric: "validation",
            };
            return error.into_response();
        }
        Err(_) => {
            let mut response = ApiError::body_timeout().into_response();
            // The rest of the body may still come: the connection cannot carry another request.
            response.headers_mut().insert(header::CONNECTION, HeaderValue::from_static("close"));
            return response;
        }
    };
    next.run(Request::from_parts(parts, Body::from(bytes))).await
}

async fn openapi() -> Response {
    ([(header::CONTENT_TYPE, HeaderValue::from_static("application/json"))], OPENAPI).into_response()
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

type AppState = State<Arc<App>>;

/// POST / answers as the model's own route: /predict for a classifier, else /embed.
async fn root(State(app): AppState, request: Request) -> Response {
    match app.kind {
        Kind::Classifier => {
            let body = Json::<PredictRequest>::from_request(request, &()).await;
            predict(State(app), body).await.into_response()
        }
        Kind::Reranker => {
            let body = Json::<RerankRequest>::from_request(request, &()).await;
            rerank(State(app), body).await.into_response()
        }
        Kind::Embedding => {
            let body = Json::<EmbedRequest>::from_request(request, &()).await;
            embed(State(app), body).await.into_response()
        }
    }
}

async fn embed(
    State(app): AppState,
    body: Result<Json<EmbedRequest>, JsonRejection>,
) -> Result<Response, ApiError> {
    let Json(request) = body.map_err(|e| app.fail(e.into()))?;
    let prompt = app.check_options(request.truncation_direction, request.prompt_name.as_deref())?;
    let (items, batch) = request.inputs.into_items();
    let truncate = request.truncate.unwrap_or(app.auto_truncate);
    let done = app.infer(items, batch, Task::Embed { prompt }, truncate).await?;
    let vectors = done
        .outputs
        .iter()
        .map(|o| app.embedding(o, request.dimensions, request.normalize))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| app.fail(e))?;
    Ok((done.headers(), Json(vectors)).into_response())
}

async fn predict(
    State(app): AppState,
    body: Result<Json<PredictRequest>, JsonRejection>,
) -> Result<Response, ApiError> {
    let Json(request) = body.map_err(|e| app.fail(e.into()))?;
    app.check_options(request.truncation_direction, None)?;
    if app.kind == Kind::Embedding {
        return Err(app.fail(ApiError::model_type("Model is not a classifier model")));
    }
    let (items, batch) = match request.inputs {
        PredictInput::Single(item) => (vec![item], false),
        PredictInput::Batch(items) => (items, true),
        PredictInput::Invalid { length, message } => {
            app.check_batch(length).map_err(|e| app.fail(e))?;
            let message =
                format!("Failed to deserialize the JSON body into the target type: inputs: {message}");
            return Err(app.fail(ApiError::validation(message)));
        }
    };
    let truncate = request.truncate.unwrap_or(app.auto_truncate);
    let done = app.infer(items, batch, Task::Predict, truncate).await?;
    let mut all = Vec::with_capacity(done.outputs.len());
    let top_k = request.parameters.and_then(|p| p.top_k);
    for output in &done.outputs {
        let mut predictions = app.predictions(output, request.raw_scores).map_err(|e| app.fail(e))?;
        if let Some(k) = top_k {
            predictions.truncate(k);
        }
        all.push(predictions);
    }
    let body = if batch { PredictResponse::Batch(all) } else { PredictResponse::Single(all.remove(0)) };
    Ok((done.headers(), Json(body)).into_response())
}

/// OpenAI's embeddings route: always normalised, truncated as `--auto-truncate` says.
async fn openai_embeddings(
    State(app): AppState,
    body: Result<Json<OpenAiRequest>, JsonRejection>,
) -> Result<Response, OpenAiError> {
    let Json(request) = body.map_err(|e| app.fail(e.into()))?;
    let prompt = app.check_options(TruncationDirection::Right, request.prompt_name.as_deref())?;
    let (items, batch) = request.input.into_items();
    let done = app.infer(items, batch, Task::Embed { prompt }, app.auto_truncate).await?;
    let mut data = Vec::with_capacity(done.outputs.len());
    for (index, output) in done.outputs.iter().enumerate() {
        let vector = app.embedding(output, request.dimensions, true).map_err(|e| app.fail(e))?;
        let embedding = match request.encoding_format {
            EncodingFormat::Float => serde_json::json!(vector),
            // Little-endian f32 bytes, as TEI sends on x86_64 and as the openai client decodes.
            EncodingFormat::Base64 => {
                let bytes: Vec<u8> = vector.iter().flat_map(|x| x.to_le_bytes()).collect();
                serde_json::json!(base64::engine::general_purpose::STANDARD.encode(bytes))
            }
        };
        data.push(serde_json::json!({"object": "embedding", "embedding": embedding, "index": index}));
    }
    let body = serde_json::json!({
        "object": "list",
        "data": data,
        "model": app.served_model_name,
        "usage": {"prompt_tokens": done.tokens, "total_tokens": done.tokens},
    });
    Ok((done.headers(), Json(body)).into_response())
}

/// TEI's /rerank: every text scored against the query by the cross-encoder, best first (texts
/// of equal score keep their order, as `Reranker::rank`).
async fn rerank(
    State(app): AppState,
    body: Result<Json<RerankRequest>, JsonRejection>,
) -> Result<Response, ApiError> {
    let Json(request) = body.map_err(|e| app.fail(e.into()))?;
    if request.texts.is_empty() {
        return Err(app.fail(ApiError::empty("`texts` cannot be empty")));
    }
    if app.kind != Kind::Reranker {
        return Err(app.fail(ApiError::model_type("model is not a re-ranker model")));
    }
    app.check_options(request.truncation_direction, None)?;
    let items = request.texts.iter().map(|t| Item::Pair(request.query.clone(), t.clone())).collect();
    let truncate = request.truncate.unwrap_or(app.auto_truncate);
    let task = Task::Rerank { raw_scores: request.raw_scores };
    let done = app.infer(items, true, task, truncate).await?;
    let mut ranks = Vec::with_capacity(done.outputs.len());
    for (index, output) in done.outputs.iter().enumerate() {
        let Value::Score(score) = output.value else {
            return Err(app.fail(ApiError::inference("expected a score")));
        };
        if score.is_nan() {
            return Err(app.fail(ApiError::inference("score is NaN")));
        }
        let text = request.return_text.then(|| request.texts[index].clone());
        ranks.push(Rank { index, text, score });
    }
    ranks.sort_by(|a, b| b.score.total_cmp(&a.score));
    Ok((done.headers(), Json(ranks)).into_response())
}

/// TEI's /similarity: the cosine similarity of each sentence's embedding to the source
/// sentence's.
async fn similarity(
    State(app): AppState,
    body: Result<Json<SimilarityRequest>, JsonRejection>,
) -> Result<Response, ApiError> {
    let Json(request) = body.map_err(|e| app.fail(e.into()))?;
    let SimilarityInput { source_sentence, sentences } = request.inputs;
    if sentences.is_empty() {
        return Err(app.fail(ApiError::empty("`inputs.sentences` cannot be empty")));
    }
    // The source sentence counts in the batch, as in TEI.
    app.check_batch(sentences.len() + 1).map_err(|e| app.fail(e))?;
    let parameters = request.parameters.unwrap_or_default();
    let prompt = app.check_options(parameters.truncation_direction, parameters.prompt_name.as_deref())?;
    let items = std::iter::once(source_sentence).chain(sentences).map(Item::Text).collect();
    let truncate = parameters.truncate.unwrap_or(app.auto_truncate);
    let done = app.infer(items, true, Task::Embed { prompt }, truncate).await?;
    let vectors = done
        .outputs
        .iter()
        .map(|o| app.embedding(o, None, false))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| app.fail(e))?;
    let scores: Vec<f32> = vectors[1..].iter().map(|v| roformer::cosine_similarity(&vectors[0], v)).collect();
    Ok((done.headers(), Json(scores)).into_response())
}

/// TEI's /embed_all: every token's last hidden state, special tokens included, one list per input.
async fn embed_all(
    State(app): AppState,
    body: Result<Json<EmbedAllRequest>, JsonRejection>,
) -> Result<Response, ApiError> {
    let Json(request) = body.map_err(|e| app.fail(e.into()))?;
    if app.check_options(request.truncation_direction, request.prompt_name.as_deref())?.is_some() {
        return Err(app.fail(ApiError::validation(
            "Input validation error: `prompt_name` is not supported on /embed_all",
        )));
    }
    let (items, batch) = request.inputs.into_items();
    let truncate = request.truncate.unwrap_or(app.auto_truncate);
    let done = app.infer(items, batch, Task::EmbedAll, truncate).await?;
    let mut all = Vec::with_capacity(done.outputs.len());
    for output in &done.outputs {
        let Value::Tokens(tokens) = &output.value else {
            return Err(app.fail(ApiError::inference("expected token embeddings")));
        };
        all.push(tokens);
    }
    Ok((done.headers(), Json(all)).into_response())
}

async fn tokenize(
    State(app): AppState,
    body: Result<Json<TokenizeRequest>, JsonRejection>,
) -> Result<Json<Vec<Vec<Token>>>, ApiError> {
    let Json(request) = body.map_err(|e| app.fail(e.into()))?;
    if let Some(name) = request.prompt_name {
        return Err(app.fail(ApiError::validation(format!(
            "Input validation error: `prompt_name` `{name}` is not supported on /tokenize"
        ))));
    }
    let texts = match request.inputs {
        TokenizeInput::Single(text) => vec![text],
        TokenizeInput::Batch(texts) => {
            app.check_batch(texts.len()).map_err(|e| app.fail(e))?;
            texts
        }
    };
    let limit = app.max_input_length * 250;
    let mut out = Vec::with_capacity(texts.len());
    for text in &texts {
        if text.is_empty() {
            return Err(app.fail(ApiError::empty("Input validation error: `inputs` cannot be empty")));
        }
        if text.len() > limit {
            return Err(app.fail(ApiError::validation(format!(
                "Input validation error: `inputs` must have less than {limit} characters. Given: {}",
                text.len()
            ))));
        }
        let encoded = app.untruncated.encode(text).map_err(|e| app.fail(ApiError::tokenizer(e)))?;
        out.push(tokens(&app.untruncated, text, &encoded, request.add_special_tokens));
    }
    Ok(Json(out))
}

/// TEI's tokens: byte offsets into the text; special tokens with their own text and no offsets.
fn tokens(tokenizer: &Tokenizer, text: &str, encoded: &Encoded, add_special_tokens: bool) -> Vec<Token> {
    // The library gives char offsets; TEI gives byte offsets.
    let bytes_at: Vec<usize> = text.char_indices().map(|(b, _)| b).chain([text.len()]).collect();
    let byte = |c: usize| bytes_at.get(c).copied().unwrap_or(text.len());
    let last = encoded.len().saturating_sub(1);
    encoded
        .input_ids
        .iter()
        .zip(&encoded.offsets)
        .enumerate()
        .filter_map(|(i, (&id, &(start, stop)))| {
            // One text is always `[CLS] ... [SEP]` (no truncation here): the ends are the specials.
            if i == 0 || i == last {
                let text = tokenizer.id_to_token(id).unwrap_or_default();
                return add_special_tokens.then_some(Token {
                    id,
                    text,
                    special: true,
                    start: None,
                    stop: None,
                });
            }
            let (start, stop) = (byte(start), byte(stop));
            let text = String::from_utf8_lossy(&text.as_bytes()[start..stop.max(start)]).into_owned();
            Some(Token { id, text, special: false, start: Some(start), stop: Some(stop) })
        })
        .collect()
}

async fn decode(
    State(app): AppState,
    body: Result<Json<DecodeRequest>, JsonRejection>,
) -> Result<Json<Vec<String>>, ApiError> {
    let Json(request) = body.map_err(|e| app.fail(e.into()))?;
    let batch = match request.ids {
        InputIds::Single(ids) => vec![ids],
        InputIds::Batch(batch) if batch.is_empty() => {
            return Err(app.fail(ApiError::empty("`ids` cannot be empty")))
        }
        InputIds::Batch(batch) => {
            app.check_batch(batch.len()).map_err(|e| app.fail(e))?;
            batch
        }
    };
    let mut out = Vec::with_capacity(batch.len());
    for ids in &batch {
        if ids.is_empty() {
            return Err(app.fail(ApiError::empty("Input validation error: `input_ids` cannot be empty")));
        }
        out.push(
            app.tokenizer
                .decode(ids, request.skip_special_tokens)
                .map_err(|e| app.fail(ApiError::tokenizer(e)))?,
        );
    }
    Ok(Json(out))
}

/// 200 only when a forward pass through the queue answers.
async fn health(State(app): AppState) -> Response {
    let task = match app.kind {
        Kind::Classifier | Kind::Reranker => Task::Predict,
        Kind::Embedding => Task::Embed { prompt: None },
    };
    let healthy = match app.tokenizer.encode("health") {
        Ok(encoded) => {
            let rx = app.queue.push(Job { encoded, texts: Vec::new(), task }, None);
            matches!(tokio::time::timeout(Duration::from_secs(60), rx).await, Ok(Ok(Ok(_))))
        }
        Err(_) => false,
    };
    if healthy {
        StatusCode::OK.into_response()
    } else {
        ApiError::unhealthy().into_response()
    }
}

async fn info(State(app): AppState) -> Json<serde_json::Value> {
    Json(app.info.clone())
}

async fn metrics(State(app): AppState) -> Response {
    let content_type = HeaderValue::from_static("text/plain; version=0.0.4; charset=utf-8");
    ([(header::CONTENT_TYPE, content_type)], app.metrics.render()).into_response()
}

/// The answers of one request, with what its headers and metrics report.
struct Done {
    outputs: Vec<Output>,
    tokens: usize,
    characters: usize,
    total: Duration,
    tokenization: Duration,
    compute_type: &'static str,
}

impl Done {
    /// TEI's `x-*` headers; the phase times are averages per input, as TEI gives them.
    fn headers(&self) -> HeaderMap {
        let n = self.outputs.len().max(1) as u32;
        let ms = |d: Duration| d.as_millis().to_string();
        let queue: Duration = self.outputs.iter().map(|o| o.queue_time).sum();
        let inference: Duration = self.outputs.iter().map(|o| o.inference_time).sum();
        let mut headers = HeaderMap::new();
        for (name, value) in [
            ("x-compute-type", self.compute_type.to_string()),
            ("x-compute-time", ms(self.total)),
            ("x-compute-characters", self.characters.to_string()),
            ("x-compute-tokens", self.tokens.to_string()),
            ("x-total-time", ms(self.total)),
            ("x-tokenization-time", ms(self.tokenization / n)),
            ("x-queue-time", ms(queue / n)),
            ("x-inference-time", ms(inference / n)),
        ] {
            if let Ok(value) = HeaderValue::from_str(&value) {
                headers.insert(name, value);
            }
        }
        headers
    }
}

impl App {
    /// Counts a failed request and passes its error on.
    fn fail(&self, error: ApiError) -> ApiError {
        self.metrics.inc("te_request_failure", &format!("err=\"{}\"", error.metric));
        error
    }

    /// Options TEI has that this server cannot honour are refused, not ignored; a prompt name is
    /// the index of its encoder.
    fn check_options(
        &self,
        direction: TruncationDirection,
        prompt_name: Option<&str>,
    ) -> Result<Option<usize>, ApiError> {
        if direction == TruncationDirection::Left {
            return Err(self.fail(ApiError::validation(
                "Input validation error: `truncation_direction` `left` is not supported: inputs are truncated on the right",
            )));
        }
        let Some(name) = prompt_name else { return Ok(None) };
        match self.prompt_names.iter().position(|n| n == name) {
            Some(i) => Ok(Some(i)),
            None if self.prompt_names.is_empty() => Err(self.fail(ApiError::validation(format!(
                "Input validation error: `prompt_name` is `{name}` but no prompts were found in the Sentence Transformers configuration"
            )))),
            None => Err(self.fail(ApiError::validation(format!(
                "Input validation error: `prompt_name` `{name}` is not in the Sentence Transformers configuration prompts ({})",
                self.prompt_names.join(", ")
            )))),
        }
    }

    fn check_batch(&self, n: usize) -> Result<(), ApiError> {
        if n > self.max_client_batch_size {
            return Err(ApiError::batch_size(n, self.max_client_batch_size));
        }
        Ok(())
    }

    /// Validates, tokenizes and queues every input, then waits for all answers, in input order.
    async fn infer(
        &self,
        items: Vec<Item>,
        batch: bool,
        task: Task,
        truncate: bool,
    ) -> Result<Done, ApiError> {
        let start = Instant::now();
        let method = if batch { "method=\"batch\"" } else { "method=\"single\"" };
        self.metrics.inc("te_request_count", method);
        let (count, success, prefix) = match task {
            Task::Embed { .. } | Task::EmbedAll => ("te_embed_count", "te_embed_success", "te_embed"),
            Task::Predict | Task::Rerank { .. } => ("te_predict_count", "te_predict_success", "te_predict"),
        };
        if items.is_empty() {
            return Err(self.fail(ApiError::empty("`inputs` cannot be empty")));
        }
        self.check_batch(items.len()).map_err(|e| self.fail(e))?;
        // Admission: a request is refused (429) only when every permit is held, by inputs queued or
        // running; once in, each of its inputs waits for its own permit, which the worker gives
        // back when it answers that input.
        let first =
            self.permits.clone().try_acquire_owned().map_err(|_| self.fail(ApiError::overloaded()))?;
        self.metrics.add(count, "", items.len() as u64);

        let characters = items
            .iter()
            .map(|i| match i {
                Item::Text(t) => t.chars().count(),
                Item::Pair(a, b) => a.chars().count() + b.chars().count(),
                Item::Ids(_) => 0,
            })
            .sum();
        let text_input = matches!(task, Task::Embed { prompt: Some(_) } | Task::Rerank { .. });
        let mut jobs = Vec::with_capacity(items.len());
        for item in items {
            let encoded = self.encode(&item, truncate).map_err(|e| self.fail(e))?;
            let texts = match item {
                _ if !text_input => Vec::new(),
                Item::Text(t) => vec![t],
                Item::Pair(a, b) => vec![a, b],
                Item::Ids(_) => {
                    return Err(self.fail(ApiError::validation(
                        "Input validation error: `prompt_name` cannot be used with token ids",
                    )))
                }
            };
            jobs.push(Job { encoded, texts, task });
        }
        let tokenization = start.elapsed();
        let tokens = jobs.iter().map(|j| j.encoded.len()).sum();
        for j in &jobs {
            self.metrics.observe("te_request_input_length", j.encoded.len() as f64);
        }

        let mut receivers = Vec::with_capacity(jobs.len());
        let mut first = Some(first);
        for job in jobs {
            let permit = match first.take() {
                Some(permit) => permit,
                None => self
                    .permits
                    .clone()
                    .acquire_owned()
                    .await
                    .map_err(|_| self.fail(ApiError::inference("the server is shutting down")))?,
            };
            receivers.push(self.queue.push(job, Some(permit)));
        }
        let mut outputs = Vec::with_capacity(receivers.len());
        for rx in receivers {
            match rx.await {
                Ok(Ok(output)) => outputs.push(output),
                Ok(Err(message)) => return Err(self.fail(ApiError::inference(message))),
                Err(_) => return Err(self.fail(ApiError::inference("the inference worker stopped"))),
            }
        }

        let total = start.elapsed();
        let n = outputs.len() as u32;
        let queue: Duration = outputs.iter().map(|o| o.queue_time).sum();
        let inference: Duration = outputs.iter().map(|o| o.inference_time).sum();
        let m = &self.metrics;
        m.inc("te_request_success", method);
        m.add(success, "", outputs.len() as u64);
        m.observe("te_request_duration", total.as_secs_f64());
        m.observe("te_request_tokenization_duration", tokenization.as_secs_f64());
        m.observe("te_request_queue_duration", (queue / n).as_secs_f64());
        m.observe("te_request_inference_duration", (inference / n).as_secs_f64());
        for o in &outputs {
            let (duration, queue, inference) = match prefix {
                "te_embed" => ("te_embed_duration", "te_embed_queue_duration", "te_embed_inference_duration"),
                _ => ("te_predict_duration", "te_predict_queue_duration", "te_predict_inference_duration"),
            };
            m.observe(duration, (tokenization / n + o.queue_time + o.inference_time).as_secs_f64());
            m.observe(queue, o.queue_time.as_secs_f64());
            m.observe(inference, o.inference_time.as_secs_f64());
        }
        Ok(Done { outputs, tokens, characters, total, tokenization, compute_type: self.compute_type })
    }

    /// One input, encoded as the pipelines encode it; too long without truncation is an error.
    fn encode(&self, item: &Item, truncate: bool) -> Result<Encoded, ApiError> {
        let empty = || ApiError::empty("Input validation error: `inputs` cannot be empty");
        let too_long = |n: usize| {
            ApiError::validation(format!(
                "Input validation error: `inputs` must have less than {} tokens. Given: {n}",
                self.max_input_length
            ))
        };
        let limit = self.max_input_length * 250;
        let clip = |text: &'_ str| -> Result<String, ApiError> {
            if text.len() <= limit {
                return Ok(text.to_string());
            }
            if !truncate {
                return Err(ApiError::validation(format!(
                    "Input validation error: `inputs` must have less than {limit} characters. Given: {}",
                    text.len()
                )));
            }
            // Far past max_input_length tokens anyway: spare the tokenizer the rest.
            let mut end = limit;
            while !text.is_char_boundary(end) {
                end -= 1;
            }
            Ok(text[..end].to_string())
        };
        match item {
            Item::Text(text) => {
                if text.is_empty() {
                    return Err(empty());
                }
                let text = clip(text)?;
                let encoded = self.tokenizer.encode(&text).map_err(ApiError::tokenizer)?;
                if encoded.truncated && !truncate {
                    let n = self.untruncated.encode(&text).map_err(ApiError::tokenizer)?.len();
                    return Err(too_long(n));
                }
                Ok(encoded)
            }
            Item::Pair(a, b) => {
                if a.is_empty() && b.is_empty() {
                    return Err(empty());
                }
                let (a, b) = (clip(a)?, clip(b)?);
                let encoded = self.tokenizer.encode_pair(&a, &b).map_err(ApiError::tokenizer)?;
                if encoded.truncated && !truncate {
                    let n = self.untruncated.encode_pair(&a, &b).map_err(ApiError::tokenizer)?.len();
                    return Err(too_long(n));
                }
                Ok(encoded)
            }
            // Token ids are used as given, special tokens included (TEI adds none to them).
            Item::Ids(ids) => {
                if ids.is_empty() {
                    return Err(empty());
                }
                let vocab = self.config.vocab_size;
                if let Some(bad) = ids.iter().find(|&&id| id as usize >= vocab) {
                    return Err(ApiError::validation(format!(
                        "Input validation error: token id {bad} is past the vocabulary ({vocab} tokens)"
                    )));
                }
                if ids.len() > self.max_input_length && !truncate {
                    return Err(too_long(ids.len()));
                }
                let truncated = ids.len() > self.max_input_length;
                let ids = &ids[..ids.len().min(self.max_input_length)];
                Ok(Encoded {
                    input_ids: ids.to_vec(),
                    token_type_ids: vec![0; ids.len()],
                    attention_mask: vec![1; ids.len()],
                    offsets: vec![(0, 0); ids.len()],
                    truncated,
                })
            }
        }
    }

    /// The pooled vector, cut to `dimensions` and then L2-normalised when asked, as TEI does.
    fn embedding(
        &self,
        output: &Output,
        dimensions: Option<usize>,
        normalize: bool,
    ) -> Result<Vec<f32>, ApiError> {
        let Value::Embedding(pooled) = &output.value else {
            return Err(ApiError::inference("expected an embedding"));
        };
        let mut v = pooled.clone();
        if let Some(d) = dimensions {
            if d == 0 {
                return Err(ApiError::validation("Input validation error: `dimensions` should be positive"));
            }
            if d > v.len() {
                return Err(ApiError::validation(
                    "Input validation error: `dimensions` should be smaller than the maximum embedding dimension.",
                ));
            }
            v.truncate(d);
        }
        if normalize {
            roformer::l2_normalize(&mut v);
        }
        Ok(v)
    }

    /// Every label with its score, best first (ascending sort then reversed, as TEI).
    fn predictions(&self, output: &Output, raw_scores: bool) -> Result<Vec<Prediction>, ApiError> {
        let Value::Classification(c) = &output.value else {
            return Err(ApiError::inference("expected a classification"));
        };
        let values = if raw_scores { &c.logits } else { &c.scores };
        if values.iter().any(|s| s.is_nan()) {
            return Err(ApiError::inference("score is NaN"));
        }
        let mut predictions: Vec<Prediction> = values
            .iter()
            .enumerate()
            .map(|(i, &score)| Prediction { score, label: self.config.label(i) })
            .collect();
        predictions.sort_by(|a, b| a.score.total_cmp(&b.score));
        predictions.reverse();
        Ok(predictions)
    }
}
