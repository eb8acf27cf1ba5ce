//! Traces: one trace from the API request through the Temporal workflow to the activity that
//! applied the run, exported over OTLP/HTTP to a collector on loopback; JSON log lines carry
//! the run id.

use crate::common::{Stack, StackOptions, eventually};
use axum::body::Bytes;
use axum::extract::State;
use axum::routing::post;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::any_value::Value as AnyValue;
use prost::Message;
use std::sync::{Arc, Mutex};

/// One exported span, flattened.
#[derive(Debug, Clone)]
struct Span {
    service: String,
    name: String,
    trace_id: Vec<u8>,
    attributes: Vec<(String, String)>,
}

impl Span {
    fn attr(&self, key: &str) -> Option<&str> {
        self.attributes
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }
}

fn text(v: &Option<opentelemetry_proto::tonic::common::v1::AnyValue>) -> String {
    match v.as_ref().and_then(|v| v.value.as_ref()) {
        Some(AnyValue::StringValue(s)) => s.clone(),
        Some(AnyValue::IntValue(i)) => i.to_string(),
        Some(AnyValue::BoolValue(b)) => b.to_string(),
        other => format!("{other:?}"),
    }
}

/// A minimal OTLP/HTTP (protobuf) trace receiver: the real wire format, decoded with the
/// OpenTelemetry protos.
async fn collector() -> (String, Arc<Mutex<Vec<Span>>>) {
    let spans: Arc<Mutex<Vec<Span>>> = Arc::default();
    async fn receive(State(spans): State<Arc<Mutex<Vec<Span>>>>, body: Bytes) -> &'static str {
        let req = ExportTraceServiceRequest::decode(body).expect("OTLP protobuf");
        let mut out = spans.lock().expect("lock");
        for rs in req.resource_spans {
            let service = rs
                .resource
                .iter()
                .flat_map(|r| &r.attributes)
                .find(|a| a.key == "service.name")
                .map(|a| text(&a.value))
                .unwrap_or_default();
            for s in rs.scope_spans.into_iter().flat_map(|ss| ss.spans) {
                out.push(Span {
                    service: service.clone(),
                    name: s.name,
                    trace_id: s.trace_id,
                    attributes: s
                        .attributes
                        .iter()
                        .map(|a| (a.key.clone(), text(&a.value)))
                        .collect(),
                });
            }
        }
        ""
    }
    let app = axum::Router::new()
        .route("/v1/traces", post(receive))
        .with_state(spans.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(async move { axum::serve(listener, app).await });
    (format!("http://{addr}"), spans)
}

#[tokio::test]
async fn one_trace_runs_from_the_api_through_temporal_to_the_activities() {
    let (endpoint, spans) = collector().await;
    let stack = Stack::with(StackOptions {
        env: vec![
            ("OTEL_EXPORTER_OTLP_ENDPOINT".into(), endpoint),
            ("OTEL_BSP_SCHEDULE_DELAY".into(), "100".into()),
            ("RUNTIME_CLOUD_LOG_FORMAT".into(), "json".into()),
        ],
        ..Default::default()
    })
    .await;
    let api = stack.operator("traced");
    api.environment("dev", "non-production").await;
    api.declare("dev", &[("api", "1.0.0", 2)]).await;
    let run = api.plan_run("dev", "baseline").await;
    api.wait_state(&run, "Applied").await;

    // Spans arrive in batches, in no particular order: wait for the whole trace.
    let expected = [
        "StartWorkflow:ProvisioningRun",
        "StartActivity:provisioning.apply",
        "RunActivity:provisioning.apply",
        "project_run",
    ];
    let (plan, apply) = eventually(30, "the whole trace of the run", || {
        let spans = spans.lock().expect("lock").clone();
        let run = run.clone();
        async move {
            let with_run = |name: &str| {
                spans
                    .iter()
                    .find(|s| s.name == name && s.attr("run_id") == Some(run.as_str()))
                    .cloned()
            };
            let (plan, apply) = (with_run("plan")?, with_run("apply")?);
            let in_trace = |name: &str| {
                spans
                    .iter()
                    .any(|s| s.trace_id == plan.trace_id && s.name == name)
            };
            expected
                .iter()
                .all(|n| in_trace(n))
                .then_some((plan, apply))
        }
    })
    .await;
    assert_eq!(plan.service, "runtime-cloud-api");
    assert_eq!(apply.service, "runtime-cloud-worker");
    assert_eq!(
        plan.trace_id, apply.trace_id,
        "the apply activity is in the trace of the request that planned the run"
    );

    // The JSON log lines of the worker name the run in their span fields.
    let worker_log = std::fs::read_to_string(stack.data_path().join("worker.log")).expect("log");
    let line = worker_log
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .find(|l| l["span"]["run_id"] == run.as_str() || l["spans"].to_string().contains(&run))
        .unwrap_or_else(|| panic!("no JSON log line names run {run}:\n{worker_log}"));
    assert!(line["timestamp"].is_string() && line["level"].is_string());
}
