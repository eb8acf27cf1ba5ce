//! `provisioning_runs.refused_approvals`: the approvals a run did not count (who sent each,
//! when, and why it was refused), as a JSON list. Nullable: runs recorded before this
//! migration have none, and the API shows null as an empty list.

use sea_orm_migration::{prelude::*, schema::*};

#[derive(DeriveMigrationName)]
pub struct Migration;

#[derive(DeriveIden)]
enum ProvisioningRuns {
    Table,
    RefusedApprovals,
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .alter_table(
                Table::alter()
                    .table(ProvisioningRuns::Table)
                    .add_column(json_null(ProvisioningRuns::RefusedApprovals))
                    .to_owned(),
            )
            .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .alter_table(
                Table::alter()
                    .table(ProvisioningRuns::Table)
                    .drop_column(ProvisioningRuns::RefusedApprovals)
                    .to_owned(),
            )
            .await
    }
}

#[cfg(test)]
mod tests {
    use crate::Migrator;
    use sea_orm::ConnectionTrait;
    use sea_orm_migration::MigratorTrait;

    #[tokio::test]
    async fn it_goes_down_and_up_again() {
        let db = crate::fixtures::sqlite().await;
        let add = "INSERT INTO provisioning_runs (provisioning_run_id, tenant_id, project_id, \
                   environment_id, specification_id, specification_version, kind, \
                   refused_approvals, started_at, created_at, updated_at) VALUES \
                   ('r1', 't', 'p', 'e', 's', 1, 'baseline', '[]', '2026-12-01T00:00:00Z', \
                   '2026-12-01T00:00:00Z', '2026-12-01T00:00:00Z')";
        db.execute_unprepared(add).await.unwrap();
        Migrator::down(&db, Some(1)).await.unwrap();
        assert!(
            db.execute_unprepared(add).await.is_err(),
            "the column is gone"
        );
        Migrator::up(&db, None).await.unwrap();
        db.execute_unprepared(&add.replace("'r1'", "'r2'"))
            .await
            .unwrap();
    }
}
