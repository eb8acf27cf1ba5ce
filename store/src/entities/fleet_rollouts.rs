//! `fleet_rollouts`: each fleet rollout (`store::rollouts`).

use sea_orm::entity::prelude::*;

#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "fleet_rollouts")]
pub struct Model {
    /// A UUIDv7.
    #[sea_orm(primary_key, auto_increment = false)]
    pub rollout_id: String,
    pub tenant_id: String,
    /// `Running`, `Halted`, `Completed`, `Aborted`.
    pub state: String,
    /// `models::rollouts::RolloutInput`.
    pub input: Json,
    /// `models::rollouts::RolloutStatus`.
    pub status: Json,
    pub requested_by: String,
    pub created_at: DateTimeUtc,
    pub updated_at: DateTimeUtc,
    /// When the rollout last read where its instances stand.
    pub checked_at: Option<DateTimeUtc>,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
