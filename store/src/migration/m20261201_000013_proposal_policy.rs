//! `reconciliation_proposals.policy`: what the policies answered before the proposal would have
//! been accepted on its own (`models::policy::PolicyDecision`, JSON).

use sea_orm_migration::{prelude::*, schema::*};

#[derive(DeriveMigrationName)]
pub struct Migration;

#[derive(DeriveIden)]
enum ReconciliationProposals {
    Table,
    Policy,
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .alter_table(
                Table::alter()
                    .table(ReconciliationProposals::Table)
                    .add_column(json_null(ReconciliationProposals::Policy))
                    .to_owned(),
            )
            .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .alter_table(
                Table::alter()
                    .table(ReconciliationProposals::Table)
                    .drop_column(ReconciliationProposals::Policy)
                    .to_owned(),
            )
            .await
    }
}
