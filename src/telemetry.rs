//! Logs and traces.
//!
//! `tracing` events go to stderr as text or JSON lines (`--log-format json`). When an OTLP
//! endpoint is configured (`OTEL_EXPORTER_OTLP_ENDPOINT`), spans are also exported over
//! OTLP/HTTP and the Temporal client carries trace context through workflows into activities,
//! so one trace runs from an API request to the activity that applied it.

use crate::config;
use anyhow::Context as _;
use opentelemetry::trace::TracerProvider as _;
use opentelemetry_otlp::WithExportConfig as _;
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::{BatchSpanProcessor, SdkTracerProvider};
use runtime_cloud_temporal::{WorkflowIdGenerator, WorkflowSpanProcessor};
use tracing_subscriber::layer::SubscriberExt as _;
use tracing_subscriber::util::SubscriberInitExt as _;
use tracing_subscriber::{EnvFilter, Layer as _};

/// Flushes exported spans when dropped.
pub struct Telemetry {
    provider: Option<SdkTracerProvider>,
}

impl Drop for Telemetry {
    fn drop(&mut self) {
        if let Some(provider) = self.provider.take()
            && let Err(e) = provider.shutdown()
        {
            eprintln!("flushing spans: {e}");
        }
    }
}

/// Installs the global subscriber. Call it outside the async runtime: the OTLP exporter uses a
/// blocking HTTP client on the batch processor's own thread.
pub fn init(
    log_format: &str,
    otlp_endpoint: Option<&str>,
    default_service: &str,
) -> anyhow::Result<Telemetry> {
    let filter = EnvFilter::try_from_env(config::RUST_LOG.env)
        .unwrap_or_else(|_| config::RUST_LOG.default.unwrap_or_default().into());
    let fmt = tracing_subscriber::fmt::layer().with_writer(std::io::stderr);
    let fmt = if log_format == "json" {
        fmt.json().boxed()
    } else {
        fmt.boxed()
    };
    let provider = otlp_endpoint
        .map(|e| provider(e, default_service))
        .transpose()?;
    let otel = provider.as_ref().map(|p| {
        tracing_opentelemetry::layer()
            .with_tracer(p.tracer("runtime-cloud"))
            .boxed()
    });
    tracing_subscriber::registry()
        .with(fmt)
        .with(otel)
        .with(filter)
        .try_init()
        .context("installing the log subscriber")?;
    Ok(Telemetry { provider })
}

fn provider(endpoint: &str, default_service: &str) -> anyhow::Result<SdkTracerProvider> {
    // The exporter's HTTP client uses rustls without choosing a crypto provider; the process
    // has one (ring) already. An error means another part installed one first, which is fine.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .with_endpoint(format!("{}/v1/traces", endpoint.trim_end_matches('/')))
        .build()
        .with_context(|| format!("configuring the OTLP exporter for {endpoint}"))?;
    // OTEL_SERVICE_NAME (read by the resource's default detectors) wins over the default.
    let mut resource = Resource::builder();
    if std::env::var_os(config::OTEL_SERVICE_NAME.env).is_none() {
        resource = resource.with_service_name(default_service.to_owned());
    }
    let provider = SdkTracerProvider::builder()
        .with_resource(resource.build())
        // Workflow spans get the same ids on replay, and replayed ones are not exported twice.
        .with_id_generator(WorkflowIdGenerator::default())
        .with_span_processor(WorkflowSpanProcessor::new(
            BatchSpanProcessor::builder(exporter).build(),
        ))
        .build();
    opentelemetry::global::set_tracer_provider(provider.clone());
    opentelemetry::global::set_text_map_propagator(TraceContextPropagator::new());
    Ok(provider)
}
