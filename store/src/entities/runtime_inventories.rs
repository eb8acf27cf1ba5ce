//! `runtime_inventories`: the observed state of each environment (one row per environment).

use sea_orm::entity::prelude::*;

#[derive(Clone, Debug, PartialEq, DeriveEntityModel)]
#[sea_orm(table_name = "runtime_inventories")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub id: String,
    pub tenant_id: String,
    pub environment_id: String,
    pub project_id: String,
    /// The observed workloads (bindings by reference).
    pub workloads: Json,
    pub current_release_id: Option<String>,
    /// The declared version last applied.
    pub specification_version: Option<i32>,
    /// Null until the first successful observation.
    pub observed_at: Option<DateTimeUtc>,
    pub stale: bool,
    /// Why the last observation failed, if it did.
    pub last_error: Option<String>,
    /// The posture violations the last observation found (`models::posture::Violation`s).
    pub posture: Json,
    /// The runner state's resources by type (`{type: count}`).
    pub resource_types: Json,
    /// `models::cost::Cost`; null without a price table.
    pub cost: Option<Json>,
    /// The cost's `hourly`, for sums by project and customer tenant.
    #[sea_orm(column_type = "Double", nullable)]
    pub hourly_cost: Option<f64>,
    /// What the last comparison compared against (`observations::comparison_key`).
    pub compared_with: Option<String>,
    pub created_at: DateTimeUtc,
    pub updated_at: DateTimeUtc,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
