//! `quotas`: what one tenant's project may run (`store::capacity`).

use sea_orm::entity::prelude::*;

#[derive(Clone, Debug, PartialEq, DeriveEntityModel)]
#[sea_orm(table_name = "quotas")]
pub struct Model {
    /// A UUIDv7.
    #[sea_orm(primary_key, auto_increment = false)]
    pub quota_id: String,
    pub tenant_id: String,
    pub project_id: String,
    pub concurrent_runs: i32,
    pub concurrent_sandboxes: i32,
    pub cpu_per_attempt: f64,
    pub memory_gb_per_attempt: f64,
    pub execution_minutes_per_day: i32,
    /// Who set it: `platform-admin` (by the API).
    pub source: String,
    pub set_by: String,
    pub updated_at: DateTimeUtc,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
