//! `environments.target` holds a typed target as JSON (`models::targets::Target`):
//! `{"runner":{"kind":"sandbox"},"observer":{"kind":"sandbox"}}` for every environment
//! registered before, which all named the sandbox as `sandbox`.

use sea_orm_migration::prelude::*;

#[derive(DeriveMigrationName)]
pub struct Migration;

const SANDBOX: &str = r#"{"runner":{"kind":"sandbox"},"observer":{"kind":"sandbox"}}"#;

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        let sql = format!("UPDATE environments SET target = '{SANDBOX}' WHERE target = 'sandbox'");
        manager.get_connection().execute_unprepared(&sql).await?;
        Ok(())
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        let sql = format!("UPDATE environments SET target = 'sandbox' WHERE target = '{SANDBOX}'");
        manager.get_connection().execute_unprepared(&sql).await?;
        Ok(())
    }
}
