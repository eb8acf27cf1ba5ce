//! `drift_findings`: differences between declared and observed state. A finding is resolved
//! only by an observation that no longer shows it.

use sea_orm::entity::prelude::*;

#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "drift_findings")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub finding_id: String,
    pub tenant_id: String,
    pub environment_id: String,
    /// `version`, `replica`, `configuration`, `missing`, `unmanaged`, `secret-binding`,
    /// `posture`.
    pub kind: String,
    pub resource: String,
    /// The posture rule a `posture` finding breaks; none for drift.
    pub rule: Option<String>,
    pub declared: Option<Json>,
    pub observed: Option<Json>,
    pub detected_at: DateTimeUtc,
    pub proposal_id: Option<String>,
    pub resolved_at: Option<DateTimeUtc>,
    /// `models::observation::ChangedBy`, when the target records who wrote the field.
    pub changed_by: Option<Json>,
    /// The drift rule that suppresses it, while one does.
    pub suppressed_by: Option<String>,
    pub created_at: DateTimeUtc,
    pub updated_at: DateTimeUtc,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
