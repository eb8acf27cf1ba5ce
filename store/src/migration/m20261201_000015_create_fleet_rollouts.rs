//! `fleet_rollouts`: each fleet rollout, its fixed input and its projected status (waves,
//! instances with their runs, the halt) as JSON.

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
                    .to_owned(),
            )
            .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .drop_table(Table::drop().table(FleetRollouts::Table).to_owned())
            .await
    }
}
