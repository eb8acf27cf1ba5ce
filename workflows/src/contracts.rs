//! Activity contracts: what the workflows may ask of the outside world.
//!
//! The names are fixed strings so a renamed Rust method never breaks a running history.

#![allow(clippy::unimplemented)] // `#[activity_definitions]` requires `unimplemented!()` bodies.

use runtime_cloud_models::{ApplyReceipt, PlanReceipt, RunInput, RunStatus, SpecificationSnapshot};
use serde::{Deserialize, Serialize};
use temporalio_common::ActivityError;
use temporalio_macros::activity_definitions;

/// Ask for an environment's lock: signal-with-start of its [`crate::EnvironmentLock`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LockRequest {
    /// The lock's workflow id (`environment/{tenant}/{env}`).
    pub lock_workflow_id: String,
    /// The workflow id that wants the lock and is signalled when it gets it.
    pub requester_workflow_id: String,
}

/// Plan a specification against its environment's target.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PlanRequest {
    pub run_id: String,
    pub tenant_id: String,
    pub environment_id: String,
    pub specification: SpecificationSnapshot,
}

/// Apply a recorded plan. The runner refuses when the target no longer matches the plan's
/// inputs hash, and answers a repeated request for the same run with the recorded receipt.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ApplyRequest {
    pub run_id: String,
    pub tenant_id: String,
    pub environment_id: String,
    pub specification: SpecificationSnapshot,
    pub plan: PlanReceipt,
}

/// Project a run's current status into the read tables, with its event, in one transaction.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RunProjection {
    pub run: RunInput,
    pub status: RunStatus,
}

/// The `ApplicationFailure` type name of a runner that failed the apply: never retried.
pub const APPLY_FAILED: &str = "ApplyFailed";
/// The `ApplicationFailure` type name of a plan that cannot succeed (program version missing).
pub const PLAN_INVALID: &str = "PlanInvalid";

/// The provisioning activities.
pub struct ProvisioningActivities;

#[activity_definitions]
impl ProvisioningActivities {
    /// See [`LockRequest`].
    #[activity(name = "provisioning.request-lock")]
    pub fn request_lock(req: LockRequest) -> Result<(), ActivityError> {
        unimplemented!()
    }

    /// See [`PlanRequest`].
    #[activity(name = "provisioning.plan")]
    pub fn plan(req: PlanRequest) -> Result<PlanReceipt, ActivityError> {
        unimplemented!()
    }

    /// See [`ApplyRequest`].
    #[activity(name = "provisioning.apply")]
    pub fn apply(req: ApplyRequest) -> Result<ApplyReceipt, ActivityError> {
        unimplemented!()
    }

    /// See [`RunProjection`].
    #[activity(name = "provisioning.project")]
    pub fn project(p: RunProjection) -> Result<(), ActivityError> {
        unimplemented!()
    }
}

/// Marker types of the provisioning activities, for `#[activity(definition = …)]` on the
/// implementations.
pub mod provisioning_markers {
    pub use super::provisioning_activities::{Apply, Plan, Project, RequestLock};
}
