//! `environments`: a tenant's deployment targets and their class.

use sea_orm::entity::prelude::*;

/// One environment of a tenant.
#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "environments")]
pub struct Model {
    /// Surrogate key.
    #[sea_orm(primary_key, auto_increment = false)]
    pub id: String,
    /// Owner tenant.
    pub tenant_id: String,
    /// The environment's id, unique within the tenant.
    pub environment_id: String,
    /// Owner project.
    pub project_id: String,
    /// `production` or `non-production`.
    pub class: String,
    /// The runner / observer adapters that serve it: a typed target
    /// (`models::targets::Target`) as JSON.
    pub target: String,
    /// `observe`, `propose` or `auto`; null: the class's default.
    pub mode: Option<String>,
    /// A JSON object of strings; null: none.
    pub labels: Option<String>,
    /// The customer tenant inside the product, where given.
    pub customer_tenant_id: Option<String>,
    /// The worker pool whose task queue runs its plans and applies; none for the default.
    pub pool_id: Option<String>,
    /// `active` or `retired` (`models::lifetime::EnvironmentState`).
    pub state: String,
    /// When an ephemeral environment is decommissioned; null: it is not ephemeral.
    pub expires_at: Option<DateTimeUtc>,
    /// The expiry whose `EnvironmentExpiring` was sent: an extension warns again.
    pub warned_for: Option<DateTimeUtc>,
    /// When a decommission run retired it.
    pub retired_at: Option<DateTimeUtc>,
    pub created_at: DateTimeUtc,
    pub updated_at: DateTimeUtc,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
