//! An index of `capacity_leases` by state: admission looks up the leases granted to other
//! tenants (`store::run_starts::admissible`, a backlog's share of its quota) and the metrics
//! count the held ones per tenant, both among every lease ever written, of which all but a
//! quota's worth per project are released.

use sea_orm_migration::prelude::*;

#[derive(DeriveMigrationName)]
pub struct Migration;

#[derive(DeriveIden)]
enum CapacityLeases {
    Table,
    State,
    TenantId,
}

const INDEX: &str = "ix_capacity_leases_state_tenant";

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .create_index(
                Index::create()
                    .name(INDEX)
                    .table(CapacityLeases::Table)
                    .col(CapacityLeases::State)
                    .col(CapacityLeases::TenantId)
                    .to_owned(),
            )
            .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .drop_index(
                Index::drop()
                    .name(INDEX)
                    .table(CapacityLeases::Table)
                    .to_owned(),
            )
            .await
    }
}
