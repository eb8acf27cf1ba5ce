//! `environment_lifetime_limits`: a tenant's longest time to live for its ephemeral
//! environments.

use sea_orm::entity::prelude::*;

#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "environment_lifetime_limits")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub tenant_id: String,
    /// The longest expiry from now, in seconds, at registration and at each extension.
    pub max_ttl_seconds: i64,
    /// The PlatformAdmin who set it.
    pub set_by: String,
    pub updated_at: DateTimeUtc,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
