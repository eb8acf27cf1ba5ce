//! `incidents`: what an operator must look at (`store::incidents`).

use sea_orm::entity::prelude::*;

#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "incidents")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub incident_id: String,
    pub tenant_id: String,
    pub title: String,
    /// `operator`, `slo-breach` or `rollout-halted`.
    pub source: String,
    pub environment_id: Option<String>,
    pub rollout_id: Option<String>,
    /// `open` or `resolved`.
    pub state: String,
    pub opened_by: String,
    pub opened_at: DateTimeUtc,
    pub resolved_by: Option<String>,
    pub resolution: Option<String>,
    pub resolved_at: Option<DateTimeUtc>,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
