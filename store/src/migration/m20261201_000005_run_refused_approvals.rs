//! `provisioning_runs.refused_approvals`: the approvals a run did not count (who sent each,
//! when, and why it was refused), as a JSON list. Nullable: runs recorded before this
//! migration have none, and the API shows null as an empty list.

use sea_orm_migration::{prelude::*, schema::*};

#[derive(DeriveMigrationName)]
pub struct Migration;

#[derive(DeriveIden)]
enum ProvisioningRuns {
    Table,
    RefusedApprovals,
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .alter_table(
                Table::alter()
                    .table(ProvisioningRuns::Table)
                    .add_column(json_null(ProvisioningRuns::RefusedApprovals))
                    .to_owned(),
            )
            .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .alter_table(
                Table::alter()
                    .table(ProvisioningRuns::Table)
                    .drop_column(ProvisioningRuns::RefusedApprovals)
                    .to_owned(),
            )
            .await
    }
}
