//! `worker_pools`: the task queues runs are served on (`store::capacity`).

use sea_orm::entity::prelude::*;

#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "worker_pools")]
pub struct Model {
    /// A UUIDv7: the order pages walk in.
    #[sea_orm(primary_key, auto_increment = false)]
    pub id: String,
    /// Unique across tenants: the pool's task queue is named after it.
    pub pool_id: String,
    pub tenant_id: String,
    /// `shared` or `dedicated`.
    pub kind: String,
    pub security_boundary: String,
    pub region: String,
    pub node_profile: String,
    pub min_size: i32,
    pub max_size: i32,
    /// `active`, `draining` or `disabled`.
    pub state: String,
    pub created_at: DateTimeUtc,
    pub updated_at: DateTimeUtc,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
