//! `provisioning_runs.policy`: what the policies answered about the run's plan
//! (`models::policy::PolicyDecision`, JSON), shown on the run.

use sea_orm_migration::{prelude::*, schema::*};

#[derive(DeriveMigrationName)]
pub struct Migration;

#[derive(DeriveIden)]
enum ProvisioningRuns {
    Table,
    Policy,
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .alter_table(
                Table::alter()
                    .table(ProvisioningRuns::Table)
                    .add_column(json_null(ProvisioningRuns::Policy))
                    .to_owned(),
            )
            .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .alter_table(
                Table::alter()
                    .table(ProvisioningRuns::Table)
                    .drop_column(ProvisioningRuns::Policy)
                    .to_owned(),
            )
            .await
    }
}
