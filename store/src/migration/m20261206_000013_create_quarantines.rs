//! `quarantines`: workload versions refused fleet-wide for a tenant (a rollout rolled back, or
//! an Operator's word), in force until an Operator lifts them; kept after, as the record.

use sea_orm_migration::{prelude::*, schema::*};

#[derive(DeriveMigrationName)]
pub struct Migration;

#[derive(DeriveIden)]
enum Quarantines {
    Table,
    QuarantineId,
    TenantId,
    Workload,
    Version,
    Source,
    Reason,
    RolloutId,
    QuarantinedBy,
    QuarantinedAt,
    LiftedBy,
    LiftReason,
    LiftedAt,
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .create_table(
                Table::create()
                    .table(Quarantines::Table)
                    .col(string(Quarantines::QuarantineId).primary_key())
                    .col(string(Quarantines::TenantId))
                    .col(string(Quarantines::Workload))
                    .col(string(Quarantines::Version))
                    .col(string(Quarantines::Source))
                    .col(text(Quarantines::Reason))
                    .col(string_null(Quarantines::RolloutId))
                    .col(string(Quarantines::QuarantinedBy))
                    .col(timestamp_with_time_zone(Quarantines::QuarantinedAt))
                    .col(string_null(Quarantines::LiftedBy))
                    .col(text_null(Quarantines::LiftReason))
                    .col(timestamp_with_time_zone_null(Quarantines::LiftedAt))
                    .to_owned(),
            )
            .await?;
        // One quarantine in force per version: placing one twice (a rollback's retry, two
        // Operators at once) finds the first. Every gate reads the tenant's in force. The same
        // statement on SQLite and PostgreSQL.
        manager
            .get_connection()
            .execute_unprepared(
                "CREATE UNIQUE INDEX ux_quarantines_in_force \
                 ON quarantines (tenant_id, workload, version) WHERE lifted_at IS NULL",
            )
            .await?;
        Ok(())
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .drop_table(Table::drop().table(Quarantines::Table).to_owned())
            .await
    }
}
