//! One environment's runs and findings, newest first, as one index walk each.
//!
//! `?environmentId=` on the runs list and an environment's drift list filter by (tenant,
//! environment) and order by the time-ordered id. With only a (tenant, environment) index, a
//! planner without statistics (SQLite's, before `ANALYZE`) walks the tenant's newest-first
//! index instead and reads every run of the tenant to find one environment's: measured with
//! 2,000 runs, 170 requests/s and a 9 s p95 where the other lists answer 1,000/s in 3 ms
//! (issue 18, `scripts/bench read --runs`). Indexes that end in the id serve the filter and
//! the order together and stop after `limit + 1` rows; they replace the (tenant, environment)
//! ones, which are their prefixes.

use sea_orm_migration::prelude::*;

#[derive(DeriveMigrationName)]
pub struct Migration;

#[derive(DeriveIden)]
enum ProvisioningRuns {
    Table,
    TenantId,
    EnvironmentId,
    ProvisioningRunId,
}

#[derive(DeriveIden)]
enum DriftFindings {
    Table,
    TenantId,
    EnvironmentId,
    FindingId,
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .create_index(
                Index::create()
                    .name("ix_runs_tenant_environment_newest")
                    .table(ProvisioningRuns::Table)
                    .col(ProvisioningRuns::TenantId)
                    .col(ProvisioningRuns::EnvironmentId)
                    .col(ProvisioningRuns::ProvisioningRunId)
                    .to_owned(),
            )
            .await?;
        manager
            .create_index(
                Index::create()
                    .name("ix_findings_tenant_environment_newest")
                    .table(DriftFindings::Table)
                    .col(DriftFindings::TenantId)
                    .col(DriftFindings::EnvironmentId)
                    .col(DriftFindings::FindingId)
                    .to_owned(),
            )
            .await?;
        drop_index(
            manager,
            "ix_runs_tenant_environment",
            ProvisioningRuns::Table,
        )
        .await?;
        drop_index(
            manager,
            "ix_findings_tenant_environment",
            DriftFindings::Table,
        )
        .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .create_index(
                Index::create()
                    .name("ix_runs_tenant_environment")
                    .table(ProvisioningRuns::Table)
                    .col(ProvisioningRuns::TenantId)
                    .col(ProvisioningRuns::EnvironmentId)
                    .to_owned(),
            )
            .await?;
        manager
            .create_index(
                Index::create()
                    .name("ix_findings_tenant_environment")
                    .table(DriftFindings::Table)
                    .col(DriftFindings::TenantId)
                    .col(DriftFindings::EnvironmentId)
                    .to_owned(),
            )
            .await?;
        drop_index(
            manager,
            "ix_runs_tenant_environment_newest",
            ProvisioningRuns::Table,
        )
        .await?;
        drop_index(
            manager,
            "ix_findings_tenant_environment_newest",
            DriftFindings::Table,
        )
        .await
    }
}

async fn drop_index(
    manager: &SchemaManager<'_>,
    name: &str,
    table: impl IntoIden + 'static,
) -> Result<(), DbErr> {
    manager
        .drop_index(Index::drop().name(name).table(table).to_owned())
        .await
}
