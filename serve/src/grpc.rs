//! TEI's gRPC API (`tei.v1`, from proto/tei.proto) over the same inference core as the HTTP
//! routes: Info, Embed (Embed, EmbedSparse, EmbedAll), Predict (Predict, PredictPair), Rerank and
//! Tokenize (Tokenize, Decode), each with TEI's streaming form. It answers on the API port, beside
//! HTTP/1.1 (feature `grpc`).
//!
//! As in TEI: `truncate` is the request's own (false unless set; `--auto-truncate` is for HTTP),
//! `normalize` defaults to true, a stream's answers come back in the order of its requests, and
//! errors map onto gRPC codes as TEI maps its error types (invalid argument, resource exhausted,
//! failed precondition, unavailable); a missing or wrong `authorization: Bearer` key under
//! `--api-key` is unauthenticated.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use tokio_stream::{Stream, StreamExt};
use tonic::{Request, Response, Status, Streaming};

use crate::http::handlers::{self, App};
use crate::infer::error::InferError;
use crate::infer::inference::{self, Done, Kind};
use crate::infer::queue::{Task, Value};
use crate::infer::validation::Item;

/// The messages and services generated from proto/tei.proto.
pub mod pb {
    #![allow(missing_docs, clippy::all, clippy::pedantic)]
    tonic::include_proto!("tei.v1");
}

use pb::embed_server::{Embed, EmbedServer};
use pb::info_server::{Info, InfoServer};
use pb::predict_server::{Predict, PredictServer};
use pb::rerank_server::{Rerank, RerankServer};
use pb::tokenize_server::{Tokenize, TokenizeServer};

/// The five services as axum routes, to merge beside the HTTP ones: each at its own paths
/// (`/tei.v1.Embed/...`), so that any other path is still the HTTP router's (404 and all); every
/// request checked for the API key, messages up to `payload_limit` bytes.
pub fn router(app: Arc<App>, api_key: Option<String>, payload_limit: usize) -> axum::Router {
    use tonic::server::NamedService;
    let service = Grpc { app };
    let check = move |request: Request<()>| authorize(api_key.as_deref(), request);
    let mut router = axum::Router::new();
    macro_rules! route {
        ($($server:ident),+) => {$(
            let server = $server::new(service.clone())
                .max_decoding_message_size(payload_limit)
                .max_encoding_message_size(usize::MAX);
            let path = format!("/{}/{{*method}}", <$server<Grpc> as NamedService>::NAME);
            router = router.route_service(&path, tonic::service::interceptor::InterceptedService::new(server, check.clone()));
        )+};
    }
    route!(InfoServer, EmbedServer, PredictServer, RerankServer, TokenizeServer);
    router
}

/// TEI's check of `authorization: Bearer KEY`.
fn authorize(api_key: Option<&str>, request: Request<()>) -> Result<Request<()>, Status> {
    let Some(key) = api_key else { return Ok(request) };
    let given = request.metadata().get("authorization").and_then(|v| v.to_str().ok());
    match given.and_then(|v| v.strip_prefix("Bearer ")) {
        Some(token) if token == key => Ok(request),
        _ => Err(Status::unauthenticated("Unauthorized")),
    }
}

#[derive(Clone)]
struct Grpc {
    app: Arc<App>,
}

/// TEI's codes for its error types.
fn status(e: InferError) -> Status {
    let message = e.to_string();
    match e {
        InferError::Empty(_) | InferError::Validation(_) | InferError::BatchSize { .. } => {
            Status::invalid_argument(message)
        }
        InferError::Overloaded => Status::resource_exhausted(message),
        InferError::Unhealthy => Status::unavailable(message),
        InferError::Tokenizer(_) | InferError::ModelType(_) | InferError::Backend(_) => {
            Status::failed_precondition(message)
        }
    }
}

fn metadata(done: &Done) -> pb::Metadata {
    let n = done.outputs.len().max(1) as u32;
    let nanos = |d: Duration| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
    let queue: Duration = done.outputs.iter().map(|o| o.queue_time).sum();
    let inference: Duration = done.outputs.iter().map(|o| o.inference_time).sum();
    pb::Metadata {
        compute_chars: done.characters as u32,
        compute_tokens: done.tokens as u32,
        total_time_ns: nanos(done.total),
        tokenization_time_ns: nanos(done.tokenization),
        queue_time_ns: nanos(queue / n),
        inference_time_ns: nanos(inference / n),
    }
}

type Answers<T> = Pin<Box<dyn Stream<Item = Result<T, Status>> + Send>>;

/// A stream of requests answered one by one, in order, by `answer`.
fn each<Q, A, F, Fut>(service: &Grpc, requests: Request<Streaming<Q>>, answer: F) -> Response<Answers<A>>
where
    Q: Send + 'static,
    A: Send + 'static,
    F: Fn(Grpc, Q) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<A, Status>> + Send + 'static,
{
    let service = service.clone();
    let answers = requests.into_inner().then(move |request| {
        let answer = request.map(|r| answer(service.clone(), r));
        async move { answer?.await }
    });
    Response::new(Box::pin(answers))
}

fn left(direction: i32) -> bool {
    direction == pb::TruncationDirection::Left as i32
}

impl Grpc {
    fn fail(&self, e: InferError) -> Status {
        status(self.app.infer.fail(e))
    }

    async fn embed_one(self, r: pb::EmbedRequest) -> Result<pb::EmbedResponse, Status> {
        let infer = &self.app.infer;
        let prompt = infer
            .validation
            .check_options(left(r.truncation_direction), r.prompt_name.as_deref())
            .map_err(|e| self.fail(e))?;
        let normalize = r.normalize.unwrap_or(true);
        infer.check_normalize(normalize).map_err(|e| self.fail(e))?;
        let done = infer.infer(vec![Item::Text(r.inputs)], false, Task::Embed { prompt }, r.truncate).await;
        let done = done.map_err(status)?;
        let dimensions = r.dimensions.map(|d| d as usize);
        let embeddings =
            inference::embedding(&done.outputs[0], dimensions, normalize).map_err(|e| self.fail(e))?;
        Ok(pb::EmbedResponse { embeddings, metadata: Some(metadata(&done)) })
    }

    async fn sparse_one(self, r: pb::EmbedSparseRequest) -> Result<pb::EmbedSparseResponse, Status> {
        let infer = &self.app.infer;
        self.no_prompt(r.truncation_direction, r.prompt_name.as_deref(), "EmbedSparse")?;
        let done = infer.infer(vec![Item::Text(r.inputs)], false, Task::EmbedSparse, r.truncate).await;
        let done = done.map_err(status)?;
        let Value::Sparse(sparse) = &done.outputs[0].value else {
            return Err(self.fail(InferError::backend("expected a sparse embedding")));
        };
        let values = sparse.indices.iter().zip(&sparse.values);
        let sparse_embeddings = values.map(|(&index, &value)| pb::SparseValue { index, value }).collect();
        Ok(pb::EmbedSparseResponse { sparse_embeddings, metadata: Some(metadata(&done)) })
    }

    async fn all_one(self, r: pb::EmbedAllRequest) -> Result<pb::EmbedAllResponse, Status> {
        let infer = &self.app.infer;
        self.no_prompt(r.truncation_direction, r.prompt_name.as_deref(), "EmbedAll")?;
        let done = infer.infer(vec![Item::Text(r.inputs)], false, Task::EmbedAll, r.truncate).await;
        let done = done.map_err(status)?;
        let Value::Tokens(tokens) = &done.outputs[0].value else {
            return Err(self.fail(InferError::backend("expected token embeddings")));
        };
        let token_embeddings = tokens.iter().map(|t| pb::TokenEmbedding { embeddings: t.clone() }).collect();
        Ok(pb::EmbedAllResponse { token_embeddings, metadata: Some(metadata(&done)) })
    }

    /// Checks the options of a call that takes no prompt, as the HTTP routes do.
    fn no_prompt(&self, direction: i32, prompt_name: Option<&str>, call: &str) -> Result<(), Status> {
        let check = self.app.infer.validation.check_no_prompt(left(direction), prompt_name, call);
        check.map_err(|e| self.fail(e))
    }

    async fn predict_one(
        self,
        item: Item,
        truncate: bool,
        raw: bool,
        direction: i32,
    ) -> Result<pb::PredictResponse, Status> {
        let infer = &self.app.infer;
        infer.validation.check_options(left(direction), None).map_err(|e| self.fail(e))?;
        let done = infer.infer(vec![item], false, Task::Predict, truncate).await.map_err(status)?;
        let scored =
            inference::predictions(&done.outputs[0], &infer.labels, raw).map_err(|e| self.fail(e))?;
        let predictions =
            scored.into_iter().map(|s| pb::Prediction { score: s.score, label: s.label }).collect();
        Ok(pb::PredictResponse { predictions, metadata: Some(metadata(&done)) })
    }

    async fn pair_one(self, r: pb::PredictPairRequest) -> Result<pb::PredictResponse, Status> {
        let item = match <[String; 2]>::try_from(r.inputs) {
            Ok([a, b]) => Item::Pair(a, b),
            Err(inputs) => {
                return Err(self.fail(InferError::Validation(format!(
                    "Input validation error: `inputs` must have two texts, not {}",
                    inputs.len()
                ))))
            }
        };
        self.predict_one(item, r.truncate, r.raw_scores, r.truncation_direction).await
    }

    async fn rerank_all(
        self,
        query: String,
        texts: Vec<String>,
        (truncate, raw_scores, return_text, direction): (bool, bool, bool, i32),
    ) -> Result<pb::RerankResponse, Status> {
        let infer = &self.app.infer;
        let items = infer.validation.rerank_items(&query, &texts).map_err(|e| self.fail(e))?;
        infer.validation.check_options(left(direction), None).map_err(|e| self.fail(e))?;
        let done = infer.infer(items, true, Task::Rerank { raw_scores }, truncate).await.map_err(status)?;
        let ranks = inference::ranks(&done)
            .map_err(|e| self.fail(e))?
            .into_iter()
            .map(|(index, score)| pb::Rank {
                index: index as u32,
                text: return_text.then(|| texts[index].clone()),
                score,
            })
            .collect();
        Ok(pb::RerankResponse { ranks, metadata: Some(metadata(&done)) })
    }

    fn tokenize_one(&self, r: pb::EncodeRequest) -> Result<pb::EncodeResponse, Status> {
        if let Some(name) = r.prompt_name {
            return Err(self.fail(InferError::Validation(format!(
                "Input validation error: `prompt_name` `{name}` is not supported on Tokenize"
            ))));
        }
        let validation = &self.app.infer.validation;
        let encoded = validation.tokenize(&r.inputs).map_err(|e| self.fail(e))?;
        let tokens = handlers::tokens(&validation.untruncated, &r.inputs, &encoded, r.add_special_tokens)
            .into_iter()
            .map(|t| pb::SimpleToken {
                id: t.id,
                text: t.text,
                special: t.special,
                start: t.start.map(|s| s as u32),
                stop: t.stop.map(|s| s as u32),
            })
            .collect();
        Ok(pb::EncodeResponse { tokens })
    }

    fn decode_one(&self, r: pb::DecodeRequest) -> Result<pb::DecodeResponse, Status> {
        let text =
            self.app.infer.validation.decode(&r.ids, r.skip_special_tokens).map_err(|e| self.fail(e))?;
        Ok(pb::DecodeResponse { text })
    }
}

#[tonic::async_trait]
impl Info for Grpc {
    async fn info(&self, _: Request<pb::InfoRequest>) -> Result<Response<pb::InfoResponse>, Status> {
        let info = &self.app.info;
        let text = |key: &str| info[key].as_str().map(str::to_string);
        let count = |key: &str| info[key].as_u64().map(|n| n as u32);
        let model_type = match self.app.infer.kind {
            Kind::Embedding | Kind::Splade => pb::ModelType::Embedding,
            Kind::Classifier => pb::ModelType::Classifier,
            Kind::Reranker => pb::ModelType::Reranker,
        };
        Ok(Response::new(pb::InfoResponse {
            version: text("version").unwrap_or_default(),
            sha: text("sha"),
            docker_label: text("docker_label"),
            model_id: text("model_id").unwrap_or_default(),
            model_sha: text("model_sha"),
            model_dtype: text("model_dtype").unwrap_or_default(),
            model_type: model_type as i32,
            max_concurrent_requests: count("max_concurrent_requests").unwrap_or_default(),
            max_input_length: count("max_input_length").unwrap_or_default(),
            max_batch_tokens: count("max_batch_tokens").unwrap_or_default(),
            max_batch_requests: count("max_batch_requests"),
            max_client_batch_size: count("max_client_batch_size").unwrap_or_default(),
            tokenization_workers: count("tokenization_workers").unwrap_or_default(),
        }))
    }
}

#[tonic::async_trait]
impl Embed for Grpc {
    async fn embed(&self, r: Request<pb::EmbedRequest>) -> Result<Response<pb::EmbedResponse>, Status> {
        self.clone().embed_one(r.into_inner()).await.map(Response::new)
    }

    type EmbedStreamStream = Answers<pb::EmbedResponse>;
    async fn embed_stream(
        &self,
        r: Request<Streaming<pb::EmbedRequest>>,
    ) -> Result<Response<Self::EmbedStreamStream>, Status> {
        Ok(each(self, r, Grpc::embed_one))
    }

    async fn embed_sparse(
        &self,
        r: Request<pb::EmbedSparseRequest>,
    ) -> Result<Response<pb::EmbedSparseResponse>, Status> {
        self.clone().sparse_one(r.into_inner()).await.map(Response::new)
    }

    type EmbedSparseStreamStream = Answers<pb::EmbedSparseResponse>;
    async fn embed_sparse_stream(
        &self,
        r: Request<Streaming<pb::EmbedSparseRequest>>,
    ) -> Result<Response<Self::EmbedSparseStreamStream>, Status> {
        Ok(each(self, r, Grpc::sparse_one))
    }

    async fn embed_all(
        &self,
        r: Request<pb::EmbedAllRequest>,
    ) -> Result<Response<pb::EmbedAllResponse>, Status> {
        self.clone().all_one(r.into_inner()).await.map(Response::new)
    }

    type EmbedAllStreamStream = Answers<pb::EmbedAllResponse>;
    async fn embed_all_stream(
        &self,
        r: Request<Streaming<pb::EmbedAllRequest>>,
    ) -> Result<Response<Self::EmbedAllStreamStream>, Status> {
        Ok(each(self, r, Grpc::all_one))
    }
}

#[tonic::async_trait]
impl Predict for Grpc {
    async fn predict(&self, r: Request<pb::PredictRequest>) -> Result<Response<pb::PredictResponse>, Status> {
        let r = r.into_inner();
        let answer =
            self.clone().predict_one(Item::Text(r.inputs), r.truncate, r.raw_scores, r.truncation_direction);
        answer.await.map(Response::new)
    }

    async fn predict_pair(
        &self,
        r: Request<pb::PredictPairRequest>,
    ) -> Result<Response<pb::PredictResponse>, Status> {
        self.clone().pair_one(r.into_inner()).await.map(Response::new)
    }

    type PredictStreamStream = Answers<pb::PredictResponse>;
    async fn predict_stream(
        &self,
        r: Request<Streaming<pb::PredictRequest>>,
    ) -> Result<Response<Self::PredictStreamStream>, Status> {
        Ok(each(self, r, |service, r: pb::PredictRequest| {
            service.predict_one(Item::Text(r.inputs), r.truncate, r.raw_scores, r.truncation_direction)
        }))
    }

    type PredictPairStreamStream = Answers<pb::PredictResponse>;
    async fn predict_pair_stream(
        &self,
        r: Request<Streaming<pb::PredictPairRequest>>,
    ) -> Result<Response<Self::PredictPairStreamStream>, Status> {
        Ok(each(self, r, Grpc::pair_one))
    }
}

#[tonic::async_trait]
impl Rerank for Grpc {
    async fn rerank(&self, r: Request<pb::RerankRequest>) -> Result<Response<pb::RerankResponse>, Status> {
        let r = r.into_inner();
        let options = (r.truncate, r.raw_scores, r.return_text, r.truncation_direction);
        self.clone().rerank_all(r.query, r.texts, options).await.map(Response::new)
    }

    /// The texts of every message, scored against the first message's query, with the first
    /// message's options, as TEI reads the stream.
    async fn rerank_stream(
        &self,
        r: Request<Streaming<pb::RerankStreamRequest>>,
    ) -> Result<Response<pb::RerankResponse>, Status> {
        let mut stream = r.into_inner();
        let mut first = None;
        let mut texts = Vec::new();
        while let Some(message) = stream.next().await {
            let message = message?;
            texts.push(message.text.clone());
            first.get_or_insert(message);
        }
        // An empty stream has no texts: `rerank_items` refuses it, as it refuses an empty `texts`.
        let first = first.unwrap_or_default();
        let options = (first.truncate, first.raw_scores, first.return_text, first.truncation_direction);
        self.clone().rerank_all(first.query, texts, options).await.map(Response::new)
    }
}

#[tonic::async_trait]
impl Tokenize for Grpc {
    async fn tokenize(&self, r: Request<pb::EncodeRequest>) -> Result<Response<pb::EncodeResponse>, Status> {
        self.tokenize_one(r.into_inner()).map(Response::new)
    }

    type TokenizeStreamStream = Answers<pb::EncodeResponse>;
    async fn tokenize_stream(
        &self,
        r: Request<Streaming<pb::EncodeRequest>>,
    ) -> Result<Response<Self::TokenizeStreamStream>, Status> {
        Ok(each(self, r, |service, r| async move { service.tokenize_one(r) }))
    }

    async fn decode(&self, r: Request<pb::DecodeRequest>) -> Result<Response<pb::DecodeResponse>, Status> {
        self.decode_one(r.into_inner()).map(Response::new)
    }

    type DecodeStreamStream = Answers<pb::DecodeResponse>;
    async fn decode_stream(
        &self,
        r: Request<Streaming<pb::DecodeRequest>>,
    ) -> Result<Response<Self::DecodeStreamStream>, Status> {
        Ok(each(self, r, |service, r| async move { service.decode_one(r) }))
    }
}
