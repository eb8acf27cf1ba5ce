//! Wiring to Temporal: the client connection, starting runs' workflows, what a task queue's
//! pollers say, and the local dev-server bootstrap of `runtime-cloud dev`. (The worker, which
//! registers every workflow and activity, is the binary's: `src/worker.rs`.)
//!
//! # Layout
//!
//! - [`connection`]: connect a client to a frontend.
//! - [`codec`]: workflow payloads encrypted (AES-256-GCM) before they leave the process.
//! - [`admission`]: start a run's workflow; start the deferred runs a freed slot admits.
//! - [`adoptions`]: start the program adoptions' workflows, unless they run.
//! - [`cluster_watches`]: start the Kubernetes clusters' watches, unless they run.
//! - [`lifetimes`]: start, tell and ask the environments' lifetimes (expiry, decommission).
//! - [`observations`]: tell an environment what runs there changed (its watched observation).
//! - [`offboarding`]: start the off-boarding orders' workflows, unless they run.
//! - [`task_queues`]: a task queue's pollers and backlog (a worker pool's load).
//! - [`schedules`]: the observation sweep and GitOps reconciler schedules, created idempotently.
//! - [`dev_server`]: start (or reuse) `temporal server start-dev` on a file-backed store with
//!   the custom search attributes registered.

pub mod admission;
pub mod adoptions;
pub mod cluster_watches;
pub mod codec;
pub mod connection;
pub mod dev_server;
pub mod lifetimes;
pub mod observations;
pub mod offboarding;
pub mod schedules;
pub mod task_queues;

pub use codec::PayloadKeys;
pub use connection::{Connect, Tls, connect, connect_with, in_current_span};
/// A worker pool's task queue.
pub use runtime_cloud_workflows::ids::pool_task_queue;
/// What Temporal says of a worker pool's task queue (its workers and backlog).
pub use task_queues::{PoolLoad, pool_load};
pub use temporalio_client::Client;
/// What a tracer provider needs for replay-safe workflow spans.
pub use temporalio_sdk::opentelemetry::{WorkflowIdGenerator, WorkflowSpanProcessor};

/// The task queue every workflow and activity runs on unless configured otherwise.
pub const DEFAULT_TASK_QUEUE: &str = "runtime-cloud";

/// The one error type of this crate.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The frontend address is not a URL.
    #[error("invalid Temporal address `{address}`: {source}")]
    Address {
        /// The address as configured.
        address: String,
        #[source]
        source: url::ParseError,
    },
    /// The frontend did not answer, or refused the connection (TLS, credentials).
    #[error("cannot connect to Temporal at {address}: {}", causes(source))]
    Connect {
        /// The address as configured.
        address: String,
        #[source]
        source: temporalio_client::errors::ClientConnectError,
    },
    /// The client could not be built on the connection (a plugin refused its options).
    #[error("cannot create the Temporal client for {address}: {source}")]
    Client {
        /// The address as configured.
        address: String,
        #[source]
        source: temporalio_client::errors::ClientNewError,
    },
    /// The SDK runtime could not start on the current Tokio runtime.
    #[error("worker: {0}")]
    Runtime(#[from] temporalio_sdk::RuntimeError),
    /// A workflow could not be registered on the worker.
    #[error("worker: {0}")]
    Registration(#[from] temporalio_sdk::WorkflowRegistrationError),
    /// The worker could not be built.
    #[error("worker: {0}")]
    WorkerCreate(#[from] temporalio_sdk::WorkerCreateError),
    /// The worker stopped with an error.
    #[error("worker: {0}")]
    WorkerRun(#[from] temporalio_sdk::WorkerRunError),
    /// A schedule could not be created or updated.
    #[error("{doing} schedule {id}: {source}")]
    Schedule {
        /// `creating` or `updating`.
        doing: &'static str,
        /// The schedule id.
        id: String,
        #[source]
        source: temporalio_client::schedules::ScheduleError,
    },
    /// A run's workflow could not be started; nothing was started.
    #[error("start run {run_id}: {source}")]
    Start {
        /// The run.
        run_id: String,
        #[source]
        source: temporalio_client::errors::WorkflowStartError,
    },
    /// The read DB refused a write or a read of admission.
    #[error(transparent)]
    Store(#[from] runtime_cloud_store::Error),
    /// A task queue could not be described.
    #[error("describe task queue {task_queue}: {status}")]
    DescribeTaskQueue {
        /// The task queue.
        task_queue: String,
        /// What the frontend answered.
        status: tonic::Status,
    },
    /// The dev server did not come up, or refused a search attribute.
    #[error("dev server: {0}")]
    DevServer(String),
    /// Running the Temporal CLI or preparing its files failed.
    #[error("dev server: {doing}: {source}")]
    DevServerIo {
        /// What was being done, e.g. ``running `temporal` ``.
        doing: String,
        #[source]
        source: std::io::Error,
    },
    /// A payload key file cannot be read, or does not hold a 32-byte key in base64.
    #[error("payload key {}: {reason}", path.display())]
    PayloadKey {
        /// The key file.
        path: std::path::PathBuf,
        /// What is wrong with it (never what it holds).
        reason: String,
    },
    /// The payload keys given are none, or two share an id.
    #[error("{0}")]
    PayloadKeyIds(String),
    /// A payload is encrypted with a key that is not configured.
    #[error(
        "a payload is encrypted with the key `{id}`, which is not among the payload keys ({})",
        known.join(", ")
    )]
    UnknownPayloadKey {
        /// The key id the payload names.
        id: String,
        /// The ids of the keys configured.
        known: Vec<String>,
    },
    /// An encrypted payload does not decrypt with the key it names: it was altered, or
    /// encrypted with another key of the same id.
    #[error(
        "a payload encrypted with the key `{id}` does not decrypt: it was altered, or \
         encrypted with another key of that id"
    )]
    UndecryptablePayload {
        /// The key id the payload names.
        id: String,
    },
    /// An encrypted payload is not shaped as this codec writes them.
    #[error("{0}")]
    MalformedPayload(&'static str),
}

/// An error and its causes, `: `-separated: a transport error's own message ("transport
/// error") leaves out why (refused, a certificate the CA did not sign, no client certificate).
fn causes(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        if !text.contains(&cause_text) {
            text = format!("{text}: {cause_text}");
        }
        source = cause.source();
    }
    text
}
