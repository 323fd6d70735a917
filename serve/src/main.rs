//! An HTTP server with text-embeddings-inference's API (TEI 1.9): /embed, /embed_all,
//! /embed_sparse, /predict, /rerank, /similarity, /v1/embeddings (OpenAI), /tokenize, /decode,
//! POST /, /health, /info, /metrics, and the loaded model's OpenAPI document at
//! /api-doc/openapi.json (Swagger UI at /docs), with dynamic batching by token budget on a
//! dedicated inference thread; TEI's gRPC API beside it (feature `grpc`), OTLP traces (feature
//! `otlp`). `args` reads the flags, `logs` writes the log lines, `http` and `grpc` answer, `infer`
//! is the core both share, `otlp` exports its spans.
//!
//! `cargo run --release -p roformer-serve -- --model models/roformer-sst2 --port 8080`, or
//! `cargo install --path serve` and `roformer-serve --model ...`.
//!
//! It prints `listening on HOST:PORT` once it accepts connections (`--port 0` picks a free port;
//! under `--json-output`, a JSON line with the address in `fields.address`), and on SIGTERM or
//! Ctrl-C stops accepting, finishes the requests in flight and exits 0.

use std::sync::Arc;

use anyhow::{bail, Context, Result};
use roformer::{
    Config, Pooling, Prompt, Reranker, SentenceEncoder, SparseEncoder, TextClassifier, Truncation,
};

mod api;
mod args;
#[cfg(feature = "grpc")]
mod grpc;
mod http;
mod infer;
mod logs;
#[cfg(feature = "otlp")]
mod otlp;

use args::{Args, ServePooling};

use http::handlers::App;
use http::middleware::Guard;
use infer::inference::{Infer, Kind};
use infer::metrics::Metrics;
use infer::queue::{Backend, Embedder, Head, Limits, Queue};
use infer::validation::Validation;

fn main() -> std::process::ExitCode {
    logs::install();
    match run() {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            log::error!("{e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}

fn run() -> Result<()> {
    let args = Args::parse();
    // Before the checks: under --json-output, a refused flag is a JSON line too.
    logs::set_json(args.json_output);
    args.check()?;
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
    // Trace export: the sink the core records into now, its export loop on the runtime below.
    #[cfg(feature = "otlp")]
    let (spans, export) = match &args.otlp_endpoint {
        Some(endpoint) => {
            let (sink, export) = otlp::exporter(endpoint, &args.otlp_service_name)?;
            (Some(sink), Some(export))
        }
        None => (None, None),
    };
    #[cfg(not(feature = "otlp"))]
    let spans = None;
    let (backend, app) = load(&args, metrics.clone(), spans)?;
    let queue = app.infer.queue.clone();
    let worker = std::thread::Builder::new()
        .name("roformer-batcher".into())
        .spawn({
            let queue = queue.clone();
            move || infer::queue::work(&queue, &backend)
        })
        .context("starting the inference thread")?;

    let mut runtime = tokio::runtime::Builder::new_multi_thread();
    if let Some(n) = args.tokenization_workers {
        runtime.worker_threads(n);
    }
    let runtime = runtime.enable_all().build()?;
    let host = args.host();
    let served = runtime.block_on(async {
        // Signal handlers go in before the address is printed: a SIGTERM sent the moment a
        // client sees it must already mean "shut down gracefully".
        let shutdown = shutdown_signal()?;
        #[cfg(feature = "otlp")]
        if let Some(export) = export {
            tokio::spawn(export);
        }
        let listener = tokio::net::TcpListener::bind((host.as_str(), args.port))
            .await
            .with_context(|| format!("binding {host}:{}", args.port))?;
        let address = listener.local_addr()?;
        let unix = match &args.uds_path {
            Some(path) => Some(http::listen::unix(path)?),
            None => None,
        };
        let metrics_only = http::router::metrics_router(app.clone());
        http::listen::prometheus(&host, args.prometheus_port, metrics_only).await;
        logs::listening(address)?;
        if let Some(path) = &args.uds_path {
            log::info!("listening on {}", path.display());
        }
        let router = http::router::router(app.clone(), guard);
        // TEI's gRPC services beside the HTTP routes (which keep their own middleware).
        #[cfg(feature = "grpc")]
        let router = router.merge(grpc::router(app, args.api_key.clone(), args.payload_limit));
        http::listen::serve(listener, unix, router, header_read_timeout, shutdown).await;
        Ok(())
    });
    // Every request has had its answer by now; let the worker drain and stop.
    queue.close();
    let _ = worker.join();
    if let Some(path) = &args.uds_path {
        let _ = std::fs::remove_file(path);
    }
    served
}

/// Loads the checkpoint: a sequence classifier serves /predict and embeds through its encoder;
/// any other checkpoint embeds.
fn load(
    args: &Args,
    metrics: Arc<Metrics>,
    spans: Option<infer::inference::SpanSink>,
) -> Result<(Backend, Arc<App>)> {
    // Embeddings come back unnormalised: each request says whether to normalise.
    let mut options = args.run.options()?.with_normalize(false);
    if let Some(ServePooling::Dense(pooling)) = args.pooling {
        options = options.with_pooling(pooling);
    }
    if let Some(token) = args.hf_token.as_ref().or(args.hf_api_token.as_ref()) {
        options.hub.token = Some(token.clone());
    }
    if let Some(cache) = &args.huggingface_hub_cache {
        options.hub.cache_dir = cache.clone();
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
    let splade = matches!(args.pooling, Some(ServePooling::Splade));
    let is_masked_lm = config.architectures.iter().flatten().any(|a| a.ends_with("MaskedLM"));
    if splade && !is_masked_lm {
        bail!("Splade pooling is not supported: model is not a ForMaskedLM model ({})", dir.display());
    }
    if splade && (args.default_prompt.is_some() || args.default_prompt_name.is_some()) {
        bail!("--default-prompt and --default-prompt-name: a SPLADE model here takes no prompts");
    }
    let (head, kind, encoder, model_type) = if splade {
        let sparse = SparseEncoder::from_pretrained_with(&dir, options.clone()).with_context(load_context)?;
        let splade = serde_json::json!({"embedding": {"pooling": "splade"}});
        (Head::None, Kind::Splade, Embedder::Sparse(Box::new(sparse)), splade)
    } else if is_classifier {
        let classifier =
            TextClassifier::from_pretrained_with(&dir, options.clone()).with_context(load_context)?;
        // One label is a cross-encoder, as TEI reads it. The encoder comes from the reranker's
        // classifier, whose tokenizer a CrossEncoder folder may have changed: the server tokenizes
        // with the encoder's.
        if config.num_labels() == 1 {
            let reranker = Reranker::from_classifier(classifier).with_context(load_context)?;
            let encoder = Embedder::Dense(Box::new(SentenceEncoder::from_classifier(reranker.classifier())?));
            (Head::Reranker(Box::new(reranker)), Kind::Reranker, encoder, classifier_type("reranker"))
        } else {
            let encoder = Embedder::Dense(Box::new(SentenceEncoder::from_classifier(&classifier)?));
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
        let model_type = serde_json::json!({"embedding": {"pooling": pooling}});
        (Head::None, Kind::Embedding, Embedder::Dense(Box::new(encoder)), model_type)
    };
    let (mut tokenizer, max_length, embedding_dim, prompt_names, prompts, default_prompt) = match &encoder {
        Embedder::Dense(encoder) => {
            // One encoder serves every prompt of a sentence-transformers folder: a request's
            // prompt name is passed per call (one copy of the weights).
            let names: Vec<String> = encoder.prompt_names().into_iter().map(str::to_string).collect();
            // Their texts: the server tokenizes a prompted input once, prompt and text together.
            let texts = names
                .iter()
                .map(|name| encoder.prompt_text(Prompt::Named(name)))
                .collect::<roformer::Result<Vec<String>>>()?;
            // What /embed puts before a text that names no prompt: --default-prompt, or the text of
            // --default-prompt-name. As in TEI, not the folder's own default_prompt_name.
            let default = match (&args.default_prompt, &args.default_prompt_name) {
                (Some(text), _) => text.clone(),
                (None, Some(name)) => encoder
                    .prompt_text(Prompt::Named(name))
                    .with_context(|| format!("--default-prompt-name {name}"))?,
                (None, None) => String::new(),
            };
            (encoder.tokenizer().clone(), encoder.max_length(), encoder.dim(), names, texts, default)
        }
        // No prompts: the flags that set one were refused above.
        Embedder::Sparse(sparse) => (
            sparse.tokenizer().clone(),
            sparse.max_length(),
            sparse.dim(),
            Vec::new(),
            Vec::new(),
            String::new(),
        ),
    };
    let backend =
        Backend { encoder, prompt_names: prompt_names.clone(), default_prompt: default_prompt.clone(), head };
    // As TEI: an input must fit in one batch, so the max input length is capped by the budget
    // when truncating, and is a startup error otherwise.
    let max_input_length = if max_length > args.max_batch_tokens {
        if !args.auto_truncate {
            bail!(
                "the model takes {max_length} tokens, more than --max-batch-tokens {}: raise it, or lower --max-length",
                args.max_batch_tokens
            );
        }
        let too_short = || {
            format!(
                "--max-batch-tokens {} is the longest input, and too short for this model",
                args.max_batch_tokens
            )
        };
        tokenizer
            .set_truncation(Some(Truncation::LongestFirst), Some(args.max_batch_tokens))
            .with_context(too_short)?;
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
    let tokenization_workers = args.tokenization_workers.unwrap_or_else(tokio_threads);
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
        default_prompt,
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
        spans,
    };
    let app = App { infer, served_model_name, info };
    Ok((backend, Arc::new(app)))
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
            log::info!("shutting down: finishing the requests in flight");
        })
    }
    #[cfg(not(unix))]
    {
        Ok(async {
            let _ = tokio::signal::ctrl_c().await;
            log::info!("shutting down: finishing the requests in flight");
        })
    }
}
