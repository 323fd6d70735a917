//! OpenTelemetry trace export (`--otlp-endpoint`, feature `otlp`): one span per request, named after
//! its task (`embed`, `predict`, ...), with a child span per phase (`tokenization`, `queue`,
//! `inference`), sent as OTLP over gRPC, as TEI sends its own. A task on the server's runtime
//! exports them: each export carries what has queued up since the last one began. An unreachable
//! collector is reported, once per failure streak, and never slows a request.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use opentelemetry_proto::tonic::collector::trace::v1::trace_service_client::TraceServiceClient;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::{any_value, AnyValue, InstrumentationScope, KeyValue};
use opentelemetry_proto::tonic::resource::v1::Resource;
use opentelemetry_proto::tonic::trace::v1::{span::SpanKind, ResourceSpans, ScopeSpans, Span};
use tokio::sync::mpsc;

use crate::infer::inference::{Phases, SpanSink};

/// The sink the inference core records each request's phases into, and the export loop to run
/// on the server's runtime.
pub fn exporter(
    endpoint: &str,
    service_name: &str,
) -> anyhow::Result<(SpanSink, impl std::future::Future<Output = ()>)> {
    let channel = tonic::transport::Channel::from_shared(endpoint.to_string())
        .map_err(|e| anyhow::anyhow!("--otlp-endpoint {endpoint}: {e}"))?;
    let (tx, rx) = mpsc::unbounded_channel::<Phases>();
    let sink: SpanSink = Arc::new(move |phases| {
        let _ = tx.send(phases);
    });
    Ok((sink, export(channel, rx, endpoint.to_string(), service_name.to_string())))
}

async fn export(
    channel: tonic::transport::Endpoint,
    mut rx: mpsc::UnboundedReceiver<Phases>,
    endpoint: String,
    service_name: String,
) {
    // Connected on first use, and again after a failure: a collector that starts later is found.
    let mut client = TraceServiceClient::new(channel.connect_lazy());
    let mut failing = false;
    // Each export takes what has queued up meanwhile (up to 512 requests' spans).
    while let Some(phases) = rx.recv().await {
        let mut spans = request_spans(&phases);
        for _ in 1..512 {
            match rx.try_recv() {
                Ok(phases) => spans.extend(request_spans(&phases)),
                Err(_) => break,
            }
        }
        match client.export(batch(&service_name, spans)).await {
            Ok(_) => failing = false,
            Err(status) if !failing => {
                failing = true;
                log::warn!("--otlp-endpoint {endpoint}: the spans were not exported: {}", status.message());
            }
            Err(_) => {}
        }
    }
}

fn batch(service_name: &str, spans: Vec<Span>) -> ExportTraceServiceRequest {
    ExportTraceServiceRequest {
        resource_spans: vec![ResourceSpans {
            resource: Some(Resource {
                attributes: vec![text("service.name", service_name)],
                ..Default::default()
            }),
            scope_spans: vec![ScopeSpans {
                scope: Some(InstrumentationScope {
                    name: "roformer-serve".into(),
                    version: env!("CARGO_PKG_VERSION").into(),
                    ..Default::default()
                }),
                spans,
                ..Default::default()
            }],
            ..Default::default()
        }],
    }
}

fn text(key: &str, value: &str) -> KeyValue {
    KeyValue {
        key: key.into(),
        value: Some(AnyValue { value: Some(any_value::Value::StringValue(value.into())) }),
    }
}

fn int(key: &str, value: usize) -> KeyValue {
    KeyValue {
        key: key.into(),
        value: Some(AnyValue { value: Some(any_value::Value::IntValue(value as i64)) }),
    }
}

/// The request's span and its phases', laid end to end from its start (queue and inference are
/// the averages over its inputs, as the metrics give them).
fn request_spans(phases: &Phases) -> Vec<Span> {
    let trace_id = [id(), id()].concat();
    let root = id();
    let nanos = |t: SystemTime| t.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64);
    let start = nanos(phases.start);
    let span = |name: &str, id: &[u8], parent: &[u8], from: Duration, length: Duration, attributes| Span {
        trace_id: trace_id.clone(),
        span_id: id.to_vec(),
        parent_span_id: parent.to_vec(),
        name: name.into(),
        kind: if parent.is_empty() { SpanKind::Server } else { SpanKind::Internal } as i32,
        start_time_unix_nano: start + from.as_nanos() as u64,
        end_time_unix_nano: start + (from + length).as_nanos() as u64,
        attributes,
        ..Default::default()
    };
    let counts = vec![int("inputs", phases.inputs), int("tokens", phases.tokens)];
    let queue_at = phases.tokenization;
    let inference_at = queue_at + phases.queue;
    vec![
        span(phases.task, &root, &[], Duration::ZERO, phases.total, counts),
        span("tokenization", &id(), &root, Duration::ZERO, phases.tokenization, vec![]),
        span("queue", &id(), &root, queue_at, phases.queue, vec![]),
        span("inference", &id(), &root, inference_at, phases.inference, vec![]),
    ]
}

/// 8 bytes unlikely to repeat: the clock and a counter, mixed (SplitMix64).
fn id() -> Vec<u8> {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let now = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64);
    let mut z = now ^ COUNTER.fetch_add(0x9E37_79B9_7F4A_7C15, Ordering::Relaxed);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    (z ^ (z >> 31)).max(1).to_be_bytes().to_vec()
}
