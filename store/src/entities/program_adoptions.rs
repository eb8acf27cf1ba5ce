//! `program_adoptions`: a proposal's unmanaged workloads adopted into its Pulumi program.

use sea_orm::entity::prelude::*;

#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "program_adoptions")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub proposal_id: String,
    pub tenant_id: String,
    pub environment_id: String,
    /// How many times it was asked for: each request's workflow is `program-adoption/{id}/{n}`,
    /// and only that request's workflow ends it.
    pub attempt: i32,
    /// `generating`, `published` or `failed` (`models::program_adoption::AdoptionState`).
    pub state: String,
    /// `models::program_adoption::ImportedResource`s, JSON; `[]` until generated.
    pub resources: Json,
    pub branch: Option<String>,
    pub commit_sha: Option<String>,
    /// The commit's `git diff` from the program's commit.
    #[sea_orm(column_type = "Text", nullable)]
    pub diff: Option<String>,
    #[sea_orm(column_type = "Text", nullable)]
    pub reason: Option<String>,
    pub requested_by: String,
    pub requested_at: DateTimeUtc,
    pub completed_at: Option<DateTimeUtc>,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
