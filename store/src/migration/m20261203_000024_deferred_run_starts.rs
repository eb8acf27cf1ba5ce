//! `run_starts.deferred` and `run_starts.project_id`: a run the API accepted while its
//! project's `concurrentRuns` were all in flight is written with its start deferred
//! (`store::run_starts::accept`): no workflow is started for it until a slot frees
//! (`store::run_starts::admissible`), so a tenant's flood costs the workflow service nothing
//! past its quota. Rows from before these columns are ordinary pending starts. Admission
//! counts a project's held leases, hence the index on `capacity_leases`.

use sea_orm_migration::{prelude::*, schema::*};

#[derive(DeriveMigrationName)]
pub struct Migration;

#[derive(DeriveIden)]
enum RunStarts {
    Table,
    TenantId,
    ProjectId,
    Deferred,
    AcceptedAt,
}

#[derive(DeriveIden)]
enum CapacityLeases {
    Table,
    TenantId,
    ProjectId,
    State,
}

const INDEX: &str = "run_starts_deferred_by_project";
const LEASES_INDEX: &str = "ix_capacity_leases_project_state";

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        // SQLite adds one column per ALTER TABLE.
        for column in [
            string_null(RunStarts::ProjectId),
            boolean(RunStarts::Deferred).default(false).to_owned(),
        ] {
            manager
                .alter_table(
                    Table::alter()
                        .table(RunStarts::Table)
                        .add_column(column)
                        .to_owned(),
                )
                .await?;
        }
        // A project's deferred starts are admitted oldest first.
        manager
            .create_index(
                Index::create()
                    .name(INDEX)
                    .table(RunStarts::Table)
                    .col(RunStarts::Deferred)
                    .col(RunStarts::TenantId)
                    .col(RunStarts::ProjectId)
                    .col(RunStarts::AcceptedAt)
                    .to_owned(),
            )
            .await?;
        manager
            .create_index(
                Index::create()
                    .name(LEASES_INDEX)
                    .table(CapacityLeases::Table)
                    .col(CapacityLeases::TenantId)
                    .col(CapacityLeases::ProjectId)
                    .col(CapacityLeases::State)
                    .to_owned(),
            )
            .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .drop_index(
                Index::drop()
                    .name(LEASES_INDEX)
                    .table(CapacityLeases::Table)
                    .to_owned(),
            )
            .await?;
        manager
            .drop_index(Index::drop().name(INDEX).table(RunStarts::Table).to_owned())
            .await?;
        for column in [RunStarts::Deferred, RunStarts::ProjectId] {
            manager
                .alter_table(
                    Table::alter()
                        .table(RunStarts::Table)
                        .drop_column(column)
                        .to_owned(),
                )
                .await?;
        }
        Ok(())
    }
}
