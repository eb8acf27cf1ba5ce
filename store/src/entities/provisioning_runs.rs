//! `provisioning_runs`: the projection of every ProvisioningRun workflow.

use sea_orm::entity::prelude::*;

/// One run. `state` is null while the run waits for its turn on the environment or plans.
#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "provisioning_runs")]
pub struct Model {
    /// A UUIDv7, so ordering by id orders by start time (cursor pagination relies on it).
    #[sea_orm(primary_key, auto_increment = false)]
    pub provisioning_run_id: String,
    pub tenant_id: String,
    pub project_id: String,
    pub environment_id: String,
    pub specification_id: String,
    pub specification_version: i32,
    pub kind: String,
    pub promotion_id: Option<String>,
    pub approval_id: Option<String>,
    pub plan_receipt: Option<Json>,
    pub approval: Option<Json>,
    pub apply_receipt: Option<Json>,
    /// The approvals the run did not count (who, when, why), oldest first; null before the
    /// run's first projection.
    pub refused_approvals: Option<Json>,
    /// `models::WindowWait`, while a change window holds the apply.
    pub waiting_for_window: Option<Json>,
    /// `models::BreakGlass`, once an Operator broke a window for the run.
    pub break_glass: Option<Json>,
    /// `models::policy::PolicyDecision` on the run's plan.
    pub policy: Option<Json>,
    /// A person's run through quarantined versions (`models::quarantine::QuarantineOverride`).
    pub quarantine_override: Option<Json>,
    /// `models::capacity::CapacityWait`, while a quota or a pool without workers holds the run.
    pub waiting_for_capacity: Option<Json>,
    /// The whole minutes the apply counts against `executionMinutesPerDay`, once applied.
    pub apply_minutes: Option<i32>,
    pub state: Option<String>,
    /// Why the run failed, was rejected or cancelled.
    pub reason: Option<String>,
    pub logs_ref: Option<String>,
    /// The `Idempotency-Key` the run was requested with.
    pub idempotency_key: Option<String>,
    /// Hash of the request body, to refuse the same key with another body.
    pub request_hash: Option<String>,
    pub started_at: DateTimeUtc,
    pub completed_at: Option<DateTimeUtc>,
    pub created_at: DateTimeUtc,
    pub updated_at: DateTimeUtc,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
