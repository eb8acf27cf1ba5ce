//! The HTTP API of Runtime Cloud: a thin axum layer that starts and signals workflows and
//! answers reads from the read tables, through `runtime-cloud-store`.
//!
//! # Layout
//!
//! - [`error`]: the one `Error`, rendered as RFC 7807 problem JSON.
//! - [`auth`]: bearer JWTs (mint and verify), the `Auth` extractor, scopes.
//! - [`json`]: a JSON body extractor whose rejections are problem JSON too.
//! - [`query`]: a query-string extractor whose rejections are problem JSON too.
//! - [`tenancy`]: the caller's environment or 404, for HTTP and gRPC alike.
//! - [`http`]: one module per resource, each with its own `router()`.
//! - [`grpc`]: the tonic services, served on the same port.
//! - [`inbound`]: inbound events from NATS JetStream (inbox, dead letters, lag).
//! - [`pacing`]: each tenant's run submissions, paced so one tenant's flood waits its turn.
//! - [`starter`]: starts the workflows of runs whose request ended before it started them.
//! - [`openapi`]: the OpenAPI 3.1 document's frame, and the routes that serve the document
//!   [`http`] builds (`/openapi.json`) and its page (`/docs`).

pub mod auth;
pub mod error;
pub mod grpc;
pub mod http;
pub mod inbound;
pub mod json;
pub mod openapi;
pub mod pacing;
pub mod query;
pub mod starter;
pub mod tenancy;

pub use error::Error;
pub use http::{router, serve};

use runtime_cloud_models::options::{InventoryOptions, ProvisioningOptions};
use runtime_cloud_store::DatabaseConnection;
use std::sync::Arc;
use temporalio_client::Client;

/// Everything a handler needs. Cheap to clone.
#[derive(Clone)]
pub struct AppState {
    /// The read DB.
    pub db: DatabaseConnection,
    /// The Temporal client: commands go to workflows.
    pub temporal: Client,
    /// The task queue workflows are started on.
    pub task_queue: String,
    /// Verifies bearer tokens.
    pub auth: Arc<auth::Authenticator>,
    /// How the console signs operators in.
    pub sign_in: Arc<auth::SignIn>,
    /// The provisioning options runs are started with.
    pub options: ProvisioningOptions,
    /// The inventory options (staleness window).
    pub inventory: InventoryOptions,
    /// RunControlService holds approvals too: an id this process has not recorded may still
    /// verify there, so the run (not the API) decides on it.
    pub approvals_elsewhere: bool,
    /// A Prometheus answers rollouts' SLO queries (the worker has the same configuration).
    pub slo_queries: bool,
    /// Where the workers keep plan and apply logs.
    pub artifacts: Arc<dyn object_store::ObjectStore>,
    /// This process's HTTP request durations.
    pub http_metrics: Arc<http::metrics::HttpMetrics>,
    /// The inbound consumer's pending and unacknowledged events; -1 without a consumer.
    pub inbox_lag: Arc<std::sync::atomic::AtomicI64>,
    /// When the oldest inbound event not yet acknowledged was published (Unix milliseconds),
    /// 0 when none waits; -1 without a consumer.
    pub inbox_oldest: Arc<std::sync::atomic::AtomicI64>,
    /// Paces each tenant's run submissions.
    pub pacer: Arc<pacing::Pacer>,
    /// Inbound approvals refused, by event type and reason.
    pub inbound_refusals: Arc<http::metrics::Refusals>,
    /// The keys workflow payloads are encrypted with, for the codec endpoint (`/codec/…`,
    /// the Temporal UI's and CLI's codec server); `None` when payloads go plain.
    pub payload_keys: Option<runtime_cloud_temporal::PayloadKeys>,
    /// `/metrics` is served on the internal listener: the public route answers 404.
    pub metrics_internal: bool,
    /// The inbound consumer runs (NATS is configured).
    pub nats_configured: bool,
    /// The workers watch the Kubernetes clusters: an environment observed on one starts its
    /// cluster's watch.
    pub kubernetes_watch: bool,
    /// Why NATS refuses the inbound consumer, while it does (readiness).
    pub nats_refusal: Arc<inbound::NatsRefusal>,
}
