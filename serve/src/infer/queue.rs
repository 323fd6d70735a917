//! Dynamic batching: handlers push one entry per input; one worker thread takes what has queued
//! up, within a token budget, runs it through the library pipeline and answers each entry on its
//! own oneshot channel. Model work never runs on the async runtime's threads.

use std::collections::VecDeque;
use std::panic::AssertUnwindSafe;
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use roformer::{
    Classification, Encoded, Prompt, Reranker, SentenceEncoder, SparseEmbedding, SparseEncoder,
    TextClassifier,
};
use tokio::sync::{oneshot, OwnedSemaphorePermit};

use super::metrics::Metrics;

/// The loaded model. Every model embeds: a classifier or reranker through its own encoder
/// (shared weights), a masked LM with SPLADE pooling sparsely.
pub struct Backend {
    pub encoder: Embedder,
    /// The encoder's prompt names (sorted), which `Task::Embed`'s prompt indexes: a prompted
    /// input comes tokenized after its prompt's text, and the pooling is told which prompt it was.
    pub prompt_names: Vec<String>,
    /// What goes before a text to embed that names no prompt (`--default-prompt`); empty for none.
    pub default_prompt: String,
    pub head: Head,
}

/// What embeds: pooled hidden states, or SPLADE's vocabulary weights.
pub enum Embedder {
    Dense(Box<SentenceEncoder>),
    Sparse(Box<SparseEncoder>),
}

pub enum Head {
    None,
    Classifier(Box<TextClassifier>),
    Reranker(Box<Reranker>),
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Task {
    /// Pooled; `prompt` indexes `Backend::prompt_names`.
    Embed {
        prompt: Option<usize>,
    },
    /// Every token's last hidden state.
    EmbedAll,
    /// SPLADE's non-zero vocabulary weights.
    EmbedSparse,
    Predict,
    /// A (query, text) pair's score.
    Rerank {
        raw_scores: bool,
    },
}

pub enum Value {
    /// Pooled, not normalised: normalising is the request's choice.
    Embedding(Vec<f32>),
    Tokens(Vec<Vec<f32>>),
    Sparse(SparseEmbedding),
    Classification(Classification),
    Score(f32),
}

pub struct Output {
    pub value: Value,
    pub queue_time: Duration,
    pub inference_time: Duration,
}

pub type Reply = Result<Output, String>;

/// One input, tokenized once by the handler (for its checks, its count and the token budget):
/// the pipeline gets these tokens.
pub struct Job {
    pub encoded: Encoded,
    pub task: Task,
}

struct Entry {
    job: Job,
    tx: oneshot::Sender<Reply>,
    enqueued: Instant,
    /// Held until the input is answered: `--max-concurrent-requests` counts inputs in flight.
    permit: Option<OwnedSemaphorePermit>,
}

#[derive(Clone, Copy)]
pub struct Limits {
    pub max_batch_tokens: usize,
    pub max_batch_requests: Option<usize>,
}

pub struct Queue {
    state: Mutex<State>,
    wake: Condvar,
    limits: Limits,
    metrics: Arc<Metrics>,
}

#[derive(Default)]
struct State {
    entries: VecDeque<Entry>,
    closed: bool,
}

impl Queue {
    pub fn new(limits: Limits, metrics: Arc<Metrics>) -> Self {
        Self { state: Mutex::default(), wake: Condvar::new(), limits, metrics }
    }

    /// Queues one encoded input; the receiver gets its answer. Dropping the receiver (a client
    /// that went away) makes the worker skip the entry.
    pub fn push(&self, job: Job, permit: Option<OwnedSemaphorePermit>) -> oneshot::Receiver<Reply> {
        let (tx, rx) = oneshot::channel();
        let mut state = self.lock();
        if state.closed {
            let _ = tx.send(Err("the server is shutting down".into()));
            return rx;
        }
        state.entries.push_back(Entry { job, tx, enqueued: Instant::now(), permit });
        self.metrics.set_gauge("te_queue_size", state.entries.len() as f64);
        drop(state);
        self.wake.notify_one();
        rx
    }

    /// No more entries; the worker finishes what is queued, then stops.
    pub fn close(&self) {
        self.lock().closed = true;
        self.wake.notify_all();
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Blocks until entries are queued, then takes them from the front while they fit in the
    /// token budget (strict FIFO, as TEI). `None` once closed and drained.
    fn next_batch(&self) -> Option<Vec<Entry>> {
        let mut state = self.lock();
        while state.entries.is_empty() && !state.closed {
            state = self.wake.wait(state).unwrap_or_else(|e| e.into_inner());
        }
        if state.entries.is_empty() {
            return None;
        }
        let max_requests = self.limits.max_batch_requests.unwrap_or(usize::MAX);
        let mut batch = Vec::new();
        let mut tokens = 0;
        while batch.len() < max_requests {
            let Some(entry) = state.entries.pop_front() else { break };
            if entry.tx.is_closed() {
                self.metrics.inc("te_request_failure", "err=\"dropped\"");
                continue;
            }
            // Inputs never exceed the budget alone (max input length <= max batch tokens).
            let len = entry.job.encoded.len();
            if !batch.is_empty() && tokens + len > self.limits.max_batch_tokens {
                state.entries.push_front(entry);
                break;
            }
            tokens += len;
            batch.push(entry);
        }
        self.metrics.set_gauge("te_queue_size", state.entries.len() as f64);
        self.metrics.observe("te_batch_next_size", batch.len() as f64);
        self.metrics.observe("te_batch_next_tokens", tokens as f64);
        Some(batch)
    }
}

/// The worker's loop: runs until the queue is closed and empty. A batch runs one pipeline call
/// per task in it.
pub fn work(queue: &Queue, backend: &Backend) {
    while let Some(mut batch) = queue.next_batch() {
        while let Some(task) = batch.first().map(|e| e.job.task) {
            let (same, rest): (Vec<Entry>, Vec<Entry>) = batch.into_iter().partition(|e| e.job.task == task);
            batch = rest;
            run(same, |jobs| forward(backend, task, jobs));
        }
    }
}

fn forward(backend: &Backend, task: Task, jobs: &[Job]) -> Result<Vec<Value>, roformer::BoxError> {
    let encodings: Vec<Encoded> = jobs.iter().map(|j| j.encoded.clone()).collect();
    Ok(match (task, &backend.encoder, &backend.head) {
        (Task::Embed { prompt: None }, Embedder::Dense(encoder), _) => {
            let prompt = Prompt::Text(&backend.default_prompt);
            encoder.encode_tokenized_with(&encodings, prompt)?.into_iter().map(Value::Embedding).collect()
        }
        (Task::Embed { prompt: Some(p) }, Embedder::Dense(encoder), _) => {
            let name = backend.prompt_names.get(p).ok_or("no such prompt")?;
            encoder
                .encode_tokenized_with(&encodings, Prompt::Named(name))?
                .into_iter()
                .map(Value::Embedding)
                .collect()
        }
        // SPLADE on /embed: the dense vector over the vocabulary, as TEI gives it.
        (Task::Embed { .. }, Embedder::Sparse(encoder), _) => encoder
            .encode_tokenized(&encodings)?
            .into_iter()
            .map(|sparse| Value::Embedding(sparse.to_dense(encoder.dim())))
            .collect(),
        (Task::EmbedSparse, Embedder::Sparse(encoder), _) => {
            encoder.encode_tokenized(&encodings)?.into_iter().map(Value::Sparse).collect()
        }
        (Task::EmbedAll, Embedder::Dense(encoder), _) => {
            encoder.token_embeddings_tokenized(&encodings)?.into_iter().map(Value::Tokens).collect()
        }
        (Task::Predict, _, Head::Classifier(classifier)) => {
            classifier.classify_tokenized(&encodings)?.into_iter().map(Value::Classification).collect()
        }
        (Task::Predict, _, Head::Reranker(reranker)) => reranker
            .classifier()
            .classify_tokenized(&encodings)?
            .into_iter()
            .map(Value::Classification)
            .collect(),
        (Task::Rerank { raw_scores }, _, Head::Reranker(reranker)) => {
            let scores = if raw_scores {
                reranker.predict_raw_tokenized(&encodings)?
            } else {
                reranker.predict_tokenized(&encodings)?
            };
            scores.into_iter().map(Value::Score).collect()
        }
        // The core checks the model kind before queueing.
        (Task::Predict, ..) => return Err("Model is not a classifier model".into()),
        (Task::Rerank { .. }, ..) => return Err("model is not a re-ranker model".into()),
        (Task::EmbedSparse, ..) => return Err("Model is not an embedding model with SPLADE pooling".into()),
        (Task::EmbedAll, ..) => return Err("`embed_all` is not available for SPLADE models".into()),
    })
}

/// Runs one pipeline call and answers every entry; a failure (or a panic) answers each with it.
/// Each entry's permit goes back once it is answered.
fn run(entries: Vec<Entry>, forward: impl FnOnce(&[Job]) -> Result<Vec<Value>, roformer::BoxError>) {
    let start = Instant::now();
    let mut jobs = Vec::with_capacity(entries.len());
    let mut replies = Vec::with_capacity(entries.len());
    for e in entries {
        jobs.push(e.job);
        replies.push((e.tx, e.enqueued, e.permit));
    }
    let result = std::panic::catch_unwind(AssertUnwindSafe(|| forward(&jobs)));
    let inference_time = start.elapsed();
    let values = match result {
        Ok(Ok(values)) if values.len() == replies.len() => Ok(values),
        Ok(Ok(values)) => Err(format!("{} outputs for {} inputs", values.len(), replies.len())),
        Ok(Err(e)) => Err(e.to_string()),
        Err(_) => Err("the model panicked on this batch".to_string()),
    };
    match values {
        Ok(values) => {
            for ((tx, enqueued, permit), value) in replies.into_iter().zip(values) {
                let queue_time = start.duration_since(enqueued);
                // A receiver gone meanwhile is a client that left; nothing to do.
                let _ = tx.send(Ok(Output { value, queue_time, inference_time }));
                drop(permit);
            }
        }
        Err(message) => {
            for (tx, _, permit) in replies {
                let _ = tx.send(Err(message.clone()));
                drop(permit);
            }
        }
    }
}
