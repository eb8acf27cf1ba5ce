//! The planner's statistics, kept fresh by the writers that grow tables fast (PostgreSQL).
//!
//! PostgreSQL plans a query from its statistics of each table, which `ANALYZE` gathers and
//! autovacuum refreshes once a table has changed by a tenth, looking once a minute, and only
//! where autovacuum is on. A drift storm writes 200,000 findings into a table that was empty a
//! few minutes before; meanwhile every connection keeps the plans it made for its prepared
//! statements while the table was small, until the next `ANALYZE` invalidates them. With
//! those plans, one batch's read of its environments' open findings walked the
//! tenant's every open finding (a plan that counts on a tenant having a handful), 200–300 ms a
//! batch, and the storm's sweep observed 22 environments a second; one `ANALYZE` mid-sweep
//! (0.75 s for the whole database) took it to 70 a second at once.
//!
//! So the sweep, after each batch it records, asks PostgreSQL which tables changed by more than
//! half (plus [`MIN_CHANGES`]) since their last analysis, by anyone, and analyses those: a table
//! growing from empty to 200,000 rows is analysed about a dozen times on the way, each time a
//! fraction of a second. SQLite plans without gathered statistics (it prefers the indexes, and
//! keeps no plan past its statement cache's validity), so it has nothing to refresh.

use crate::Error;
use sea_orm::{ConnectionTrait, DatabaseConnection, DbBackend, Statement};

/// Changes below which a table is never analysed here (autovacuum's threshold is 50; a table
/// this small plans well either way).
pub const MIN_CHANGES: i64 = 1_000;

/// Analyses every table of the database that changed by more than half of its rows (as last
/// analysed; all of them if never) plus [`MIN_CHANGES`] since its last analysis, and returns
/// their names. A table another session is analysing is waited for, not analysed twice at once.
pub async fn refresh(db: &DatabaseConnection) -> Result<Vec<String>, Error> {
    if db.get_database_backend() != DbBackend::Postgres {
        return Ok(Vec::new());
    }
    let grown = db
        .query_all(Statement::from_sql_and_values(
            DbBackend::Postgres,
            "SELECT s.relname::text AS relname FROM pg_stat_user_tables s \
             JOIN pg_class c ON c.oid = s.relid \
             WHERE s.schemaname = current_schema() \
             AND s.n_mod_since_analyze > $1 + 0.5 * greatest(c.reltuples, 0) \
             ORDER BY s.relname",
            [MIN_CHANGES.into()],
        ))
        .await?;
    let mut analysed = Vec::with_capacity(grown.len());
    for row in grown {
        let table: String = row.try_get("", "relname")?;
        // The name comes from the catalog; quoted all the same.
        let quoted = format!("\"{}\"", table.replace('"', "\"\""));
        db.execute_unprepared(&format!("ANALYZE {quoted}")).await?;
        analysed.push(table);
    }
    Ok(analysed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures;
    use std::time::{Duration, Instant};

    /// `ANALYZE` counts, and the counts reach the statistics views within about a second
    /// (PostgreSQL flushes a backend's counts at most once a second): asked until they do.
    async fn refreshed_until(db: &DatabaseConnection, table: &str) -> Vec<String> {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let analysed = refresh(db).await.expect("refresh");
            if analysed.iter().any(|t| t == table) || Instant::now() > deadline {
                return analysed;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    #[tokio::test]
    async fn a_table_that_grew_by_half_is_analysed_once() {
        let db = fixtures::postgres().await;
        let rows = |n: i64| {
            format!(
                "INSERT INTO metric_counts (metric, key1, key2, key3, key4, n, total) \
                 SELECT 'test', g::text, '', '', '', 1, 0 FROM generate_series(1, {n}) AS g"
            )
        };
        db.execute_unprepared(&rows(5_000)).await.unwrap();
        assert_eq!(
            refreshed_until(&db, "metric_counts").await,
            ["metric_counts"]
        );
        let analysed: i64 = db
            .query_one(Statement::from_string(
                DbBackend::Postgres,
                "SELECT reltuples::bigint AS n FROM pg_class WHERE relname = 'metric_counts'",
            ))
            .await
            .unwrap()
            .expect("the table")
            .try_get("", "n")
            .unwrap();
        assert!(analysed >= 5_000, "the planner now counts {analysed} rows");

        // Nothing changed since: nothing to analyse.
        assert!(refresh(&db).await.unwrap().is_empty());
        // A tenth more is not enough (autovacuum's business, where it runs): once the views
        // show the change, there is still nothing to analyse.
        db.execute_unprepared(
            "UPDATE metric_counts SET n = 2 WHERE metric = 'test' AND key1::int <= 500",
        )
        .await
        .unwrap();
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let changes: i64 = db
                .query_one(Statement::from_string(
                    DbBackend::Postgres,
                    "SELECT n_mod_since_analyze AS n FROM pg_stat_user_tables \
                     WHERE relname = 'metric_counts'",
                ))
                .await
                .unwrap()
                .expect("the table")
                .try_get("", "n")
                .unwrap();
            if changes >= 500 {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "the update never reached the views"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        assert!(refresh(&db).await.unwrap().is_empty());
    }

    #[tokio::test]
    async fn sqlite_has_nothing_to_refresh() {
        let db = fixtures::sqlite().await;
        assert!(refresh(&db).await.unwrap().is_empty());
    }
}
