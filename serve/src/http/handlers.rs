//! TEI's routes: each parses its body, asks the inference core, and writes the answer with TEI's
//! `x-*` headers. Every error status a POST route can answer (400, 401, 408, 413, 415, 422, 424,
//! 429, 500) is in its `#[utoipa::path]` ([`Errors`]), and each path the router serves has its
//! own handler here, aliases included, so that the document is made from these attributes alone.

use std::sync::Arc;
use std::time::Duration;

use axum::extract::rejection::JsonRejection;
use axum::extract::{FromRequest, Request, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use base64::Engine as _;
use roformer::{Encoded, Tokenizer};

use super::error::{ApiError, OpenAiError};
use crate::api::*;
use crate::infer::error::InferError;
use crate::infer::inference::{self, Done, Infer, Kind};
use crate::infer::queue::{Task, Value};
use crate::infer::validation::Item;

pub struct App {
    pub infer: Infer,
    pub served_model_name: String,
    pub info: serde_json::Value,
}

type AppState = State<Arc<App>>;

impl App {
    /// A body axum refused (400, 413, 415, 422): counted, in TEI's error body.
    fn rejected(&self, rejection: JsonRejection) -> ApiError {
        self.infer.count_failure("validation");
        rejection.into()
    }

    /// A core error, counted.
    fn fail(&self, error: InferError) -> ApiError {
        self.infer.fail(error).into()
    }

    fn truncate_left(direction: TruncationDirection) -> bool {
        direction == TruncationDirection::Left
    }
}

/// POST / answers as the model's own route: /predict for a classifier, /rerank for a
/// cross-encoder, else /embed. The document lists the one of the loaded model.
pub async fn root(State(app): AppState, request: Request) -> Response {
    match app.infer.kind {
        Kind::Classifier => {
            let body = Json::<PredictRequest>::from_request(request, &()).await;
            root_predict(State(app), body).await.into_response()
        }
        Kind::Reranker => {
            let body = Json::<RerankRequest>::from_request(request, &()).await;
            root_rerank(State(app), body).await.into_response()
        }
        Kind::Embedding => {
            let body = Json::<EmbedRequest>::from_request(request, &()).await;
            root_embed(State(app), body).await.into_response()
        }
        Kind::Splade => {
            let body = Json::<EmbedSparseRequest>::from_request(request, &()).await;
            root_embed_sparse(State(app), body).await.into_response()
        }
    }
}

/// POST / on a SPLADE model: /embed_sparse.
#[utoipa::path(post, path = "/", operation_id = "root", tag = "Text Embeddings Inference", request_body = EmbedSparseRequest,
    responses((status = 200, description = "As /embed_sparse", body = Vec<Vec<SparseValue>>), Errors))]
pub async fn root_embed_sparse(
    state: AppState,
    body: Result<Json<EmbedSparseRequest>, JsonRejection>,
) -> Result<Response, ApiError> {
    embed_sparse(state, body).await
}

/// POST / on a classifier: /predict.
#[utoipa::path(post, path = "/", operation_id = "root", tag = "Text Embeddings Inference", request_body = PredictRequest,
    responses((status = 200, description = "As /predict", body = PredictResponse), Errors))]
pub async fn root_predict(
    state: AppState,
    body: Result<Json<PredictRequest>, JsonRejection>,
) -> Result<Response, ApiError> {
    predict(state, body).await
}

/// POST / on a cross-encoder: /rerank.
#[utoipa::path(post, path = "/", operation_id = "root", tag = "Text Embeddings Inference", request_body = RerankRequest,
    responses((status = 200, description = "As /rerank", body = Vec<Rank>), Errors))]
pub async fn root_rerank(
    state: AppState,
    body: Result<Json<RerankRequest>, JsonRejection>,
) -> Result<Response, ApiError> {
    rerank(state, body).await
}

/// POST / on an embedding model: /embed.
#[utoipa::path(post, path = "/", operation_id = "root", tag = "Text Embeddings Inference", request_body = EmbedBody,
    responses((status = 200, description = "As /embed", body = Vec<Vec<f32>>), Errors))]
pub async fn root_embed(
    state: AppState,
    body: Result<Json<EmbedRequest>, JsonRejection>,
) -> Result<Response, ApiError> {
    embed(state, body).await
}

/// The pooled embedding of each input.
#[utoipa::path(post, path = "/embed", tag = "Text Embeddings Inference", request_body = EmbedBody,
    responses((status = 200, description = "One embedding per input", body = Vec<Vec<f32>>), Errors))]
pub async fn embed(
    State(app): AppState,
    body: Result<Json<EmbedRequest>, JsonRejection>,
) -> Result<Response, ApiError> {
    let Json(request) = body.map_err(|e| app.rejected(e))?;
    let prompt = app
        .infer
        .validation
        .check_options(App::truncate_left(request.truncation_direction), request.prompt_name.as_deref())
        .map_err(|e| app.fail(e))?;
    app.infer.check_normalize(request.normalize).map_err(|e| app.fail(e))?;
    let (items, batch) = request.inputs.into_items();
    let truncate = request.truncate.unwrap_or(app.infer.auto_truncate);
    let done = app.infer.infer(items, batch, Task::Embed { prompt }, truncate).await?;
    let vectors = done
        .outputs
        .iter()
        .map(|o| inference::embedding(o, request.dimensions.map(|d| d.0), request.normalize))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| app.fail(e))?;
    Ok((headers(&done), Json(vectors)).into_response())
}

/// Every label's score for each input (a text or a pair), best first.
#[utoipa::path(post, path = "/predict", tag = "Text Embeddings Inference", request_body = PredictRequest,
    responses((status = 200, description = "The labels of one input, or a list per input of a batch", body = PredictResponse), Errors))]
pub async fn predict(
    State(app): AppState,
    body: Result<Json<PredictRequest>, JsonRejection>,
) -> Result<Response, ApiError> {
    let Json(request) = body.map_err(|e| app.rejected(e))?;
    app.infer
        .validation
        .check_options(App::truncate_left(request.truncation_direction), None)
        .map_err(|e| app.fail(e))?;
    let top_k = request.parameters.and_then(|p| p.top_k).map(|k| k.0);
    if top_k == Some(0) {
        return Err(
            app.fail(InferError::Validation("Input validation error: `top_k` must be at least 1".into()))
        );
    }
    let (items, batch) = match request.inputs {
        PredictInput::Single(item) => (vec![item], false),
        PredictInput::Batch(items) => (items, true),
        PredictInput::Invalid { length, message } => {
            app.infer.validation.check_batch(length).map_err(|e| app.fail(e))?;
            let message =
                format!("Failed to deserialize the JSON body into the target type: inputs: {message}");
            return Err(app.fail(InferError::Validation(message)));
        }
    };
    let truncate = request.truncate.unwrap_or(app.infer.auto_truncate);
    let done = app.infer.infer(items, batch, Task::Predict, truncate).await?;
    let mut all = Vec::with_capacity(done.outputs.len());
    for output in &done.outputs {
        let scored =
            inference::predictions(output, &app.infer.labels, request.raw_scores).map_err(|e| app.fail(e))?;
        let mut predictions: Vec<Prediction> =
            scored.into_iter().map(|s| Prediction { score: s.score, label: s.label }).collect();
        if let Some(k) = top_k {
            predictions.truncate(k);
        }
        all.push(predictions);
    }
    let body = if batch { PredictResponse::Batch(all) } else { PredictResponse::Single(all.remove(0)) };
    Ok((headers(&done), Json(body)).into_response())
}

/// OpenAI's embeddings route: always normalised, truncated as `--auto-truncate` says.
#[utoipa::path(post, path = "/v1/embeddings", tag = "Text Embeddings Inference", request_body = OpenAiBody,
    responses((status = 200, description = "The embeddings, in OpenAI's shape", body = OpenAiResponse), OpenAiErrors))]
pub async fn openai_embeddings(
    State(app): AppState,
    body: Result<Json<OpenAiRequest>, JsonRejection>,
) -> Result<Response, OpenAiError> {
    let Json(request) = body.map_err(|e| app.rejected(e))?;
    let prompt =
        app.infer.validation.check_options(false, request.prompt_name.as_deref()).map_err(|e| app.fail(e))?;
    app.infer.check_normalize(true).map_err(|e| app.fail(e))?;
    let (items, batch) = request.input.into_items();
    let done = app.infer.infer(items, batch, Task::Embed { prompt }, app.infer.auto_truncate).await?;
    let mut data = Vec::with_capacity(done.outputs.len());
    for (index, output) in done.outputs.iter().enumerate() {
        let vector =
            inference::embedding(output, request.dimensions.map(|d| d.0), true).map_err(|e| app.fail(e))?;
        let embedding = match request.encoding_format {
            EncodingFormat::Float => OpenAiVector::Float(vector),
            // Little-endian f32 bytes, as TEI sends on x86_64 and as the openai client decodes.
            EncodingFormat::Base64 => {
                let bytes: Vec<u8> = vector.iter().flat_map(|x| x.to_le_bytes()).collect();
                OpenAiVector::Base64(base64::engine::general_purpose::STANDARD.encode(bytes))
            }
        };
        data.push(OpenAiEmbedding { object: "embedding".into(), embedding, index });
    }
    let body = OpenAiResponse {
        object: "list".into(),
        data,
        model: app.served_model_name.clone(),
        usage: OpenAiUsage { prompt_tokens: done.tokens, total_tokens: done.tokens },
    };
    Ok((headers(&done), Json(body)).into_response())
}

/// /embeddings: /v1/embeddings under the path TEI also serves it.
#[utoipa::path(post, path = "/embeddings", operation_id = "openai_embeddings_alias", tag = "Text Embeddings Inference",
    request_body = OpenAiBody,
    responses((status = 200, description = "The embeddings, in OpenAI's shape", body = OpenAiResponse), OpenAiErrors))]
pub async fn openai_embeddings_alias(
    state: AppState,
    body: Result<Json<OpenAiRequest>, JsonRejection>,
) -> Result<Response, OpenAiError> {
    openai_embeddings(state, body).await
}

/// TEI's /rerank: every text scored against the query by the cross-encoder, best first (texts
/// of equal score keep their order, as `Reranker::rank`).
#[utoipa::path(post, path = "/rerank", tag = "Text Embeddings Inference", request_body = RerankRequest,
    responses((status = 200, description = "The texts' ranks, best first", body = Vec<Rank>), Errors))]
pub async fn rerank(
    State(app): AppState,
    body: Result<Json<RerankRequest>, JsonRejection>,
) -> Result<Response, ApiError> {
    let Json(request) = body.map_err(|e| app.rejected(e))?;
    let validation = &app.infer.validation;
    let items = validation.rerank_items(&request.query, &request.texts).map_err(|e| app.fail(e))?;
    validation
        .check_options(App::truncate_left(request.truncation_direction), None)
        .map_err(|e| app.fail(e))?;
    let truncate = request.truncate.unwrap_or(app.infer.auto_truncate);
    let task = Task::Rerank { raw_scores: request.raw_scores };
    let done = app.infer.infer(items, true, task, truncate).await?;
    let ranks: Vec<Rank> = inference::ranks(&done)
        .map_err(|e| app.fail(e))?
        .into_iter()
        .map(|(index, score)| Rank {
            index,
            text: request.return_text.then(|| request.texts[index].clone()),
            score,
        })
        .collect();
    Ok((headers(&done), Json(ranks)).into_response())
}

/// TEI's /similarity: the cosine similarity of each sentence's embedding to the source
/// sentence's.
#[utoipa::path(post, path = "/similarity", tag = "Text Embeddings Inference", request_body = SimilarityRequest,
    responses((status = 200, description = "One cosine similarity per sentence", body = Vec<f32>), Errors))]
pub async fn similarity(
    State(app): AppState,
    body: Result<Json<SimilarityRequest>, JsonRejection>,
) -> Result<Response, ApiError> {
    let Json(request) = body.map_err(|e| app.rejected(e))?;
    let SimilarityInput { source_sentence, sentences } = request.inputs;
    if sentences.is_empty() {
        return Err(app.fail(InferError::Empty("`inputs.sentences` cannot be empty".into())));
    }
    // The source sentence counts in the batch, as in TEI.
    app.infer.validation.check_batch(sentences.len() + 1).map_err(|e| app.fail(e))?;
    let parameters = request.parameters.unwrap_or_default();
    let prompt = app
        .infer
        .validation
        .check_options(App::truncate_left(parameters.truncation_direction), parameters.prompt_name.as_deref())
        .map_err(|e| app.fail(e))?;
    let items = std::iter::once(source_sentence).chain(sentences).map(Item::Text).collect();
    let truncate = parameters.truncate.unwrap_or(app.infer.auto_truncate);
    let done = app.infer.infer(items, true, Task::Embed { prompt }, truncate).await?;
    let vectors = done
        .outputs
        .iter()
        .map(|o| inference::embedding(o, None, false))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| app.fail(e))?;
    let scores: Vec<f32> = vectors[1..].iter().map(|v| roformer::cosine_similarity(&vectors[0], v)).collect();
    Ok((headers(&done), Json(scores)).into_response())
}

/// TEI's /embed_all: every token's last hidden state, special tokens included, one list per input.
#[utoipa::path(post, path = "/embed_all", tag = "Text Embeddings Inference", request_body = EmbedAllRequest,
    responses((status = 200, description = "Each input's token embeddings", body = Vec<Vec<Vec<f32>>>), Errors))]
pub async fn embed_all(
    State(app): AppState,
    body: Result<Json<EmbedAllRequest>, JsonRejection>,
) -> Result<Response, ApiError> {
    let Json(request) = body.map_err(|e| app.rejected(e))?;
    let left = App::truncate_left(request.truncation_direction);
    let prompt_name = request.prompt_name.as_deref();
    app.infer.validation.check_no_prompt(left, prompt_name, "/embed_all").map_err(|e| app.fail(e))?;
    let (items, batch) = request.inputs.into_items();
    let truncate = request.truncate.unwrap_or(app.infer.auto_truncate);
    let done = app.infer.infer(items, batch, Task::EmbedAll, truncate).await?;
    let mut all = Vec::with_capacity(done.outputs.len());
    for output in &done.outputs {
        let Value::Tokens(tokens) = &output.value else {
            return Err(app.fail(InferError::backend("expected token embeddings")));
        };
        all.push(tokens);
    }
    Ok((headers(&done), Json(all)).into_response())
}

/// TEI's /embed_sparse: each input's SPLADE weights, the vocabulary entries above zero by
/// increasing index (424 unless the model was loaded with `--pooling splade`).
#[utoipa::path(post, path = "/embed_sparse", tag = "Text Embeddings Inference", request_body = EmbedSparseRequest,
    responses((status = 200, description = "One sparse embedding per input", body = Vec<Vec<SparseValue>>), Errors))]
pub async fn embed_sparse(
    State(app): AppState,
    body: Result<Json<EmbedSparseRequest>, JsonRejection>,
) -> Result<Response, ApiError> {
    let Json(request) = body.map_err(|e| app.rejected(e))?;
    let left = App::truncate_left(request.truncation_direction);
    let prompt_name = request.prompt_name.as_deref();
    app.infer.validation.check_no_prompt(left, prompt_name, "/embed_sparse").map_err(|e| app.fail(e))?;
    let (items, batch) = request.inputs.into_items();
    let truncate = request.truncate.unwrap_or(app.infer.auto_truncate);
    let done = app.infer.infer(items, batch, Task::EmbedSparse, truncate).await?;
    let mut all = Vec::with_capacity(done.outputs.len());
    for output in &done.outputs {
        let Value::Sparse(sparse) = &output.value else {
            return Err(app.fail(InferError::backend("expected a sparse embedding")));
        };
        let values = sparse.indices.iter().zip(&sparse.values);
        all.push(values.map(|(&i, &value)| SparseValue { index: i as usize, value }).collect::<Vec<_>>());
    }
    Ok((headers(&done), Json(all)).into_response())
}

/// The tokens of each text, untruncated.
#[utoipa::path(post, path = "/tokenize", tag = "Text Embeddings Inference", request_body = TokenizeRequest,
    responses((status = 200, description = "Each text's tokens", body = Vec<Vec<Token>>), Errors))]
pub async fn tokenize(
    State(app): AppState,
    body: Result<Json<TokenizeRequest>, JsonRejection>,
) -> Result<Json<Vec<Vec<Token>>>, ApiError> {
    let Json(request) = body.map_err(|e| app.rejected(e))?;
    if let Some(name) = request.prompt_name {
        return Err(app.fail(InferError::Validation(format!(
            "Input validation error: `prompt_name` `{name}` is not supported on /tokenize"
        ))));
    }
    let validation = &app.infer.validation;
    let texts = match request.inputs {
        TokenizeInput::Single(text) => vec![text],
        TokenizeInput::Batch(texts) => {
            validation.check_batch(texts.len()).map_err(|e| app.fail(e))?;
            texts
        }
    };
    let mut out = Vec::with_capacity(texts.len());
    for text in &texts {
        let encoded = validation.tokenize(text).map_err(|e| app.fail(e))?;
        out.push(tokens(&validation.untruncated, text, &encoded, request.add_special_tokens));
    }
    Ok(Json(out))
}

/// TEI's tokens: byte offsets into the text; special tokens with their own text and no offsets.
pub fn tokens(tokenizer: &Tokenizer, text: &str, encoded: &Encoded, add_special_tokens: bool) -> Vec<Token> {
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

/// Token ids back to text.
#[utoipa::path(post, path = "/decode", tag = "Text Embeddings Inference", request_body = DecodeRequest,
    responses((status = 200, description = "One text per list of ids", body = Vec<String>), Errors))]
pub async fn decode(
    State(app): AppState,
    body: Result<Json<DecodeRequest>, JsonRejection>,
) -> Result<Json<Vec<String>>, ApiError> {
    let Json(request) = body.map_err(|e| app.rejected(e))?;
    let validation = &app.infer.validation;
    let batch = match request.ids.into_lists() {
        (batch, true) if batch.is_empty() => {
            return Err(app.fail(InferError::Empty("`ids` cannot be empty".into())))
        }
        (batch, true) => {
            validation.check_batch(batch.len()).map_err(|e| app.fail(e))?;
            batch
        }
        (single, false) => single,
    };
    let mut out = Vec::with_capacity(batch.len());
    for ids in &batch {
        out.push(validation.decode(ids, request.skip_special_tokens).map_err(|e| app.fail(e))?);
    }
    Ok(Json(out))
}

/// 200 only when a forward pass through the queue answers; also GET / and /ping.
#[utoipa::path(get, path = "/health", tag = "Text Embeddings Inference",
    responses((status = 200, description = "Everything is working fine"),
        (status = 503, description = "The model does not answer", body = ErrorResponse)))]
pub async fn health(State(app): AppState) -> Response {
    if app.infer.health().await {
        StatusCode::OK.into_response()
    } else {
        ApiError::from(InferError::Unhealthy).into_response()
    }
}

/// /health under the path TEI also serves it.
#[utoipa::path(get, path = "/ping", operation_id = "ping", tag = "Text Embeddings Inference",
    responses((status = 200, description = "Everything is working fine"),
        (status = 503, description = "The model does not answer", body = ErrorResponse)))]
pub async fn ping(state: AppState) -> Response {
    health(state).await
}

/// GET /: /health.
#[utoipa::path(get, path = "/", operation_id = "root_health", tag = "Text Embeddings Inference",
    responses((status = 200, description = "Everything is working fine"),
        (status = 503, description = "The model does not answer", body = ErrorResponse)))]
pub async fn root_health(state: AppState) -> Response {
    health(state).await
}

/// The model and the server's settings, as TEI's /info.
#[utoipa::path(get, path = "/info", tag = "Text Embeddings Inference",
    responses((status = 200, description = "The served model and the server's limits", body = serde_json::Value)))]
pub async fn info(State(app): AppState) -> Json<serde_json::Value> {
    Json(app.info.clone())
}

/// Prometheus metrics under TEI's `te_*` names.
#[utoipa::path(get, path = "/metrics", tag = "Text Embeddings Inference",
    responses((status = 200, description = "Prometheus text exposition", body = String, content_type = "text/plain")))]
pub async fn metrics(State(app): AppState) -> Response {
    let content_type = HeaderValue::from_static("text/plain; version=0.0.4; charset=utf-8");
    ([(header::CONTENT_TYPE, content_type)], app.infer.metrics.render()).into_response()
}

/// TEI's `x-*` headers; the phase times are averages per input, as TEI gives them.
fn headers(done: &Done) -> HeaderMap {
    let n = done.outputs.len().max(1) as u32;
    let ms = |d: Duration| d.as_millis().to_string();
    let queue: Duration = done.outputs.iter().map(|o| o.queue_time).sum();
    let inference: Duration = done.outputs.iter().map(|o| o.inference_time).sum();
    let mut headers = HeaderMap::new();
    for (name, value) in [
        ("x-compute-type", done.compute_type.to_string()),
        ("x-compute-time", ms(done.total)),
        ("x-compute-characters", done.characters.to_string()),
        ("x-compute-tokens", done.tokens.to_string()),
        ("x-total-time", ms(done.total)),
        ("x-tokenization-time", ms(done.tokenization / n)),
        ("x-queue-time", ms(queue / n)),
        ("x-inference-time", ms(inference / n)),
    ] {
        if let Ok(value) = HeaderValue::from_str(&value) {
            headers.insert(name, value);
        }
    }
    headers
}
