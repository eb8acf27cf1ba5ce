//! Connect a Temporal client.

use crate::Error;
use std::future::Future;
use temporalio_client::{
    Client, ClientOptions, ClientTlsOptions, Connection, ConnectionOptions, GrpcCompression,
    TlsOptions,
};
use temporalio_sdk::opentelemetry::OpenTelemetryPlugin;
use url::Url;

/// How a client talks to the frontend, besides where.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Connect {
    /// The client's starts and signals, and the workflows and activities of a worker built on
    /// it, carry W3C trace context in the `_tracer-data` Temporal header and record spans
    /// through the global OpenTelemetry tracer, so one trace runs from an API request through
    /// its workflow to the activities.
    pub trace_context: bool,
    /// Gzip every request and accept gzipped answers. The SDK's default, but on a network
    /// where bandwidth is cheap it only costs CPU at both ends: a compressor set up for each
    /// message in the worker (about a twentieth of its CPU) and the server's inflating and
    /// deflating (docs/benchmarks.md).
    pub gzip: bool,
    /// TLS to the frontend; `None` dials in plain text (the local dev server).
    pub tls: Option<Tls>,
    /// An API key, sent as `Authorization: Bearer …` over TLS (Temporal Cloud): with a key the
    /// connection is TLS even without [`Connect::tls`], verified against the system's roots.
    pub api_key: Option<String>,
    /// Encrypt every payload with these keys before it leaves the process, and decrypt what
    /// comes back ([`crate::codec`]): the client's data converter, which a worker built on the
    /// client inherits. Plain payloads when `None`.
    pub payload_keys: Option<crate::PayloadKeys>,
    /// Who this process is to the frontend (a poller's identity in `temporal task-queue
    /// describe`); `runtime-cloud@{pid}` when `None`.
    pub identity: Option<String>,
}

/// TLS to the frontend: whom to trust, the name to verify, and the client's own certificate
/// for mutual TLS.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Tls {
    /// PEM CA bundle the server's certificate must chain to; the system's roots when `None`.
    pub ca: Option<Vec<u8>>,
    /// The name the server's certificate must carry; the address's host when `None`.
    pub server_name: Option<String>,
    /// PEM certificate and private key presented to a frontend that requires mTLS.
    pub client: Option<(Vec<u8>, Vec<u8>)>,
}

// The private key stays out of logs and panics.
impl std::fmt::Debug for Tls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tls")
            .field(
                "ca",
                &self.ca.as_ref().map(|c| format!("{} bytes", c.len())),
            )
            .field("server_name", &self.server_name)
            .field(
                "client",
                &self.client.as_ref().map(|_| "certificate and key"),
            )
            .finish()
    }
}

/// Connects to the frontend at `address` (`127.0.0.1:7233` or `http://…`) in `namespace`,
/// without trace context or compression.
pub async fn connect(address: &str, namespace: &str) -> Result<Client, Error> {
    connect_with(address, namespace, Connect::default()).await
}

/// The frontend's URL: `address` as given when it has a scheme, else `https://` when the
/// connection is TLS and `http://` when it is not.
fn frontend_url(address: &str, tls: bool) -> Result<Url, Error> {
    let url = match (address.contains("://"), tls) {
        (true, _) => address.to_owned(),
        (false, true) => format!("https://{address}"),
        (false, false) => format!("http://{address}"),
    };
    Url::parse(&url).map_err(|source| Error::Address {
        address: address.to_owned(),
        source,
    })
}

/// The SDK's TLS options for `how`, when the connection is TLS.
fn tls_options(how: &Connect) -> Option<TlsOptions> {
    if how.tls.is_none() && how.api_key.is_none() {
        return None;
    }
    let tls = how.tls.clone().unwrap_or_default();
    let client = tls.client.map(|(cert, key)| {
        ClientTlsOptions::builder()
            .client_cert(cert)
            .client_private_key(key)
            .build()
    });
    Some(
        TlsOptions::builder()
            .maybe_server_root_ca_cert(tls.ca)
            .maybe_domain(tls.server_name)
            .maybe_client_tls_options(client)
            .build(),
    )
}

/// Like [`connect`], as `how` says.
pub async fn connect_with(address: &str, namespace: &str, how: Connect) -> Result<Client, Error> {
    let tls = tls_options(&how);
    let url = frontend_url(address, tls.is_some())?;
    let connection = Connection::connect(
        ConnectionOptions::new(url)
            .identity(
                how.identity
                    .clone()
                    .unwrap_or_else(|| format!("runtime-cloud@{}", std::process::id())),
            )
            .grpc_compression(if how.gzip {
                GrpcCompression::Gzip
            } else {
                GrpcCompression::None
            })
            .maybe_tls_options(tls)
            .maybe_api_key(how.api_key.clone())
            .build(),
    )
    .await
    .map_err(|source| Error::Connect {
        address: address.to_owned(),
        source,
    })?;
    let plugins = how
        .trace_context
        .then(|| OpenTelemetryPlugin::builder().build());
    let options = ClientOptions::new(namespace.to_owned())
        .plugins(plugins)
        .maybe_data_converter(
            how.payload_keys
                .as_ref()
                .map(crate::PayloadKeys::data_converter),
        )
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The dev server answers a client that gzips and one that does not (the default): a
    /// frontend that takes only one of them would fail every call of the other. Needs the
    /// suite's Temporal dev server (`./scripts/test`).
    #[tokio::test]
    async fn the_server_answers_with_and_without_gzip() {
        let Ok(address) = std::env::var("RC_TEST_TEMPORAL_ADDRESS") else {
            panic!("RC_TEST_TEMPORAL_ADDRESS is not set: run the tests with ./scripts/test");
        };
        for gzip in [false, true] {
            let how = Connect {
                gzip,
                ..Connect::default()
            };
            let client = connect_with(&address, "default", how).await.unwrap();
            let count = client
                .count_workflows("WorkflowType='NoSuchWorkflow'", Default::default())
                .await
                .unwrap_or_else(|e| panic!("gzip {gzip}: {e}"));
            assert_eq!(count.count(), 0, "gzip {gzip}");
        }
    }
}
