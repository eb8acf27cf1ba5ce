//! Connections to the read DB: sqlx's pools, built here rather than by sea-orm (docs/operations.md,
//! "The read DB's connections").

use sea_orm::{DatabaseConnection, DbErr, RuntimeErr};

/// Connects to the read DB at `url`: `sqlite:…` or `postgres://…`.
pub async fn open(url: &str) -> Result<DatabaseConnection, crate::Error> {
    let pool = if url.starts_with("sqlite:") {
        sqlite(url).await
    } else {
        postgres(url).await
    };
    pool.map_err(|e| DbErr::Conn(RuntimeErr::SqlxError(e)).into())
}

/// The file of a SQLite `url` (none for another database, or one that does not parse), as
/// sqlx reads it.
pub fn sqlite_file(url: &str) -> Option<std::path::PathBuf> {
    use sqlx::sqlite::SqliteConnectOptions;
    // sqlx takes any other text for a file name.
    if !url.starts_with("sqlite:") {
        return None;
    }
    let options = url.parse::<SqliteConnectOptions>().ok()?;
    Some(options.get_filename().to_owned())
}

/// The SQLite pool: one connection per process. SQLite writes one transaction at a time
/// anyway, and one connection keeps a process's transactions from waiting on each other's
/// locks inside SQLite (where a deferred transaction that reads, then writes, fails at once
/// rather than waiting: `write::begin_write`).
async fn sqlite(url: &str) -> Result<DatabaseConnection, sqlx::Error> {
    use sqlx::ConnectOptions as _;
    use sqlx::sqlite::{
        SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous,
    };
    let connect = url
        .parse::<SqliteConnectOptions>()?
        .disable_statement_logging()
        // Write-ahead logging: readers (the API) never block the writer (the worker) and the
        // other way round. With it, `synchronous=normal` syncs the log at checkpoints rather
        // than at every commit, as the embedded Temporal store next to it does: a killed
        // process loses nothing it committed, a power cut can lose the last transactions
        // (PostgreSQL is the production store; docs/operations.md).
        .journal_mode(SqliteJournalMode::Wal)
        .synchronous(SqliteSynchronous::Normal)
        .foreign_keys(true)
        // sqlx hands each row from the connection's thread to the async side through a
        // bounded channel (50 rows by default); a list page is up to 201 rows, and a full
        // channel parks the thread until the reader catches up. Room for a whole page avoids it.
        .row_buffer_size(256);
    let pool = without_maintenance(SqlitePoolOptions::new())
        .max_connections(1)
        // Nothing can break a file open in this process between uses, and the ping sqlx sends
        // before handing a connection out is a round trip to the connection's thread.
        .test_before_acquire(false)
        .connect_with(connect)
        .await?;
    Ok(sea_orm::SqlxSqliteConnector::from_sqlx_sqlite_pool(pool))
}

/// A pool that never starts sqlx's maintenance task. sea-orm always gives sqlx's pool an idle
/// timeout and a maximum lifetime, and with either sqlx 0.8.6 runs a task whose sweep can read a
/// miscounted idle queue as `usize::MAX` and spin on it forever, wedging the pool (sqlx issue
/// 3645, fixed after 0.8.6; seen here as an API at 86 % CPU answering nothing, and reported on
/// PostgreSQL pools elsewhere). So the pools are built here, without either: a connection stays
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

    #[test]
    fn a_sqlite_urls_file_is_read_as_sqlx_reads_it() {
        let file = |url: &str| sqlite_file(url).map(|f| f.display().to_string());
        let dev = file("sqlite://.data/runtime-cloud.db?mode=rwc");
        assert_eq!(dev.as_deref(), Some(".data/runtime-cloud.db"));
        assert_eq!(file("sqlite:/tmp/x.db").as_deref(), Some("/tmp/x.db"));
        assert_eq!(file("postgres://postgres@127.0.0.1:5432/test"), None);
    }
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
    async fn the_sqlite_pool_logs_ahead_syncs_at_checkpoints_checks_foreign_keys_and_never_sweeps()
    {
        let dir = tempfile::tempdir().expect("a directory");
        let url = format!("sqlite://{}?mode=rwc", dir.path().join("read.db").display());
        let db = open(&url).await.expect("connects");
        assert_eq!(pragma(&db, "journal_mode").await, "wal");
        // 1 is NORMAL (2, FULL, syncs the log at every commit).
        assert_eq!(pragma(&db, "synchronous").await, "1");
        assert_eq!(pragma(&db, "foreign_keys").await, "1");
        let options = db.get_sqlite_connection_pool().options();
        assert_eq!(options.get_idle_timeout(), None);
        assert_eq!(options.get_max_lifetime(), None);
        assert_eq!(options.get_max_connections(), 1);
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
