//! `--otlp-endpoint` (feature `otlp`): a request's spans reach an OTLP receiver this test runs on
//! 127.0.0.1, one per request and one per phase, under the service name asked for.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use opentelemetry_proto::tonic::collector::trace::v1::trace_service_server::{
    TraceService, TraceServiceServer,
};
use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTraceServiceRequest, ExportTraceServiceResponse,
};
use serde_json::json;

use crate::*;

#[derive(Clone, Default)]
struct Receiver(Arc<Mutex<Vec<ExportTraceServiceRequest>>>);

#[tonic::async_trait]
impl TraceService for Receiver {
    async fn export(
        &self,
        request: tonic::Request<ExportTraceServiceRequest>,
    ) -> Result<tonic::Response<ExportTraceServiceResponse>, tonic::Status> {
        self.0.lock().unwrap().push(request.into_inner());
        Ok(tonic::Response::new(ExportTraceServiceResponse::default()))
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn request_spans_arrive_at_an_otlp_receiver() {
    let receiver = Receiver::default();
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let address = format!("127.0.0.1:{port}").parse().unwrap();
    let service = TraceServiceServer::new(receiver.clone());
    tokio::spawn(tonic::transport::Server::builder().add_service(service).serve(address));
    tokio::time::sleep(Duration::from_millis(200)).await;

    let endpoint = format!("http://127.0.0.1:{port}");
    let flags = ["--prometheus-port", "0", "--otlp-endpoint", &endpoint, "--otlp-service-name", "spans-test"];
    let server = Server::start(&model("cls"), &flags);
    let server = tokio::task::spawn_blocking(move || {
        server.ok("/predict", json!({"inputs": "a great film"}));
        server.ok("/embed", json!({"inputs": ["a", "b"]}));
        server
    })
    .await
    .unwrap();

    let mut spans = Vec::new();
    for _ in 0..50 {
        tokio::time::sleep(Duration::from_millis(100)).await;
        let received = receiver.0.lock().unwrap();
        spans = received
            .iter()
            .flat_map(|r| &r.resource_spans)
            .inspect(|r| {
                let attributes = &r.resource.as_ref().unwrap().attributes;
                assert_eq!(attributes[0].key, "service.name");
                assert_eq!(
                    format!("{:?}", attributes[0].value),
                    format!(
                        "{:?}",
                        Some(opentelemetry_proto::tonic::common::v1::AnyValue {
                            value: Some(
                                opentelemetry_proto::tonic::common::v1::any_value::Value::StringValue(
                                    "spans-test".into()
                                )
                            )
                        })
                    )
                );
            })
            .flat_map(|r| &r.scope_spans)
            .flat_map(|s| s.spans.clone())
            .collect::<Vec<_>>();
        if spans.len() >= 8 {
            break;
        }
    }
    let names: Vec<&str> = spans.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(spans.len(), 8, "{names:?}");
    for root in spans.iter().filter(|s| s.parent_span_id.is_empty()) {
        assert!(["predict", "embed"].contains(&root.name.as_str()), "{names:?}");
        let children: Vec<&str> = spans
            .iter()
            .filter(|s| s.parent_span_id == root.span_id && s.trace_id == root.trace_id)
            .map(|s| s.name.as_str())
            .collect();
        assert_eq!(children, ["tokenization", "queue", "inference"], "{}", root.name);
        assert!(root.end_time_unix_nano > root.start_time_unix_nano);
    }
    drop(server);
}
