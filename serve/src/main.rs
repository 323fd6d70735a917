//! An HTTP server with text-embeddings-inference's API (TEI 1.9): /embed, /embed_all, /predict,
//! /rerank, /similarity, /v1/embeddings (OpenAI), /tokenize, /decode, POST /, /health, /info,
//! /metrics, and the OpenAPI document at /api-doc/openapi.json (Swagger UI at /docs), with
//! dynamic batching by token budget on a dedicated inference thread.
//!
//! `cargo run --release -p roformer-serve -- --model models/roformer-sst2 --port 8080`, or
//! `cargo install --path serve` and `roformer-serve --model ...`.
//!
//! It prints `listening on HOST:PORT` once it accepts connections (`--port 0` picks a free port),
//! and on SIGTERM or Ctrl-C stops accepting, finishes the requests in flight and exits 0.

use std::sync::Arc;

use anyhow::{bail, Context, Result};
use clap::Parser;
use roformer::{Config, Pooling, Prompt, Reranker, SentenceEncoder, TextClassifier, Truncation};

use roformer_cli as common;

mod api;
mod http;
mod infer;

use http::handlers::App;
use http::middleware::Guard;
use infer::inference::{Infer, Kind};
use infer::metrics::Metrics;
use infer::queue::{Backend, Head, Limits, Queue};
use infer::validation::Validation;

#[derive(Parser)]
#[command(about = "Serve a RoFormer checkpoint over text-embeddings-inference's HTTP API")]
struct Args {
    /// Checkpoint folder or Hub id.
    #[arg(long, alias = "model-id")]
    model: String,
    #[command(flatten)]
    run: common::RunArgs,
    /// cls, mean or pooler, for /embed (default: the checkpoint's pooler if it has one, else mean).
    #[arg(long)]
    pooling: Option<Pooling>,
    /// Address to listen on.
    #[arg(long, alias = "hostname", default_value = "127.0.0.1")]
    host: String,
    /// Port to listen on; 0 picks a free one.
    #[arg(long, short = 'p', default_value_t = 8080)]
    port: u16,
    /// Tokens one batch may hold (the sum of its inputs' lengths).
    #[arg(long, default_value_t = 16384)]
    max_batch_tokens: usize,
    /// Inputs one batch may hold (no limit by default); 1 turns dynamic batching off.
    #[arg(long)]
    max_batch_requests: Option<usize>,
    /// Inputs queued or running at once. A request that finds them all taken gets 429; once in,
    /// each of its inputs waits for its turn.
    #[arg(long, default_value_t = 512)]
    max_concurrent_requests: usize,
    /// Inputs one request may hold.
    #[arg(long, default_value_t = 32)]
    max_client_batch_size: usize,
    /// Truncate inputs past the max length when the request does not say (`--auto-truncate false`
    /// answers them 422 instead).
    #[arg(long, default_value_t = true, num_args = 0..=1, default_missing_value = "true", action = clap::ArgAction::Set)]
    auto_truncate: bool,
    /// Threads of the inference pool (default: one per core).
    #[arg(long)]
    threads: Option<usize>,
    /// Largest request body, in bytes.
    #[arg(long, default_value_t = 2_000_000)]
    payload_limit: usize,
    /// The model name /info and /v1/embeddings report (default: --model).
    #[arg(long)]
    served_model_name: Option<String>,
    /// Requests must carry `Authorization: Bearer KEY` (health, metrics and docs excepted), else 401.
    #[arg(long)]
    api_key: Option<String>,
    /// Origins browsers may call from (CORS), e.g. `https://example.com`; `*` for any. Repeat or
    /// separate with commas.
    #[arg(long, value_delimiter = ',')]
    cors_allow_origin: Option<Vec<String>>,
    /// Seconds a client has to send a request's headers before the connection is closed.
    #[arg(long, default_value_t = 30.0)]
    header_read_timeout: f64,
    /// Seconds a client has to send a request's body before it gets 408 and the connection closes.
    #[arg(long, default_value_t = 60.0)]
    body_read_timeout: f64,
}

fn main() -> std::process::ExitCode {
    common::main_with(run)
}

fn run() -> Result<()> {
    let args = Args::parse();
    if args.max_batch_requests == Some(0)
        || args.max_concurrent_requests == 0
        || args.max_client_batch_size == 0
    {
        bail!(
            "--max-batch-requests, --max-concurrent-requests and --max-client-batch-size must be at least 1"
        );
    }
    let seconds = |flag: &str, s: f64| {
        if s.is_finite() && s > 0.0 {
            Ok(std::time::Duration::from_secs_f64(s))
        } else {
            bail!("{flag} must be a positive number of seconds, not {s}")
        }
    };
    let header_read_timeout = seconds("--header-read-timeout", args.header_read_timeout)?;
    let guard = Guard {
        api_key: args.api_key.clone(),
        cors_allow_origin: args.cors_allow_origin.clone(),
        payload_limit: args.payload_limit,
        body_read_timeout: seconds("--body-read-timeout", args.body_read_timeout)?,
    };
    let metrics = Arc::new(Metrics::default());
    let (backend, app) = load(&args, metrics.clone())?;
    let queue = app.infer.queue.clone();
    let worker = std::thread::Builder::new()
        .name("roformer-batcher".into())
        .spawn({
            let queue = queue.clone();
            move || infer::queue::work(&queue, &backend)
        })
        .context("starting the inference thread")?;

    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    let served = runtime.block_on(async {
        // Signal handlers go in before the address is printed: a SIGTERM sent the moment a
        // client sees it must already mean "shut down gracefully".
        let shutdown = shutdown_signal()?;
        let listener = tokio::net::TcpListener::bind((args.host.as_str(), args.port))
            .await
            .with_context(|| format!("binding {}:{}", args.host, args.port))?;
        let address = listener.local_addr()?;
        {
            use std::io::Write;
            let mut stdout = std::io::stdout().lock();
            writeln!(stdout, "listening on {address}")?;
            stdout.flush()?;
        }
        serve(listener, http::router::router(app, guard), header_read_timeout, shutdown).await;
        Ok(())
    });
    // Every request has had its answer by now; let the worker drain and stop.
    queue.close();
    let _ = worker.join();
    served
}

/// Loads the checkpoint: a sequence classifier serves /predict and embeds through its encoder;
/// any other checkpoint embeds.
fn load(args: &Args, metrics: Arc<Metrics>) -> Result<(Backend, Arc<App>)> {
    // Embeddings come back unnormalised: each request says whether to normalise.
    let mut options = args.run.options()?.with_normalize(false);
    if let Some(pooling) = args.pooling {
        options = options.with_pooling(pooling);
    }
    if let Some(threads) = args.threads {
        options = options.with_threads(threads);
    }
    let compute_type = if options.device.is_cpu() { "cpu" } else { "gpu" };
    let dir = options
        .hub
        .resolve(&args.model, options.revision.as_deref())
        .with_context(|| format!("loading {}", args.model))?;
    let config = Config::from_file(dir.join("config.json"))?;
    let is_classifier =
        config.architectures.iter().flatten().any(|a| a.ends_with("ForSequenceClassification"));
    let load_context = || format!("loading {}", args.model);
    let classifier_type = |kind: &str| {
        let labels = (0..config.num_labels()).map(|i| config.label(i));
        let id2label: serde_json::Map<_, _> =
            labels.clone().enumerate().map(|(i, l)| (i.to_string(), l.into())).collect();
        let label2id: serde_json::Map<_, _> = labels.enumerate().map(|(i, l)| (l, i.into())).collect();
        serde_json::json!({kind: {"id2label": id2label, "label2id": label2id}})
    };
    let (head, kind, encoder, model_type) = if is_classifier {
        let classifier =
            TextClassifier::from_pretrained_with(&dir, options.clone()).with_context(load_context)?;
        let encoder = SentenceEncoder::from_classifier(&classifier)?;
        // One label is a cross-encoder, as TEI reads it.
        if config.num_labels() == 1 {
            let reranker = Reranker::from_classifier(classifier).with_context(load_context)?;
            (Head::Reranker(Box::new(reranker)), Kind::Reranker, encoder, classifier_type("reranker"))
        } else {
            (Head::Classifier(Box::new(classifier)), Kind::Classifier, encoder, classifier_type("classifier"))
        }
    } else {
        let encoder =
            SentenceEncoder::from_pretrained_with(&dir, options.clone()).with_context(load_context)?;
        let pooling = match encoder.pooling() {
            Pooling::Cls => "cls",
            Pooling::Mean => "mean",
            Pooling::Pooler => "pooler",
        };
        (Head::None, Kind::Embedding, encoder, serde_json::json!({"embedding": {"pooling": pooling}}))
    };
    let (mut tokenizer, max_length) = (encoder.tokenizer().clone(), encoder.max_length());
    let embedding_dim = encoder.dim();
    // One encoder serves every prompt of a sentence-transformers folder: a request's prompt name
    // is passed per call (one copy of the weights).
    let prompt_names: Vec<String> = encoder.prompt_names().into_iter().map(str::to_string).collect();
    // Their texts: the server tokenizes a prompted input once, prompt and text together.
    let prompts = prompt_names
        .iter()
        .map(|name| encoder.prompt_text(Prompt::Named(name)))
        .collect::<roformer::Result<Vec<String>>>()?;
    let backend = Backend { encoder, prompt_names: prompt_names.clone(), head };
    // As TEI: an input must fit in one batch, so the max input length is capped by the budget
    // when truncating, and is a startup error otherwise.
    let max_input_length = if max_length > args.max_batch_tokens {
        if !args.auto_truncate {
            bail!(
                "the model takes {max_length} tokens, more than --max-batch-tokens {}: raise it, or lower --max-length",
                args.max_batch_tokens
            );
        }
        tokenizer.set_truncation(Some(Truncation::LongestFirst), Some(args.max_batch_tokens))?;
        args.max_batch_tokens
    } else {
        max_length
    };
    let mut untruncated = tokenizer.clone();
    untruncated.set_truncation(None, None)?;

    let served_model_name = args.served_model_name.clone().unwrap_or_else(|| args.model.clone());
    let dtype = match args.run.dtype.as_str() {
        "f16" => "float16",
        "bf16" => "bfloat16",
        _ => "float32",
    };
    let tokenization_workers = tokio_threads();
    let info = serde_json::json!({
        "model_id": args.model,
        "model_sha": args.run.revision,
        "model_dtype": dtype,
        "served_model_name": served_model_name,
        "model_type": model_type,
        "max_concurrent_requests": args.max_concurrent_requests,
        "max_input_length": max_input_length,
        "max_batch_tokens": args.max_batch_tokens,
        "max_batch_requests": args.max_batch_requests,
        "max_client_batch_size": args.max_client_batch_size,
        "auto_truncate": args.auto_truncate,
        "tokenization_workers": tokenization_workers,
        "version": env!("CARGO_PKG_VERSION"),
        "tei_api_version": "1.9.3",
        "sha": null,
        "docker_label": null,
    });
    let limits =
        Limits { max_batch_tokens: args.max_batch_tokens, max_batch_requests: args.max_batch_requests };
    api::set_limits(api::Limits {
        max_client_batch_size: args.max_client_batch_size,
        vocab_size: config.vocab_size,
        prompt_names: prompt_names.clone(),
        dim: embedding_dim,
    });
    let labels = (0..config.num_labels()).map(|i| config.label(i)).collect();
    let validation = Validation {
        tokenizer,
        untruncated,
        vocab_size: config.vocab_size,
        max_input_length,
        max_client_batch_size: args.max_client_batch_size,
        prompt_names,
        prompts,
    };
    let infer = Infer {
        kind,
        validation,
        labels,
        compute_type,
        auto_truncate: args.auto_truncate,
        queue: Arc::new(Queue::new(limits, metrics.clone())),
        permits: Arc::new(tokio::sync::Semaphore::new(args.max_concurrent_requests)),
        metrics,
    };
    let app = App { infer, served_model_name, info };
    Ok((backend, Arc::new(app)))
}

/// Accepts connections until `shutdown`, then stops accepting and lets every connection finish
/// the request it has begun. hyper's own loop rather than axum::serve, which sets no timer and
/// so no header read timeout: a client that sends its headers a byte at a time is cut off.
async fn serve(
    listener: tokio::net::TcpListener,
    router: axum::Router,
    header_read_timeout: std::time::Duration,
    shutdown: impl std::future::Future<Output = ()>,
) {
    use hyper_util::rt::{TokioIo, TokioTimer};
    let mut http = hyper::server::conn::http1::Builder::new();
    http.timer(TokioTimer::new()).header_read_timeout(header_read_timeout);
    let service = hyper_util::service::TowerToHyperService::new(router);
    let graceful = hyper_util::server::graceful::GracefulShutdown::new();
    tokio::pin!(shutdown);
    loop {
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => {
                    let _ = stream.set_nodelay(true);
                    let connection = http.serve_connection(TokioIo::new(stream), service.clone());
                    let connection = graceful.watch(connection);
                    tokio::spawn(async move {
                        let _ = connection.await;
                    });
                }
                // Out of file descriptors, say: the next accept may succeed.
                Err(e) => {
                    eprintln!("accepting a connection: {e}");
                    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                }
            },
            _ = &mut shutdown => break,
        }
    }
    drop(listener);
    graceful.shutdown().await;
}

/// Tokenization runs in the handlers, on the runtime's threads (one per core).
fn tokio_threads() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// Resolves on SIGTERM or Ctrl-C. The handlers are registered now, not at first poll.
fn shutdown_signal() -> Result<impl std::future::Future<Output = ()>> {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        let mut term = signal(SignalKind::terminate())?;
        let mut interrupt = signal(SignalKind::interrupt())?;
        Ok(async move {
            tokio::select! {
                _ = term.recv() => {}
                _ = interrupt.recv() => {}
            }
            eprintln!("shutting down: finishing the requests in flight");
        })
    }
    #[cfg(not(unix))]
    {
        Ok(async {
            let _ = tokio::signal::ctrl_c().await;
            eprintln!("shutting down: finishing the requests in flight");
        })
    }
}
