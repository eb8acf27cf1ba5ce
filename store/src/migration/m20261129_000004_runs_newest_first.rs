//! The runs list's index: a tenant's runs newest first (`ORDER BY provisioning_run_id DESC`,
//! ids are UUIDv7), optionally by state.
//!
//! Without it the list sorts every run of the tenant for each page; with it a page is an index
//! walk that stops after `limit + 1` rows, however many runs the tenant has.

use sea_orm_migration::prelude::*;

#[derive(DeriveMigrationName)]
pub struct Migration;

#[derive(DeriveIden)]
enum ProvisioningRuns {
    Table,
    TenantId,
    State,
    ProvisioningRunId,
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .create_index(
                Index::create()
                    .name("ix_runs_tenant_newest")
                    .table(ProvisioningRuns::Table)
                    .col(ProvisioningRuns::TenantId)
                    .col(ProvisioningRuns::ProvisioningRunId)
                    .to_owned(),
            )
            .await?;
        manager
            .create_index(
                Index::create()
                    .name("ix_runs_tenant_state_newest")
                    .table(ProvisioningRuns::Table)
                    .col(ProvisioningRuns::TenantId)
                    .col(ProvisioningRuns::State)
                    .col(ProvisioningRuns::ProvisioningRunId)
                    .to_owned(),
            )
            .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        for name in ["ix_runs_tenant_state_newest", "ix_runs_tenant_newest"] {
            manager
                .drop_index(
                    Index::drop()
                        .name(name)
                        .table(ProvisioningRuns::Table)
                        .to_owned(),
                )
                .await?;
        }
        Ok(())
    }
}
