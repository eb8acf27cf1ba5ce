//! Read-table migrations: one migration per aggregate, in an order in which whatever one
//! refers to is already there (the metric counts' triggers, over several aggregates' tables,
//! come after the aggregates they count). Before the first release they are squashed: a change
//! to the schema edits the aggregate's migration. From the first release on, a landed
//! migration is never edited: add one.

use sea_orm_migration::prelude::*;

mod m20261206_000001_create_environments;
mod m20261206_000002_create_deployment_specifications;
mod m20261206_000003_create_provisioning_runs;
mod m20261206_000004_create_inventory;
mod m20261206_000005_create_drift;
mod m20261206_000006_create_reconciliation_proposals;
mod m20261206_000007_create_outbox;
mod m20261206_000008_create_inbox;
mod m20261206_000009_create_incidents;
mod m20261206_000010_create_fleet_rollouts;
mod m20261206_000011_create_capacity;
pub(crate) mod m20261206_000012_create_metric_counts;
mod m20261206_000013_create_quarantines;
mod m20261206_000014_create_offboarding_orders;
mod m20261206_000015_create_price_tables;

/// Runs every migration in order.
pub struct Migrator;

#[async_trait::async_trait]
impl MigratorTrait for Migrator {
    fn migrations() -> Vec<Box<dyn MigrationTrait>> {
        vec![
            Box::new(m20261206_000001_create_environments::Migration),
            Box::new(m20261206_000002_create_deployment_specifications::Migration),
            Box::new(m20261206_000003_create_provisioning_runs::Migration),
            Box::new(m20261206_000004_create_inventory::Migration),
            Box::new(m20261206_000005_create_drift::Migration),
            Box::new(m20261206_000006_create_reconciliation_proposals::Migration),
            Box::new(m20261206_000007_create_outbox::Migration),
            Box::new(m20261206_000008_create_inbox::Migration),
            Box::new(m20261206_000009_create_incidents::Migration),
            Box::new(m20261206_000010_create_fleet_rollouts::Migration),
            Box::new(m20261206_000011_create_capacity::Migration),
            Box::new(m20261206_000012_create_metric_counts::Migration),
            Box::new(m20261206_000013_create_quarantines::Migration),
            Box::new(m20261206_000014_create_offboarding_orders::Migration),
            Box::new(m20261206_000015_create_price_tables::Migration),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::Migrator;
    use crate::fixtures;
    use runtime_cloud_models::EnvironmentClass;
    use sea_orm::{ConnectionTrait, DatabaseConnection, DbBackend, Statement};
    use sea_orm_migration::MigratorTrait;

    /// The schema's objects but the migrator's own table, as `kind name`: tables, indexes,
    /// sequences and triggers, and on PostgreSQL the triggers' functions.
    async fn objects(db: &DatabaseConnection) -> Vec<String> {
        let backend = db.get_database_backend();
        let sql = match backend {
            DbBackend::Postgres => {
                "SELECT kind || ' ' || name AS object FROM ( \
                   SELECT c.relkind::text AS kind, c.relname::text AS name FROM pg_class c \
                   JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = 'public' \
                   UNION ALL SELECT 'trigger', t.tgname || ' on ' || t.tgrelid::regclass::text \
                   FROM pg_trigger t WHERE NOT t.tgisinternal \
                   UNION ALL SELECT 'function', p.proname::text FROM pg_proc p \
                   JOIN pg_namespace n ON n.oid = p.pronamespace WHERE n.nspname = 'public' \
                 ) AS o WHERE name NOT LIKE 'seaql_migrations%' ORDER BY 1"
            }
            _ => {
                "SELECT type || ' ' || name AS object FROM sqlite_master \
                 WHERE name NOT LIKE 'sqlite_%' AND tbl_name <> 'seaql_migrations' ORDER BY 1"
            }
        };
        db.query_all(Statement::from_string(backend, sql))
            .await
            .unwrap()
            .iter()
            .map(|r| r.try_get::<String>("", "object").unwrap())
            .collect()
    }

    /// How many environments the metric counts hold (counts plus deltas not yet folded).
    async fn environments_counted(db: &DatabaseConnection) -> i64 {
        let sql = "SELECT CAST(COALESCE(SUM(n), 0) AS BIGINT) AS n FROM ( \
                     SELECT n FROM metric_counts WHERE metric = 'environments' \
                     UNION ALL SELECT n FROM metric_deltas WHERE metric = 'environments' \
                   ) AS c";
        db.query_one(Statement::from_string(db.get_database_backend(), sql))
            .await
            .unwrap()
            .unwrap()
            .try_get::<i64>("", "n")
            .unwrap()
    }

    /// Every migration's `down` drops what its `up` created (with the rows in it), and the
    /// migrations go up again to the same schema, its counts kept from there.
    async fn the_migrations_go_down_and_up_again_on(db: DatabaseConnection) {
        let migrated = objects(&db).await;
        assert!(migrated.len() > 50, "{migrated:?}");
        fixtures::environment(&db, "dev", EnvironmentClass::NonProduction).await;
        assert_eq!(environments_counted(&db).await, 1);

        Migrator::down(&db, None).await.unwrap();
        assert_eq!(objects(&db).await, Vec::<String>::new(), "all dropped");

        Migrator::up(&db, None).await.unwrap();
        assert_eq!(objects(&db).await, migrated);
        assert_eq!(
            environments_counted(&db).await,
            0,
            "the rows went with their tables"
        );
        fixtures::environment(&db, "dev", EnvironmentClass::NonProduction).await;
        assert_eq!(environments_counted(&db).await, 1);
    }

    fixtures::on_both_databases!(
        the_migrations_go_down_and_up_again_sqlite,
        the_migrations_go_down_and_up_again_postgres,
        the_migrations_go_down_and_up_again_on
    );
}
