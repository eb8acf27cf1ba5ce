//! `environments.mode`: how far the product goes on its own when the environment drifts
//! (`observe`, `propose`, `auto`). Null for the environments registered before: they keep their
//! class's default (`auto` outside production, `propose` in production), today's behaviour.

use sea_orm_migration::{prelude::*, schema::*};

#[derive(DeriveMigrationName)]
pub struct Migration;

#[derive(DeriveIden)]
enum Environments {
    Table,
    Mode,
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .alter_table(
                Table::alter()
                    .table(Environments::Table)
                    .add_column(string_null(Environments::Mode))
                    .to_owned(),
            )
            .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .alter_table(
                Table::alter()
                    .table(Environments::Table)
                    .drop_column(Environments::Mode)
                    .to_owned(),
            )
            .await
    }
}
