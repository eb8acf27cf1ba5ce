//! Wiring to Temporal: the client connection, the worker with every workflow and activity,
//! and the local dev-server bootstrap of `runtime-cloud dev`.
//!
//! # Layout
//!
//! - [`connection`]: connect a client to a frontend.
//! - [`worker`]: build and run the worker until shutdown.
//! - [`schedules`]: the observation sweep and GitOps reconciler schedules, created idempotently.
//! - [`dev_server`]: start (or reuse) `temporal server start-dev` on a file-backed store with
//!   the custom search attributes registered.

pub mod connection;
pub mod dev_server;
pub mod schedules;
pub mod worker;

pub use connection::{connect, connect_with, in_current_span};
/// What a tracer provider needs for replay-safe workflow spans.
pub use temporalio_sdk::opentelemetry::{WorkflowIdGenerator, WorkflowSpanProcessor};

/// The task queue every workflow and activity runs on unless configured otherwise.
pub const DEFAULT_TASK_QUEUE: &str = "runtime-cloud";

/// The one error type of this crate.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The frontend address is not a URL.
    #[error("invalid Temporal address `{0}`")]
    Address(String),
    /// The frontend did not answer.
    #[error("cannot connect to Temporal at {address}: {source}")]
    Connect {
        address: String,
        #[source]
        source: anyhow::Error,
    },
    /// The worker could not be built or stopped with an error.
    #[error("worker: {0}")]
    Worker(#[source] anyhow::Error),
    /// The dev server could not be started.
    #[error("dev server: {0}")]
    DevServer(String),
}
