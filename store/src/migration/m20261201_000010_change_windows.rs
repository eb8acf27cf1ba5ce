//! Change windows: `change_windows` (an environment's, and without an environment its tenant's
//! defaults), and on `provisioning_runs` the window a run waits for (`waiting_for_window`) and
//! the break-glass it applied with (`break_glass`), both JSON.

use sea_orm_migration::{prelude::*, schema::*};

#[derive(DeriveMigrationName)]
pub struct Migration;

#[derive(DeriveIden)]
enum ChangeWindows {
    Table,
    WindowId,
    TenantId,
    EnvironmentId,
    Kind,
    Schedule,
    Duration,
    TimeZone,
    Reason,
    CreatedBy,
    CreatedAt,
}

#[derive(DeriveIden)]
enum ProvisioningRuns {
    Table,
    WaitingForWindow,
    BreakGlass,
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .create_table(
                Table::create()
                    .table(ChangeWindows::Table)
                    .col(string(ChangeWindows::WindowId).primary_key())
                    .col(string(ChangeWindows::TenantId))
                    .col(string_null(ChangeWindows::EnvironmentId))
                    .col(string(ChangeWindows::Kind))
                    .col(string(ChangeWindows::Schedule))
                    .col(string(ChangeWindows::Duration))
                    .col(string(ChangeWindows::TimeZone))
                    .col(text(ChangeWindows::Reason))
                    .col(string(ChangeWindows::CreatedBy))
                    .col(timestamp_with_time_zone(ChangeWindows::CreatedAt))
                    .to_owned(),
            )
            .await?;
        manager
            .create_index(
                Index::create()
                    .name("ix_change_windows_tenant_environment")
                    .table(ChangeWindows::Table)
                    .col(ChangeWindows::TenantId)
                    .col(ChangeWindows::EnvironmentId)
                    .to_owned(),
            )
            .await?;
        // SQLite adds one column per ALTER TABLE.
        for column in [
            json_null(ProvisioningRuns::WaitingForWindow),
            json_null(ProvisioningRuns::BreakGlass),
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
        Ok(())
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        for column in [
            ProvisioningRuns::BreakGlass,
            ProvisioningRuns::WaitingForWindow,
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
        manager
            .drop_table(Table::drop().table(ChangeWindows::Table).to_owned())
            .await
    }
}
