//! `fleet_rollouts.checked_at`: when the rollout last read where its instances stand (the
//! fleet host's inbox age for the `rollouts` module: what changed since is not yet seen).

use sea_orm_migration::{prelude::*, schema::*};

#[derive(DeriveMigrationName)]
pub struct Migration;

#[derive(DeriveIden)]
enum FleetRollouts {
    Table,
    CheckedAt,
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .alter_table(
                Table::alter()
                    .table(FleetRollouts::Table)
                    .add_column(timestamp_with_time_zone_null(FleetRollouts::CheckedAt))
                    .to_owned(),
            )
            .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .alter_table(
                Table::alter()
                    .table(FleetRollouts::Table)
                    .drop_column(FleetRollouts::CheckedAt)
                    .to_owned(),
            )
            .await
    }
}
