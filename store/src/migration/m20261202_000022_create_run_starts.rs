//! `run_starts`: runs the API wrote whose workflow may not have started yet (`store::run_starts`).

use sea_orm_migration::{prelude::*, schema::*};

#[derive(DeriveMigrationName)]
pub struct Migration;

#[derive(DeriveIden)]
enum RunStarts {
    Table,
    ProvisioningRunId,
    TenantId,
    Input,
    AcceptedAt,
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .create_table(
                Table::create()
                    .table(RunStarts::Table)
                    .col(string(RunStarts::ProvisioningRunId).primary_key())
                    .col(string(RunStarts::TenantId))
                    .col(json(RunStarts::Input))
                    .col(timestamp_with_time_zone(RunStarts::AcceptedAt))
                    .to_owned(),
            )
            .await?;
        // The starter reads the oldest first.
        manager
            .create_index(
                Index::create()
                    .name("run_starts_by_accepted_at")
                    .table(RunStarts::Table)
                    .col(RunStarts::AcceptedAt)
                    .to_owned(),
            )
            .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .drop_table(Table::drop().table(RunStarts::Table).to_owned())
            .await
    }
}
