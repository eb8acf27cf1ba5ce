//! `change_windows`: when the product may change an environment (`models::windows`).

use sea_orm::entity::prelude::*;

#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "change_windows")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub window_id: String,
    pub tenant_id: String,
    /// None: every environment of the tenant.
    pub environment_id: Option<String>,
    /// `allow` or `deny`.
    pub kind: String,
    /// A cron pattern in `time_zone`.
    pub schedule: String,
    /// `2h`, `30m`, `1h30m`.
    pub duration: String,
    pub time_zone: String,
    pub reason: String,
    pub created_by: String,
    pub created_at: DateTimeUtc,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
