//! `approvals`: recorded approvals of production applies, and the run that spent each.

use sea_orm::entity::prelude::*;

/// One recorded approval.
#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "approvals")]
pub struct Model {
    /// A GUID (UUIDv7: newest first by id).
    #[sea_orm(primary_key, auto_increment = false)]
    pub approval_id: String,
    pub tenant_id: String,
    pub environment_id: String,
    /// `production` or `non-production`.
    pub class: String,
    /// `approve` or `reject`.
    pub decision: String,
    /// The token subject that decided.
    pub granted_by: String,
    /// Its roles then, a JSON list of strings.
    pub granted_by_roles: Json,
    #[sea_orm(column_type = "Text")]
    pub reason: String,
    /// The plan it is for, when it names one.
    pub inputs_hash: Option<String>,
    pub promotion_id: Option<String>,
    /// `operator`, `run-decision`, `promotion` or `run-control`.
    pub source: String,
    pub decided_at: DateTimeUtc,
    pub expires_at: DateTimeUtc,
    /// The run that spent it.
    pub spent_by_run_id: Option<String>,
    pub spent_at: Option<DateTimeUtc>,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
