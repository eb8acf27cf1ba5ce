//! `inbox_events`: every inbound event handled, by its CloudEvents id, with the effect it had
//! (the run it planned, the decision it signalled): a redelivered event has its effect once.
//!
//! An inbound event that carries a proven approval records what the approval is spent on
//! (`spend_key`, `models::inbound::proof::spend_key`): one promotion's approval, one decision on
//! one plan. The unique index makes a second event with the same approval (a replay under a new
//! event id) fail to record, whatever two consumers do at once.

use sea_orm_migration::{prelude::*, schema::*};

#[derive(DeriveMigrationName)]
pub struct Migration;

#[derive(DeriveIden)]
enum InboxEvents {
    Table,
    EventId,
    EventType,
    TenantId,
    ReceivedAt,
    Effect,
    DeliveredAt,
    SpendKey,
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .create_table(
                Table::create()
                    .table(InboxEvents::Table)
                    .col(string(InboxEvents::EventId).primary_key())
                    .col(string(InboxEvents::EventType))
                    .col(string(InboxEvents::TenantId))
                    .col(timestamp_with_time_zone(InboxEvents::ReceivedAt))
                    .col(json(InboxEvents::Effect))
                    .col(timestamp_with_time_zone_null(InboxEvents::DeliveredAt))
                    .col(string_null(InboxEvents::SpendKey))
                    .to_owned(),
            )
            .await?;
        manager
            .create_index(
                Index::create()
                    .name("ux_inbox_events_spend_key")
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
            .drop_table(Table::drop().table(InboxEvents::Table).to_owned())
            .await
    }
}
