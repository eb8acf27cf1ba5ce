//! `environments.labels` (a JSON object of strings: what fleet rollouts select by) and
//! `environments.customer_tenant_id` (the customer tenant inside the product, where given).

use sea_orm_migration::{prelude::*, schema::*};

#[derive(DeriveMigrationName)]
pub struct Migration;

#[derive(DeriveIden)]
enum Environments {
    Table,
    Labels,
    CustomerTenantId,
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        // SQLite alters one column per statement.
        manager
            .alter_table(
                Table::alter()
                    .table(Environments::Table)
                    .add_column(text_null(Environments::Labels))
                    .to_owned(),
            )
            .await?;
        manager
            .alter_table(
                Table::alter()
                    .table(Environments::Table)
                    .add_column(string_null(Environments::CustomerTenantId))
                    .to_owned(),
            )
            .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        for column in [Environments::CustomerTenantId, Environments::Labels] {
            manager
                .alter_table(
                    Table::alter()
                        .table(Environments::Table)
                        .drop_column(column)
                        .to_owned(),
                )
                .await?;
        }
        Ok(())
    }
}
