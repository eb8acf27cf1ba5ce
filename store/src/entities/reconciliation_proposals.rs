//! `reconciliation_proposals`: reviewable changes grouping an environment's open findings.

use sea_orm::entity::prelude::*;

#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "reconciliation_proposals")]
pub struct Model {
    /// A UUIDv7 (time-ordered, for cursor pagination).
    #[sea_orm(primary_key, auto_increment = false)]
    pub proposal_id: String,
    pub tenant_id: String,
    pub environment_id: String,
    /// The findings it covers (a JSON list of ids).
    pub finding_ids: Json,
    /// `apply-declared` or `adopt-observed`.
    pub direction: String,
    pub plan_summary: Json,
    pub destructive: bool,
    /// `Proposed`, `Accepted`, `Rejected`, `Superseded`, `Applied`.
    pub state: String,
    pub decided_by: Option<String>,
    pub decision_reason: Option<String>,
    pub provisioning_run_id: Option<String>,
    pub raised_at: DateTimeUtc,
    pub decided_at: Option<DateTimeUtc>,
    /// `models::policy::PolicyDecision`: asked before it would be accepted on its own.
    pub policy: Option<Json>,
    pub created_at: DateTimeUtc,
    pub updated_at: DateTimeUtc,
    /// Its workflow is known to have started (see `store::proposals::mark_started`).
    pub workflow_started: bool,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
