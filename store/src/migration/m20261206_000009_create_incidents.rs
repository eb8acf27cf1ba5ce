//! `incidents`: what an operator must look at — opened by hand, by an SLO breach or by a halted
//! rollout; resolved by an operator with a reason. Listed newest first per tenant.

use sea_orm_migration::{prelude::*, schema::*};

#[derive(DeriveMigrationName)]
pub struct Migration;

#[derive(DeriveIden)]
enum Incidents {
    Table,
    IncidentId,
    TenantId,
    Title,
    Source,
    EnvironmentId,
    RolloutId,
    State,
    OpenedBy,
    OpenedAt,
    ResolvedBy,
    Resolution,
    ResolvedAt,
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .create_table(
                Table::create()
                    .table(Incidents::Table)
                    .col(string(Incidents::IncidentId).primary_key())
                    .col(string(Incidents::TenantId))
                    .col(text(Incidents::Title))
                    .col(string(Incidents::Source))
                    .col(string_null(Incidents::EnvironmentId))
                    .col(string_null(Incidents::RolloutId))
                    .col(string(Incidents::State))
                    .col(string(Incidents::OpenedBy))
                    .col(timestamp_with_time_zone(Incidents::OpenedAt))
                    .col(string_null(Incidents::ResolvedBy))
                    .col(text_null(Incidents::Resolution))
                    .col(timestamp_with_time_zone_null(Incidents::ResolvedAt))
                    .to_owned(),
            )
            .await?;
        manager
            .create_index(
                Index::create()
                    .name("ix_incidents_tenant_newest")
                    .table(Incidents::Table)
                    .col(Incidents::TenantId)
                    .col(Incidents::IncidentId)
                    .to_owned(),
            )
            .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .drop_table(Table::drop().table(Incidents::Table).to_owned())
            .await
    }
}
