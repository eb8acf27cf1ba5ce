//! `inbox_events`: the inbound events handled, by event id (`store::inbox`).

use sea_orm::entity::prelude::*;

#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "inbox_events")]
pub struct Model {
    /// The CloudEvents `id`.
    #[sea_orm(primary_key, auto_increment = false)]
    pub event_id: String,
    /// The CloudEvents `type`.
    pub event_type: String,
    pub tenant_id: String,
    pub received_at: DateTimeUtc,
    /// `store::inbox::Effect`: what it did besides its rows (a run to start, a decision to
    /// signal).
    pub effect: Json,
    /// When that effect reached Temporal (the run's workflow started, the signal sent).
    pub delivered_at: Option<DateTimeUtc>,
    /// What the event's proven approval is spent on (`models::inbound::proof::spend_key`);
    /// unique per tenant, so a replay under another event id is refused.
    pub spend_key: Option<String>,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
