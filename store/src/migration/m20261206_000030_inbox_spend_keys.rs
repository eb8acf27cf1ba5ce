//! An inbound event that carries a proven approval records what the approval is spent on
//! (`models::inbound::proof::spend_key`): one promotion's approval, one decision on one plan. The
//! unique index makes a second event with the same approval (a replay under a new event id) fail
//! to record, whatever two consumers do at once.

use sea_orm_migration::{prelude::*, schema::*};

#[derive(DeriveMigrationName)]
pub struct Migration;

#[derive(DeriveIden)]
enum InboxEvents {
    Table,
    TenantId,
    SpendKey,
}

const INDEX: &str = "ux_inbox_events_spend_key";

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .alter_table(
                Table::alter()
                    .table(InboxEvents::Table)
                    .add_column(string_null(InboxEvents::SpendKey))
                    .to_owned(),
            )
            .await?;
        manager
            .create_index(
                Index::create()
                    .name(INDEX)
                    .table(InboxEvents::Table)
                    .col(InboxEvents::TenantId)
                    .col(InboxEvents::SpendKey)
                    .unique()
                    .to_owned(),
            )
            .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .drop_index(
                Index::drop()
                    .name(INDEX)
                    .table(InboxEvents::Table)
                    .to_owned(),
            )
            .await?;
        manager
            .alter_table(
                Table::alter()
                    .table(InboxEvents::Table)
                    .drop_column(InboxEvents::SpendKey)
                    .to_owned(),
            )
            .await
    }
}
