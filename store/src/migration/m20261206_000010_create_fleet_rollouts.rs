//! `fleet_rollouts`: each fleet rollout, its fixed input and its projected status (waves,
//! instances with their runs, the halt) as JSON, and when it last read where its instances
//! stand (`checked_at`: the fleet host's inbox age for the `rollouts` module, what changed since
//! is not yet seen).

use sea_orm_migration::{prelude::*, schema::*};

#[derive(DeriveMigrationName)]
pub struct Migration;

#[derive(DeriveIden)]
enum FleetRollouts {
    Table,
    RolloutId,
    TenantId,
    State,
    Input,
    Status,
    RequestedBy,
    CreatedAt,
    UpdatedAt,
    CheckedAt,
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .create_table(
                Table::create()
                    .table(FleetRollouts::Table)
                    .col(string(FleetRollouts::RolloutId).primary_key())
                    .col(string(FleetRollouts::TenantId))
                    .col(string(FleetRollouts::State))
                    .col(json(FleetRollouts::Input))
                    .col(json(FleetRollouts::Status))
                    .col(string(FleetRollouts::RequestedBy))
                    .col(timestamp_with_time_zone(FleetRollouts::CreatedAt))
                    .col(timestamp_with_time_zone(FleetRollouts::UpdatedAt))
                    .col(timestamp_with_time_zone_null(FleetRollouts::CheckedAt))
                    .to_owned(),
            )
            .await?;
        // The metrics scrape reads the rollouts under way (the fleet host's inbox age) without
        // the others. The same statement on SQLite and PostgreSQL.
        manager
            .get_connection()
            .execute_unprepared(
                "CREATE INDEX ix_fleet_rollouts_state_checked \
                 ON fleet_rollouts (state, checked_at, created_at)",
            )
            .await?;
        Ok(())
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .drop_table(Table::drop().table(FleetRollouts::Table).to_owned())
            .await
    }
}
