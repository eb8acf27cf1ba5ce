//! `offboarding_orders`: an instance's off-boarding order and its archive.

use sea_orm::entity::prelude::*;

#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "offboarding_orders")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub order_id: String,
    pub tenant_id: String,
    pub environment_id: String,
    /// `models::offboarding::OrderState`.
    pub state: String,
    #[sea_orm(column_type = "Text")]
    pub reason: String,
    pub requested_by: String,
    pub archive_key: Option<String>,
    pub archive_sha256: Option<String>,
    pub archive_bytes: Option<i64>,
    /// `models::offboarding::Manifest`, once verified.
    pub manifest: Option<Json>,
    pub exported_at: Option<DateTimeUtc>,
    pub provisioning_run_id: Option<String>,
    #[sea_orm(column_type = "Text", nullable)]
    pub failure: Option<String>,
    pub created_at: DateTimeUtc,
    pub updated_at: DateTimeUtc,
    pub completed_at: Option<DateTimeUtc>,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
