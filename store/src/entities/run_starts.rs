//! `run_starts`: runs the API wrote whose workflow may not have started yet
//! (`store::run_starts`).

use sea_orm::entity::prelude::*;

#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "run_starts")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub provisioning_run_id: String,
    pub tenant_id: String,
    /// The workflow's input (`models::RunInput`): references, never secret values.
    pub input: Json,
    /// When the API wrote the run.
    pub accepted_at: DateTimeUtc,
    /// The run's project: always written (`transactions::admit_run::accept_run`), though the column allows
    /// null.
    pub project_id: Option<String>,
    /// Deferred until its project has a free slot (`transactions::admit_run::admit_deferred`), not due to the
    /// starter.
    pub deferred: bool,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
