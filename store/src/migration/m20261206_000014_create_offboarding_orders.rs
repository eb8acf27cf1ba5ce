//! `offboarding_orders`: each instance's off-boarding order, its state
//! (`models::offboarding::OrderState`), the archive its record was exported to (key, checksum,
//! size, manifest as JSON) once verified, its decommission run, and why it failed.

use sea_orm_migration::{prelude::*, schema::*};

#[derive(DeriveMigrationName)]
pub struct Migration;

#[derive(DeriveIden)]
enum OffboardingOrders {
    Table,
    OrderId,
    TenantId,
    EnvironmentId,
    State,
    Reason,
    RequestedBy,
    ArchiveKey,
    ArchiveSha256,
    ArchiveBytes,
    Manifest,
    ExportedAt,
    ProvisioningRunId,
    Failure,
    CreatedAt,
    UpdatedAt,
    CompletedAt,
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .create_table(
                Table::create()
                    .table(OffboardingOrders::Table)
                    .col(string(OffboardingOrders::OrderId).primary_key())
                    .col(string(OffboardingOrders::TenantId))
                    .col(string(OffboardingOrders::EnvironmentId))
                    .col(string(OffboardingOrders::State))
                    .col(text(OffboardingOrders::Reason))
                    .col(string(OffboardingOrders::RequestedBy))
                    .col(string_null(OffboardingOrders::ArchiveKey))
                    .col(string_null(OffboardingOrders::ArchiveSha256))
                    .col(big_integer_null(OffboardingOrders::ArchiveBytes))
                    .col(json_null(OffboardingOrders::Manifest))
                    .col(timestamp_with_time_zone_null(OffboardingOrders::ExportedAt))
                    .col(string_null(OffboardingOrders::ProvisioningRunId))
                    .col(text_null(OffboardingOrders::Failure))
                    .col(timestamp_with_time_zone(OffboardingOrders::CreatedAt))
                    .col(timestamp_with_time_zone(OffboardingOrders::UpdatedAt))
                    .col(timestamp_with_time_zone_null(
                        OffboardingOrders::CompletedAt,
                    ))
                    .to_owned(),
            )
            .await?;
        // One order under way or done per instance: a second order finds the first (a failed
        // one may be ordered again). The same statement on SQLite and PostgreSQL.
        manager
            .get_connection()
            .execute_unprepared(
                "CREATE UNIQUE INDEX ux_offboarding_orders_environment \
                 ON offboarding_orders (tenant_id, environment_id) WHERE state <> 'failed'",
            )
            .await?;
        Ok(())
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .drop_table(Table::drop().table(OffboardingOrders::Table).to_owned())
            .await
    }
}
