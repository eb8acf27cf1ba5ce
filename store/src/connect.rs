//! Connections to the read DB: one per process on SQLite, a pool on PostgreSQL, built here
//! rather than by sea-orm (docs/operations.md, "The read DB's connections").

pub(crate) mod in_thread;

use std::sync::Arc;

use sea_orm::{DatabaseConnection, DbBackend, DbErr, RuntimeErr};

/// Connects to the read DB at `url`: `sqlite:…` or `postgres://…`.
pub async fn open(url: &str) -> Result<DatabaseConnection, crate::Error> {
    if url.starts_with("sqlite:") {
        // Opening can wait for another process's lock on the file: off the runtime's threads.
        let url = url.to_owned();
        let opened = tokio::task::spawn_blocking(move || sqlite(&url)).await;
        let opened = opened.map_err(|e| DbErr::Conn(RuntimeErr::Internal(e.to_string())))?;
        return opened.map_err(Into::into);
    }
    postgres(url)
        .await
        .map_err(|e| DbErr::Conn(RuntimeErr::SqlxError(e)).into())
}

/// The SQLite connection: one, whose statements run in the thread that asks
/// ([`in_thread`]), reached through sea-orm's proxy connection.
fn sqlite(url: &str) -> Result<DatabaseConnection, DbErr> {
    let connection = in_thread::InThread::open(url)?;
    sea_orm::ProxyDatabaseConnector::connect(DbBackend::Sqlite, Arc::new(Box::new(connection)))
}

/// A pool that never starts sqlx's maintenance task. sea-orm always gives sqlx's pool an idle
/// timeout and a maximum lifetime, and with either sqlx 0.8.6 runs a task whose sweep can read a
/// miscounted idle queue as `usize::MAX` and spin on it forever, wedging the pool (sqlx issue
/// 3645, fixed after 0.8.6; seen here as an API at 86 % CPU answering nothing, and reported on
/// PostgreSQL pools elsewhere). So the pool is built here, without either: a connection stays
/// open until it breaks, and a broken one is found by the check before it is handed out.
fn without_maintenance<DB: sqlx::Database>(
    pool: sqlx::pool::PoolOptions<DB>,
) -> sqlx::pool::PoolOptions<DB> {
    pool.idle_timeout(None).max_lifetime(None)
}

/// The PostgreSQL pool: sqlx's defaults (ten connections, each checked before it is handed
/// out: the server may have closed it) without the maintenance task.
async fn postgres(url: &str) -> Result<DatabaseConnection, sqlx::Error> {
    use sqlx::ConnectOptions as _;
    use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
    let connect = url.parse::<PgConnectOptions>()?.disable_statement_logging();
    let pool = without_maintenance(PgPoolOptions::new())
        .connect_with(connect)
        .await?;
    Ok(sea_orm::SqlxPostgresConnector::from_sqlx_postgres_pool(
        pool,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use sea_orm::{ConnectionTrait, DbBackend, Statement};

    /// A pragma's value on the pool's connection.
    async fn pragma(db: &DatabaseConnection, name: &str) -> String {
        let sql = format!("PRAGMA {name}");
        let row = db
            .query_one(Statement::from_string(DbBackend::Sqlite, sql))
            .await
            .expect("reads the pragma")
            .expect("a row");
        row.try_get_by_index::<String>(0)
            .or_else(|_| row.try_get_by_index::<i64>(0).map(|n| n.to_string()))
            .expect("a value")
    }

    #[tokio::test]
    async fn the_sqlite_connection_logs_ahead_syncs_at_checkpoints_and_checks_foreign_keys() {
        let dir = tempfile::tempdir().expect("a directory");
        let url = format!("sqlite://{}?mode=rwc", dir.path().join("read.db").display());
        let db = open(&url).await.expect("connects");
        assert_eq!(pragma(&db, "journal_mode").await, "wal");
        // 1 is NORMAL (2, FULL, syncs the log at every commit).
        assert_eq!(pragma(&db, "synchronous").await, "1");
        assert_eq!(pragma(&db, "foreign_keys").await, "1");
    }

    #[tokio::test]
    async fn a_sqlite_url_with_an_unknown_option_is_refused() {
        let error = open("sqlite:///tmp/x.db?mode=rwc&cache=shared")
            .await
            .expect_err("refused");
        assert!(error.to_string().contains("cache=shared"), "{error}");
    }

    #[tokio::test]
    async fn the_postgres_pool_never_sweeps_and_checks_connections_before_use() {
        let url = std::env::var("RC_TEST_POSTGRES_URL")
            .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".into());
        let db = postgres(&url)
            .await
            .expect("PostgreSQL at RC_TEST_POSTGRES_URL");
        let one = db
            .query_one(Statement::from_string(DbBackend::Postgres, "SELECT 1"))
            .await
            .expect("answers")
            .expect("a row");
        assert_eq!(one.try_get_by_index::<i32>(0).expect("a number"), 1);
        let options = db.get_postgres_connection_pool().options();
        assert_eq!(options.get_idle_timeout(), None);
        assert_eq!(options.get_max_lifetime(), None);
        assert!(options.get_test_before_acquire());
    }
}
