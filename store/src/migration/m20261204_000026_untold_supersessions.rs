//! `untold_supersessions`: proposals an observation superseded whose workflow has not been told
//! yet (`store::proposals::mark_told`).

use sea_orm_migration::{prelude::*, schema::*};

#[derive(DeriveMigrationName)]
pub struct Migration;

#[derive(DeriveIden)]
enum UntoldSupersessions {
    Table,
    ProposalId,
    TenantId,
    EnvironmentId,
    SupersededAt,
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .create_table(
                Table::create()
                    .table(UntoldSupersessions::Table)
                    .col(string(UntoldSupersessions::ProposalId).primary_key())
                    .col(string(UntoldSupersessions::TenantId))
                    .col(string(UntoldSupersessions::EnvironmentId))
                    .col(timestamp_with_time_zone(UntoldSupersessions::SupersededAt))
                    .to_owned(),
            )
            .await?;
        // Every record reads its environments' (a sweep's batch, hundreds at once).
        manager
            .create_index(
                Index::create()
                    .name("untold_supersessions_by_environment")
                    .table(UntoldSupersessions::Table)
                    .col(UntoldSupersessions::TenantId)
                    .col(UntoldSupersessions::EnvironmentId)
                    .to_owned(),
            )
            .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .drop_table(Table::drop().table(UntoldSupersessions::Table).to_owned())
            .await
    }
}
