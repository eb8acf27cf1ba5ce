//! `outbox_events`: integration events written in the same transaction as the change they
//! report; a relay publishes them in `seq` order.

use sea_orm::entity::prelude::*;

/// One event.
#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "outbox_events")]
pub struct Model {
    /// Publication order.
    #[sea_orm(primary_key)]
    pub seq: i64,
    /// The event id (CloudEvents `id`, the dedupe id).
    #[sea_orm(unique)]
    pub event_id: String,
    pub tenant_id: String,
    /// `ProvisioningApplied` …
    pub event_type: String,
    /// `provisioning.runs.v1.provisioning-applied` …
    pub topic: String,
    pub aggregate_id: String,
    pub payload: Json,
    pub occurred_at: DateTimeUtc,
    pub published_at: Option<DateTimeUtc>,
    pub created_at: DateTimeUtc,
    pub updated_at: DateTimeUtc,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
