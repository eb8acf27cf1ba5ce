//! `price_tables`: a tenant's prices (`models::cost::PriceTable`, JSON), one per tenant, that
//! price what its environments are observed to run.

use sea_orm_migration::{prelude::*, schema::*};

#[derive(DeriveMigrationName)]
pub struct Migration;

#[derive(DeriveIden)]
enum PriceTables {
    Table,
    TenantId,
    Prices,
    SetBy,
    UpdatedAt,
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .create_table(
                Table::create()
                    .table(PriceTables::Table)
                    .col(string(PriceTables::TenantId).primary_key())
                    .col(json(PriceTables::Prices))
                    .col(string(PriceTables::SetBy))
                    .col(timestamp_with_time_zone(PriceTables::UpdatedAt))
                    .to_owned(),
            )
            .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .drop_table(Table::drop().table(PriceTables::Table).to_owned())
            .await
    }
}
