//! `drift_rules`: differences an operator expects, per environment or (without an environment)
//! per tenant; a finding a rule matches is suppressed, not proposed.

use sea_orm::entity::prelude::*;

#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "drift_rules")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub rule_id: String,
    pub tenant_id: String,
    /// None: a tenant default.
    pub environment_id: Option<String>,
    /// A drift kind.
    pub kind: String,
    /// A workload name or pattern (`*`).
    pub workload: String,
    pub field: Option<String>,
    pub manager: Option<String>,
    /// A posture rule id or pattern (kind `posture` only).
    pub rule: Option<String>,
    pub owner: String,
    pub reason: String,
    pub expires_at: Option<DateTimeUtc>,
    pub created_by: String,
    pub created_at: DateTimeUtc,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
