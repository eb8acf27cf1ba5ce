//! `outbox_events`: integration events written in the same transaction as the change they
//! report; a relay publishes them in `seq` order.

use sea_orm_migration::{prelude::*, schema::*};

#[derive(DeriveMigrationName)]
pub struct Migration;

#[derive(DeriveIden)]
enum OutboxEvents {
    Table,
    Seq,
    EventId,
    TenantId,
    EventType,
    Topic,
    AggregateId,
    Payload,
    OccurredAt,
    PublishedAt,
    CreatedAt,
    UpdatedAt,
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .create_table(
                Table::create()
                    .table(OutboxEvents::Table)
                    .col(
                        big_integer(OutboxEvents::Seq)
                            .primary_key()
                            .auto_increment(),
                    )
                    .col(string_uniq(OutboxEvents::EventId))
                    .col(string(OutboxEvents::TenantId))
                    .col(string(OutboxEvents::EventType))
                    .col(string(OutboxEvents::Topic))
                    .col(string(OutboxEvents::AggregateId))
                    .col(json(OutboxEvents::Payload))
                    .col(timestamp_with_time_zone(OutboxEvents::OccurredAt))
                    .col(timestamp_with_time_zone_null(OutboxEvents::PublishedAt))
                    .col(timestamp_with_time_zone(OutboxEvents::CreatedAt))
                    .col(timestamp_with_time_zone(OutboxEvents::UpdatedAt))
                    .to_owned(),
            )
            .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .drop_table(Table::drop().table(OutboxEvents::Table).to_owned())
            .await
    }
}
