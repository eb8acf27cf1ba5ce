//! The one error type of this crate, and how it becomes an activity failure.

use runtime_cloud_workflows::contracts::{APPLY_FAILED, PLAN_INVALID};
use temporalio_sdk::ApplicationFailure;
use temporalio_sdk::activities::ActivityError;

/// What can go wrong in an adapter or a projection.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The read DB refused or lost the statement (the outbox relay's own queries); retryable.
    #[error("read database: {0}")]
    Db(#[from] sea_orm::DbErr),
    /// A read or write of the read tables failed; retryable (a lost connection comes back, a
    /// row another writer holds is released, a missing row may be written by then).
    #[error(transparent)]
    Store(#[from] runtime_cloud_store::Error),
    /// An artifact could not be written or read (the artifact store's disk or bucket);
    /// retryable.
    #[error("artifact store: {0}")]
    Artifacts(String),
    /// The sandbox document could not be read or written; retryable.
    #[error("sandbox target {path}: {source}")]
    SandboxIo {
        path: String,
        #[source]
        source: std::io::Error,
    },
    /// The sandbox document is not valid JSON.
    #[error("sandbox target {path} is corrupt: {source}")]
    SandboxCorrupt {
        path: String,
        #[source]
        source: serde_json::Error,
    },
    /// The target is unreachable; retryable.
    #[error("target unreachable: {0}")]
    Unreachable(String),
    /// The plan cannot succeed (the program version is missing); never retried.
    #[error("plan invalid: {0}")]
    PlanInvalid(String),
    /// The runner failed the apply; never retried.
    #[error("{0}")]
    ApplyFailed(String),
    /// The Temporal service refused or lost a call (starting or signalling a lock); retryable.
    #[error("temporal: {0}")]
    Temporal(String),
    /// NATS (the outbox relay's JetStream) refused or lost a call; the relay retries.
    #[error("NATS {doing}: {source}")]
    Nats {
        /// What the relay was doing: `at {url}`, `stream {name}`, `publishing {event id}`.
        doing: String,
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// A service the activity depends on (RunControlService) did not answer; retryable.
    #[error("{0}")]
    Unavailable(String),
    /// A stored value is not what this version of the code expects.
    #[error("invalid stored data: {0}")]
    Invalid(String),
}

/// A store call that failed: retried by the activity's policy (see [`activity_error`]).
pub(crate) fn store_failed(e: runtime_cloud_store::Error) -> ActivityError {
    activity_error(e.into())
}

/// Runner failures and invalid plans are terminal (typed, so the workflow's retry policy names
/// them); everything else (the DB, the target's reachability) is retried by the activity's policy.
pub(crate) fn activity_error(e: Error) -> ActivityError {
    let terminal = match &e {
        Error::PlanInvalid(_) => Some(PLAN_INVALID),
        Error::ApplyFailed(_) => Some(APPLY_FAILED),
        _ => None,
    };
    match terminal {
        Some(type_name) => ActivityError::application(
            ApplicationFailure::builder(e)
                .type_name(type_name.to_owned())
                .non_retryable(true)
                .build(),
        ),
        None => {
            tracing::warn!(error = %e, "activity failed; it will be retried");
            ActivityError::application(ApplicationFailure::new(e))
        }
    }
}
