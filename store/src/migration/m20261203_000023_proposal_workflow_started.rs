//! `reconciliation_proposals.workflow_started`: whether the proposal's workflow is known to have
//! started (`store::proposals::mark_started`). A sweep's page records a batch, then starts the
//! workflows of the proposals it raised; a page that fails in between, and keeps failing until
//! the sweep moves on, leaves proposals whose workflow never started. The next observation of
//! the environment answers such a proposal again, so it is started then. Rows from before this
//! column were started by the code that wrote them.

use sea_orm_migration::{prelude::*, schema::*};

#[derive(DeriveMigrationName)]
pub struct Migration;

#[derive(DeriveIden)]
enum ReconciliationProposals {
    Table,
    WorkflowStarted,
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .alter_table(
                Table::alter()
                    .table(ReconciliationProposals::Table)
                    .add_column(boolean(ReconciliationProposals::WorkflowStarted).default(true))
                    .to_owned(),
            )
            .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .alter_table(
                Table::alter()
                    .table(ReconciliationProposals::Table)
                    .drop_column(ReconciliationProposals::WorkflowStarted)
                    .to_owned(),
            )
            .await
    }
}
