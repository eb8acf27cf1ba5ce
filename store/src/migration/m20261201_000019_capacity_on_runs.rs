//! Capacity on runs and environments: on `provisioning_runs` what holds a run back
//! (`waiting_for_capacity`, JSON) and the whole minutes its apply counts against the
//! project's `executionMinutesPerDay` (`apply_minutes`); on `environments` the worker pool
//! that serves it (`pool_id`, none for the default task queue).

use sea_orm_migration::{prelude::*, schema::*};

#[derive(DeriveMigrationName)]
pub struct Migration;

#[derive(DeriveIden)]
enum ProvisioningRuns {
    Table,
    TenantId,
    ProjectId,
    CompletedAt,
    WaitingForCapacity,
    ApplyMinutes,
}

#[derive(DeriveIden)]
enum Environments {
    Table,
    PoolId,
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        // SQLite adds one column per ALTER TABLE.
        for column in [
            json_null(ProvisioningRuns::WaitingForCapacity),
            integer_null(ProvisioningRuns::ApplyMinutes),
        ] {
            manager
                .alter_table(
                    Table::alter()
                        .table(ProvisioningRuns::Table)
                        .add_column(column)
                        .to_owned(),
                )
                .await?;
        }
        manager
            .alter_table(
                Table::alter()
                    .table(Environments::Table)
                    .add_column(string_null(Environments::PoolId))
                    .to_owned(),
            )
            .await?;
        // The day's minutes are summed per project over the runs completed since midnight.
        manager
            .create_index(
                Index::create()
                    .name("ix_provisioning_runs_project_completed")
                    .table(ProvisioningRuns::Table)
                    .col(ProvisioningRuns::TenantId)
                    .col(ProvisioningRuns::ProjectId)
                    .col(ProvisioningRuns::CompletedAt)
                    .to_owned(),
            )
            .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .drop_index(
                Index::drop()
                    .name("ix_provisioning_runs_project_completed")
                    .table(ProvisioningRuns::Table)
                    .to_owned(),
            )
            .await?;
        manager
            .alter_table(
                Table::alter()
                    .table(Environments::Table)
                    .drop_column(Environments::PoolId)
                    .to_owned(),
            )
            .await?;
        for column in [
            ProvisioningRuns::ApplyMinutes,
            ProvisioningRuns::WaitingForCapacity,
        ] {
            manager
                .alter_table(
                    Table::alter()
                        .table(ProvisioningRuns::Table)
                        .drop_column(column)
                        .to_owned(),
                )
                .await?;
        }
        Ok(())
    }
}
