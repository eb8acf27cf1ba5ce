//! `observed_workloads`: one row per workload of the latest observation of an environment.

use sea_orm::entity::prelude::*;

#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "observed_workloads")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub id: String,
    pub tenant_id: String,
    pub environment_id: String,
    pub name: String,
    pub kind: String,
    pub version: String,
    pub replicas_ready: i32,
    pub replicas_desired: i32,
    pub endpoints: Json,
    pub config_refs: Json,
    pub secret_refs: Json,
    pub health: String,
    pub observed_at: DateTimeUtc,
    pub created_at: DateTimeUtc,
    pub updated_at: DateTimeUtc,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
