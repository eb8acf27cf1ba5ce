//! `deployment_specifications`: every declared version of an environment's desired state.
//! Rows are only ever inserted: a version never changes.

use sea_orm::entity::prelude::*;

/// One specification version.
#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "deployment_specifications")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub specification_id: String,
    pub tenant_id: String,
    pub project_id: String,
    pub environment_id: String,
    /// `environment` or `workload`.
    pub kind: String,
    /// Repository + path of the IaC program.
    pub program_ref: String,
    /// Commit of the program.
    pub program_version: String,
    pub release_id: Option<String>,
    pub strategy: Option<String>,
    /// Config Platform keys by reference.
    pub config_refs: Json,
    /// Secret references; never values.
    pub secret_refs: Json,
    /// The desired workloads (references only).
    pub workloads: Json,
    /// Counts up per environment from 1.
    pub version: i32,
    pub declared_at: DateTimeUtc,
    pub created_at: DateTimeUtc,
    pub updated_at: DateTimeUtc,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
