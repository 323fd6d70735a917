//! The inference core (TEI's `core/src/infer.rs`): admission by permits, validation and
//! tokenization of a request's inputs, queueing them, waiting for their answers, the metrics of
//! it all, and the post-processing of embeddings and predictions.

use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::Semaphore;

use super::error::InferError;
use super::metrics::Metrics;
use super::queue::{Job, Output, Queue, Task, Value};
use super::validation::{Item, Validation};

#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Embedding,
    /// A masked LM with SPLADE pooling (`--pooling splade`): /embed_sparse.
    Splade,
    Classifier,
    /// A classifier of one label: /rerank, and /predict too.
    Reranker,
}

/// One label's score.
pub struct Scored {
    pub label: String,
    pub score: f32,
}

/// One answered request's phases, for trace export (`--otlp-endpoint`, feature `otlp`, whose
/// exporter reads them).
#[cfg_attr(not(feature = "otlp"), allow(dead_code))]
pub struct Phases {
    /// The task's name: `embed`, `embed_all`, `embed_sparse`, `predict` or `rerank`.
    pub task: &'static str,
    pub start: std::time::SystemTime,
    pub tokenization: Duration,
    /// Per input, averaged over the request's.
    pub queue: Duration,
    /// Per input, averaged over the request's.
    pub inference: Duration,
    pub total: Duration,
    pub inputs: usize,
    pub tokens: usize,
}

/// Where answered requests' phases go: the OTLP exporter.
pub type SpanSink = Arc<dyn Fn(Phases) + Send + Sync>;

pub struct Infer {
    pub kind: Kind,
    pub validation: Validation,
    /// Label names by index.
    pub labels: Vec<String>,
    pub compute_type: &'static str,
    /// Truncate inputs past the max length when the request does not say.
    pub auto_truncate: bool,
    pub queue: Arc<Queue>,
    pub permits: Arc<Semaphore>,
    pub metrics: Arc<Metrics>,
    /// Each answered request's phases, when traces are exported.
    pub spans: Option<SpanSink>,
}

/// The answers of one request, with what its headers and metrics report.
pub struct Done {
    pub outputs: Vec<Output>,
    pub tokens: usize,
    pub characters: usize,
    pub total: Duration,
    pub tokenization: Duration,
    pub compute_type: &'static str,
}

impl Infer {
    /// Counts a failed request and passes its error on.
    pub fn fail(&self, error: InferError) -> InferError {
        self.count_failure(error.metric());
        error
    }

    /// Counts a failed request under `te_request_failure{err=...}`.
    pub fn count_failure(&self, metric: &str) {
        self.metrics.inc("te_request_failure", &format!("err=\"{metric}\""));
    }

    /// Validates and tokenizes every input (once: the pipeline gets these tokens), checks that the
    /// model serves `task`, queues the inputs, then waits for all answers, in input order.
    /// Failures are counted.
    pub async fn infer(
        &self,
        items: Vec<Item>,
        batch: bool,
        task: Task,
        truncate: bool,
    ) -> Result<Done, InferError> {
        self.run(items, batch, task, truncate).await.map_err(|e| self.fail(e))
    }

    async fn run(
        &self,
        items: Vec<Item>,
        batch: bool,
        task: Task,
        truncate: bool,
    ) -> Result<Done, InferError> {
        let start = Instant::now();
        let started = std::time::SystemTime::now();
        let method = if batch { "method=\"batch\"" } else { "method=\"single\"" };
        self.metrics.inc("te_request_count", method);
        let (count, success, prefix) = match task {
            Task::Embed { .. } | Task::EmbedAll | Task::EmbedSparse => {
                ("te_embed_count", "te_embed_success", "te_embed")
            }
            Task::Predict | Task::Rerank { .. } => ("te_predict_count", "te_predict_success", "te_predict"),
        };
        if items.is_empty() {
            return Err(InferError::Empty("`inputs` cannot be empty".into()));
        }
        self.validation.check_batch(items.len())?;
        // Admission: a request is refused (429) only when every permit is held, by inputs queued or
        // running; once in, each of its inputs waits for its own permit, which the worker gives
        // back when it answers that input.
        let first = self.permits.clone().try_acquire_owned().map_err(|_| InferError::Overloaded)?;
        self.metrics.add(count, "", items.len() as u64);

        let characters = items
            .iter()
            .map(|i| match i {
                Item::Text(t) => t.chars().count(),
                Item::Pair(a, b) => a.chars().count() + b.chars().count(),
                Item::Ids(_) => 0,
            })
            .sum();
        // The one tokenization of each input: its checks, its count, and the pipeline's tokens.
        let (prompt, embed) = match task {
            Task::Embed { prompt } => (prompt, true),
            _ => (None, false),
        };
        let mut jobs = Vec::with_capacity(items.len());
        for item in items {
            let encoded = self.validation.encode(&item, truncate, prompt, embed)?;
            jobs.push(Job { encoded, task });
        }
        // Only a request the document allows gets this far: the model's kind is checked after the
        // checks of the input, so that a body that breaks the schema gets 422, not 424.
        self.check_kind(task)?;
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
                    .map_err(|_| InferError::backend("the server is shutting down"))?,
            };
            receivers.push(self.queue.push(job, Some(permit)));
        }
        let mut outputs = Vec::with_capacity(receivers.len());
        for rx in receivers {
            match rx.await {
                Ok(Ok(output)) => outputs.push(output),
                Ok(Err(message)) => return Err(InferError::Backend(message)),
                Err(_) => return Err(InferError::backend("the inference worker stopped")),
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
        if let Some(sink) = &self.spans {
            let task = match task {
                Task::Embed { .. } => "embed",
                Task::EmbedAll => "embed_all",
                Task::EmbedSparse => "embed_sparse",
                Task::Predict => "predict",
                Task::Rerank { .. } => "rerank",
            };
            let (queue, inference) = (queue / n, inference / n);
            let inputs = outputs.len();
            sink(Phases { task, start: started, tokenization, queue, inference, total, inputs, tokens });
        }
        Ok(Done { outputs, tokens, characters, total, tokenization, compute_type: self.compute_type })
    }

    /// 424 for a task the loaded model does not serve, with TEI's messages: /predict without a
    /// classifier, /rerank without a cross-encoder, /embed_sparse without SPLADE pooling,
    /// /embed_all with it.
    pub fn check_kind(&self, task: Task) -> Result<(), InferError> {
        match (task, self.kind) {
            (Task::Predict, Kind::Embedding | Kind::Splade) => {
                Err(InferError::ModelType("Model is not a classifier model".into()))
            }
            (Task::Rerank { .. }, Kind::Embedding | Kind::Splade | Kind::Classifier) => {
                Err(InferError::ModelType("model is not a re-ranker model".into()))
            }
            (Task::EmbedSparse, Kind::Embedding | Kind::Classifier | Kind::Reranker) => {
                Err(InferError::ModelType("Model is not an embedding model with SPLADE pooling".into()))
            }
            (Task::EmbedAll, Kind::Splade) => {
                Err(InferError::ModelType("`embed_all` is not available for SPLADE models".into()))
            }
            _ => Ok(()),
        }
    }

    /// 424 for normalised embeddings of a SPLADE model, as TEI answers: its weights are not
    /// directions.
    pub fn check_normalize(&self, normalize: bool) -> Result<(), InferError> {
        if self.kind == Kind::Splade && normalize {
            return Err(InferError::ModelType("`normalize` is not available for SPLADE models".into()));
        }
        Ok(())
    }

    /// True when a forward pass through the queue answers within a minute.
    pub async fn health(&self) -> bool {
        let task = match self.kind {
            Kind::Classifier | Kind::Reranker => Task::Predict,
            Kind::Embedding => Task::Embed { prompt: None },
            Kind::Splade => Task::EmbedSparse,
        };
        match self.validation.tokenizer.encode("health") {
            Ok(encoded) => {
                let rx = self.queue.push(Job { encoded, task }, None);
                matches!(tokio::time::timeout(Duration::from_secs(60), rx).await, Ok(Ok(Ok(_))))
            }
            Err(_) => false,
        }
    }
}

/// The pooled vector, cut to `dimensions` and then L2-normalised when asked, as TEI does.
pub fn embedding(
    output: &Output,
    dimensions: Option<usize>,
    normalize: bool,
) -> Result<Vec<f32>, InferError> {
    let Value::Embedding(pooled) = &output.value else {
        return Err(InferError::backend("expected an embedding"));
    };
    let mut v = pooled.clone();
    if let Some(d) = dimensions {
        if d == 0 {
            return Err(InferError::Validation(
                "Input validation error: `dimensions` should be positive".into(),
            ));
        }
        if d > v.len() {
            return Err(InferError::Validation(
                "Input validation error: `dimensions` should be smaller than the maximum embedding dimension."
                    .into(),
            ));
        }
        v.truncate(d);
    }
    if normalize {
        roformer::l2_normalize(&mut v);
    }
    Ok(v)
}

/// A rerank's texts as (index, score), best first; texts of equal score keep their order, as
/// `Reranker::rank`.
pub fn ranks(done: &Done) -> Result<Vec<(usize, f32)>, InferError> {
    let mut ranks = done
        .outputs
        .iter()
        .enumerate()
        .map(|(index, output)| match output.value {
            Value::Score(score) if score.is_nan() => Err(InferError::backend("score is NaN")),
            Value::Score(score) => Ok((index, score)),
            _ => Err(InferError::backend("expected a score")),
        })
        .collect::<Result<Vec<_>, _>>()?;
    ranks.sort_by(|a, b| b.1.total_cmp(&a.1));
    Ok(ranks)
}

/// Every label with its score, best first (ascending sort then reversed, as TEI).
pub fn predictions(output: &Output, labels: &[String], raw_scores: bool) -> Result<Vec<Scored>, InferError> {
    let Value::Classification(c) = &output.value else {
        return Err(InferError::backend("expected a classification"));
    };
    let values = if raw_scores { &c.logits } else { &c.scores };
    if values.iter().any(|s| s.is_nan()) {
        return Err(InferError::backend("score is NaN"));
    }
    let mut predictions: Vec<Scored> = values
        .iter()
        .enumerate()
        .map(|(i, &score)| Scored {
            score,
            label: labels.get(i).cloned().unwrap_or_else(|| format!("LABEL_{i}")),
        })
        .collect();
    predictions.sort_by(|a, b| a.score.total_cmp(&b.score));
    predictions.reverse();
    Ok(predictions)
}
