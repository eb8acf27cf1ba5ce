//! Connect a Temporal client.

use crate::Error;
use std::future::Future;
use temporalio_client::{Client, ClientOptions, Connection, ConnectionOptions};
use temporalio_sdk::opentelemetry::OpenTelemetryPlugin;
use url::Url;

/// Connects to the frontend at `address` (`127.0.0.1:7233` or `http://…`) in `namespace`.
pub async fn connect(address: &str, namespace: &str) -> Result<Client, Error> {
    connect_with(address, namespace, false).await
}

/// Like [`connect`]; with `trace_context` the client's starts and signals, and the workflows
/// and activities of a worker built on it, carry W3C trace context in the `_tracer-data`
/// Temporal header and record spans through the global OpenTelemetry tracer, so one trace runs
/// from an API request through its workflow to the activities.
pub async fn connect_with(
    address: &str,
    namespace: &str,
    trace_context: bool,
) -> Result<Client, Error> {
    let url = if address.contains("://") {
        address.to_owned()
    } else {
        format!("http://{address}")
    };
    let url = Url::parse(&url).map_err(|source| Error::Address {
        address: address.to_owned(),
        source,
    })?;
    let connection = Connection::connect(
        ConnectionOptions::new(url)
            .identity(format!("runtime-cloud@{}", std::process::id()))
            .build(),
    )
    .await
    .map_err(|source| Error::Connect {
        address: address.to_owned(),
        source,
    })?;
    let plugins = trace_context.then(|| OpenTelemetryPlugin::builder().build());
    let options = ClientOptions::new(namespace.to_owned())
        .plugins(plugins)
        .build();
    Client::new(connection, options).map_err(|source| Error::Client {
        address: address.to_owned(),
        source,
    })
}

/// Runs `call` (a workflow start or signal) inside the current `tracing` span's OpenTelemetry
/// context, so the Temporal client interceptor makes it that span's child. Without an
/// OpenTelemetry layer installed the context is empty and nothing changes.
pub fn in_current_span<F: Future>(call: F) -> opentelemetry::context::WithContext<F> {
    use opentelemetry::context::FutureExt as _;
    use tracing_opentelemetry::OpenTelemetrySpanExt as _;
    call.with_context(tracing::Span::current().context())
}
