//! `semaphores` and `semaphore_slots`: an environment's lock and a project's capacity, held in
//! the database (`store::semaphores`) instead of in a semaphore workflow each.

use sea_orm_migration::{prelude::*, schema::*};

#[derive(DeriveMigrationName)]
pub struct Migration;

#[derive(DeriveIden)]
enum Semaphores {
    Table,
    Id,
    TenantId,
    Slots,
}

#[derive(DeriveIden)]
enum SemaphoreSlots {
    Table,
    SemaphoreId,
    HolderId,
    Holding,
    Told,
    Arrived,
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .create_table(
                Table::create()
                    .table(Semaphores::Table)
                    .col(string(Semaphores::Id).primary_key())
                    .col(string(Semaphores::TenantId))
                    .col(integer(Semaphores::Slots))
                    .to_owned(),
            )
            .await?;
        manager
            .create_table(
                Table::create()
                    .table(SemaphoreSlots::Table)
                    .col(string(SemaphoreSlots::SemaphoreId))
                    .col(string(SemaphoreSlots::HolderId))
                    .col(boolean(SemaphoreSlots::Holding))
                    .col(boolean(SemaphoreSlots::Told))
                    .col(big_integer(SemaphoreSlots::Arrived))
                    .primary_key(
                        Index::create()
                            .col(SemaphoreSlots::SemaphoreId)
                            .col(SemaphoreSlots::HolderId),
                    )
                    .to_owned(),
            )
            .await?;
        // Every take and release reads its semaphore's rows in arrival order.
        manager
            .create_index(
                Index::create()
                    .name("semaphore_slots_in_arrival_order")
                    .table(SemaphoreSlots::Table)
                    .col(SemaphoreSlots::SemaphoreId)
                    .col(SemaphoreSlots::Arrived)
                    .to_owned(),
            )
            .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .drop_table(Table::drop().table(SemaphoreSlots::Table).to_owned())
            .await?;
        manager
            .drop_table(Table::drop().table(Semaphores::Table).to_owned())
            .await
    }
}
