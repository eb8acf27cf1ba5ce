//! `capacity_leases`: a run's hold on its project's capacity (`store::capacity`).

use sea_orm::entity::prelude::*;

#[derive(Clone, Debug, PartialEq, DeriveEntityModel)]
#[sea_orm(table_name = "capacity_leases")]
pub struct Model {
    /// A UUIDv7.
    #[sea_orm(primary_key, auto_increment = false)]
    pub lease_id: String,
    pub tenant_id: String,
    pub project_id: String,
    pub run_id: String,
    pub attempt_id: String,
    /// `provisioning-run`.
    pub holder_kind: String,
    /// The holder's workflow id.
    pub holder_id: String,
    pub pool_id: String,
    pub cpu: f64,
    pub memory_gb: f64,
    /// `waiting`, `granted`, `released` or `expired`.
    pub state: String,
    pub requested_at: DateTimeUtc,
    pub granted_at: Option<DateTimeUtc>,
    pub expires_at: Option<DateTimeUtc>,
    pub released_at: Option<DateTimeUtc>,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
