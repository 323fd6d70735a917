//! Dynamic batching: handlers push one entry per input; one worker thread takes what has queued
//! up, within a token budget, runs it through the library pipeline and answers each entry on its
//! own oneshot channel. Model work never runs on the async runtime's threads.

use std::collections::VecDeque;
use std::panic::AssertUnwindSafe;
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use roformer::{Classification, Encoded, SentenceEncoder, TextClassifier};
use tokio::sync::oneshot;

use crate::metrics::Metrics;

/// The loaded model: a classifier also embeds, through its own encoder (shared weights).
pub enum Backend {
    Classifier { classifier: Box<TextClassifier>, encoder: SentenceEncoder },
    Encoder(SentenceEncoder),
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Task {
    Embed,
    Predict,
}

pub enum Value {
    /// Pooled, not normalised: normalising is the request's choice.
    Embedding(Vec<f32>),
    Classification(Classification),
}

pub struct Output {
    pub value: Value,
    pub queue_time: Duration,
    pub inference_time: Duration,
}

pub type Reply = Result<Output, String>;

struct Entry {
    encoded: Encoded,
    task: Task,
    tx: oneshot::Sender<Reply>,
    enqueued: Instant,
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
    pub fn push(&self, encoded: Encoded, task: Task) -> oneshot::Receiver<Reply> {
        let (tx, rx) = oneshot::channel();
        let mut state = self.lock();
        if state.closed {
            let _ = tx.send(Err("the server is shutting down".into()));
            return rx;
        }
        state.entries.push_back(Entry { encoded, task, tx, enqueued: Instant::now() });
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
            if !batch.is_empty() && tokens + entry.encoded.len() > self.limits.max_batch_tokens {
                state.entries.push_front(entry);
                break;
            }
            tokens += entry.encoded.len();
            batch.push(entry);
        }
        self.metrics.set_gauge("te_queue_size", state.entries.len() as f64);
        self.metrics.observe("te_batch_next_size", batch.len() as f64);
        self.metrics.observe("te_batch_next_tokens", tokens as f64);
        Some(batch)
    }
}

/// The worker's loop: runs until the queue is closed and empty.
pub fn work(queue: &Queue, backend: &Backend) {
    while let Some(batch) = queue.next_batch() {
        let (embeds, predicts): (Vec<Entry>, Vec<Entry>) =
            batch.into_iter().partition(|e| e.task == Task::Embed);
        if !embeds.is_empty() {
            let encoder = match backend {
                Backend::Classifier { encoder, .. } | Backend::Encoder(encoder) => encoder,
            };
            run(embeds, |encodings| {
                Ok(encoder.encode_tokenized(encodings)?.into_iter().map(Value::Embedding).collect())
            });
        }
        if !predicts.is_empty() {
            run(predicts, |encodings| match backend {
                Backend::Classifier { classifier, .. } => Ok(classifier
                    .classify_tokenized(encodings)?
                    .into_iter()
                    .map(Value::Classification)
                    .collect()),
                // Handlers check the model kind before queueing.
                Backend::Encoder(_) => Err("Model is not a classifier model".into()),
            });
        }
    }
}

/// Runs one pipeline call and answers every entry; a failure (or a panic) answers each with it.
fn run(entries: Vec<Entry>, forward: impl FnOnce(&[Encoded]) -> Result<Vec<Value>, roformer::BoxError>) {
    let start = Instant::now();
    let (encodings, replies): (Vec<Encoded>, Vec<(oneshot::Sender<Reply>, Instant)>) =
        entries.into_iter().map(|e| (e.encoded, (e.tx, e.enqueued))).unzip();
    let result = std::panic::catch_unwind(AssertUnwindSafe(|| forward(&encodings)));
    let inference_time = start.elapsed();
    let values = match result {
        Ok(Ok(values)) if values.len() == replies.len() => Ok(values),
        Ok(Ok(values)) => Err(format!("{} outputs for {} inputs", values.len(), replies.len())),
        Ok(Err(e)) => Err(e.to_string()),
        Err(_) => Err("the model panicked on this batch".to_string()),
    };
    match values {
        Ok(values) => {
            for ((tx, enqueued), value) in replies.into_iter().zip(values) {
                let queue_time = start.duration_since(enqueued);
                // A receiver gone meanwhile is a client that left; nothing to do.
                let _ = tx.send(Ok(Output { value, queue_time, inference_time }));
            }
        }
        Err(message) => {
            for (tx, _) in replies {
                let _ = tx.send(Err(message.clone()));
            }
        }
    }
}
