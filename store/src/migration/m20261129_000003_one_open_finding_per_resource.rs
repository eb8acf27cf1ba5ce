//! At most one open drift finding per (environment, kind, resource).
//!
//! Two observations of one environment at once (a sweep and an after-apply observation) are
//! serialized today by the inventory row each one updates before it syncs findings (on
//! PostgreSQL the second waits for the first and then reads what it committed). This index makes
//! the invariant hold whatever the statement order: a second insert fails, the activity
//! retries, and the retry sees the finding the first one raised.

use sea_orm_migration::prelude::*;

#[derive(DeriveMigrationName)]
pub struct Migration;

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        let db = manager.get_connection();
        // Duplicates raised before this migration: keep the oldest open one (ids are v7,
        // time-ordered), resolve the rest.
        db.execute_unprepared(
            "UPDATE drift_findings SET resolved_at = updated_at \
             WHERE resolved_at IS NULL AND EXISTS (\
               SELECT 1 FROM drift_findings o \
               WHERE o.tenant_id = drift_findings.tenant_id \
                 AND o.environment_id = drift_findings.environment_id \
                 AND o.kind = drift_findings.kind AND o.resource = drift_findings.resource \
                 AND o.resolved_at IS NULL AND o.finding_id < drift_findings.finding_id)",
        )
        .await?;
        // The same statement on SQLite and PostgreSQL.
        db.execute_unprepared(
            "CREATE UNIQUE INDEX ux_findings_open_resource \
             ON drift_findings (tenant_id, environment_id, kind, resource) \
             WHERE resolved_at IS NULL",
        )
        .await?;
        Ok(())
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .get_connection()
            .execute_unprepared("DROP INDEX ux_findings_open_resource")
            .await?;
        Ok(())
    }
}
