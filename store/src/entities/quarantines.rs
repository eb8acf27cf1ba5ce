//! `quarantines`: a workload version refused fleet-wide for a tenant, and its lifting.

use sea_orm::entity::prelude::*;

#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "quarantines")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub quarantine_id: String,
    pub tenant_id: String,
    pub workload: String,
    pub version: String,
    /// `rollback` or `operator`.
    pub source: String,
    #[sea_orm(column_type = "Text")]
    pub reason: String,
    pub rollout_id: Option<String>,
    pub quarantined_by: String,
    pub quarantined_at: DateTimeUtc,
    pub lifted_by: Option<String>,
    #[sea_orm(column_type = "Text", nullable)]
    pub lift_reason: Option<String>,
    /// Null while in force.
    pub lifted_at: Option<DateTimeUtc>,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
