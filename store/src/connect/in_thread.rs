//! The SQLite read DB's one connection, whose statements run in the thread that asks for them
//! (docs/operations.md, "The read DB's connections").
//!
//! sqlx runs each SQLite statement on its connection's own thread: the hand-off there and back
//! (two threads woken a statement, and a ping each time the connection goes back to its pool)
//! costs 20 to 35 times what SQLite itself does (benchmark 10, docs/benchmarks.md). Here
//! SQLite runs where it is asked, under a mutex held only while a statement steps, and sea-orm
//! reaches it through its proxy connection.
//!
//! - **One transaction at a time.** A transaction holds the connection's turn from its `BEGIN`
//!   to its end; statements of other tasks wait for the turn (asynchronously), statements of the
//!   task that began it run inside it (code outside any task, a runtime's `block_on`, counts
//!   as one task), and only that task ends it: a transaction is used by the task that began
//!   it. Two transactions one task begins at once take turns; a savepoint is begun with
//!   `crate::write::savepoint`. This is the one-connection pool it replaces.
//! - **Another process's write lock is waited for asynchronously**: SQLite answers busy at once
//!   and the statement is tried again after a pause, for up to five seconds as sqlx's busy
//!   timeout did, instead of blocking a runtime thread.
//! - **A commit's error reaches the caller**: sea-orm's proxy cannot return one, so the store
//!   commits with [`crate::write::commit`], which runs `COMMIT` as a statement first.
//! - **Each value is read as the type its table declares** (`kind_of`): sea-orm's proxy rows
//!   must hold the exact variant the caller decodes, and a wrong one decodes into an `Option`
//!   as `None`, so `every_entity_column_reads_as_its_entity_says` holds every entity column to
//!   it. A computed column (a count, a sum) declares none and is read by what SQLite stored:
//!   integers as `i64`, reals as `f64`, text as text (the store reads its sums and counts as
//!   `i64`), except the few sea-orm reads itself (`computed_by_sea_orm`).
//! - **A row's values are kept by name**, in name order: the store reads tuples with
//!   `crate::tuples`, which names each column by its position.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use chrono::{DateTime, FixedOffset, NaiveDateTime, SecondsFormat, TimeZone, Utc};
use rusqlite::types::{Value as Sql, ValueRef};
use rusqlite::{Connection, ErrorCode, OpenFlags, ffi};
use sea_orm::{DbErr, ProxyDatabaseTrait, ProxyExecResult, ProxyRow, RuntimeErr, Statement, Value};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::task;

/// How long a statement waits for another process's write lock: sqlx's busy timeout.
const BUSY_FOR: Duration = Duration::from_secs(5);
/// Statements prepared once and kept: a run uses about fifty distinct ones.
const PREPARED: usize = 256;
/// What distinct query texts return, kept at most.
const COLUMN_SETS: usize = 1024;

/// The type a column's values are read as (sea-query's value variant).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Int,
    BigInt,
    Bool,
    Double,
    Text,
    Time,
    Json,
    Bytes,
}

/// What one SQL text returns: each column's name and, when it is a table's column, its kind.
#[derive(Debug)]
struct Columns {
    names: Vec<String>,
    kinds: Vec<Option<Kind>>,
}

/// An open transaction: who began it, how deep its savepoints go, and the turn it holds.
#[derive(Debug)]
struct Open {
    owner: Option<task::Id>,
    /// Levels begun (1: the transaction, more: savepoints), each with whether `COMMIT` already
    /// ran for it as a statement.
    levels: Vec<bool>,
    /// Why its `BEGIN` or a `SAVEPOINT` failed: its statements then fail too, rather than run
    /// outside the transaction their caller believes in.
    broken: Option<String>,
    _turn: OwnedSemaphorePermit,
}

#[derive(Debug)]
struct Inner {
    conn: Connection,
    columns: HashMap<String, Arc<Columns>>,
    open: Option<Open>,
}

/// The connection (see the module's documentation).
#[derive(Debug)]
pub(crate) struct InThread {
    inner: Mutex<Inner>,
    turn: Arc<Semaphore>,
}

impl InThread {
    /// Opens `url` (`sqlite::memory:`, or `sqlite://PATH` with `?mode=rwc|rw|ro`) in write-ahead
    /// logging with `synchronous=normal` and foreign keys on, as the sqlx pool did.
    pub(crate) fn open(url: &str) -> Result<Self, DbErr> {
        let conn = connect(url).map_err(|e| conn_err(&e))?;
        Ok(Self {
            inner: Mutex::new(Inner {
                conn,
                columns: HashMap::new(),
                open: None,
            }),
            turn: Arc::new(Semaphore::new(1)),
        })
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // A panic while a statement stepped leaves SQLite itself consistent.
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Runs `f` on the connection: inside the caller's own transaction, or else when no other
    /// transaction is open. Busy (another process writes) is waited out asynchronously.
    async fn run<R>(&self, f: impl Fn(&mut Inner) -> rusqlite::Result<R>) -> Result<R, DbErr> {
        let me = task::try_id();
        let started = Instant::now();
        let mut pause = Duration::from_millis(1);
        loop {
            let (mine, broken) = match self.lock().open.as_ref() {
                Some(open) if open.owner == me => (true, open.broken.clone()),
                _ => (false, None),
            };
            if let Some(why) = broken {
                return Err(DbErr::Exec(RuntimeErr::Internal(why)));
            }
            let turn = if mine {
                None
            } else {
                Some(self.turn.acquire().await.map_err(|e| conn_err(&e))?)
            };
            let result = f(&mut self.lock());
            drop(turn);
            match result {
                Err(e) if waits(&e) && started.elapsed() < BUSY_FOR => {
                    tokio::time::sleep(pause).await;
                    pause = (pause * 2).min(Duration::from_millis(50));
                }
                other => return other.map_err(|e| exec_err(&e)),
            }
        }
    }

    /// Ends the caller's innermost level: `COMMIT`/`RELEASE` or `ROLLBACK`, unless `COMMIT`
    /// already ran for it as a statement. Lets the turn go with the last level. Only the task
    /// that began the transaction ends it: sea-orm also ends a transaction whose `begin` was
    /// cancelled while it waited for the turn, and that must not end the one holding it.
    fn end(&self, commit: bool) -> rusqlite::Result<()> {
        let me = task::try_id();
        let mut inner = self.lock();
        let Inner { conn, open, .. } = &mut *inner;
        let Some(level) = open.as_mut().filter(|o| o.owner == me) else {
            return Ok(());
        };
        let depth = level.levels.len();
        let done = level.levels.pop().unwrap_or(true);
        let result = if done {
            Ok(())
        } else {
            conn.execute_batch(&ending(depth, commit))
        };
        if level.levels.is_empty() {
            *open = None;
        } else if let Err(e) = &result {
            // sea-orm's proxy cannot answer a savepoint's failed ending: the transaction's
            // statements and its commit answer it instead.
            level.broken = Some(format!("a savepoint could not end: {e}"));
        }
        result
    }
}

tokio::task_local! {
    /// Set while [`crate::write::savepoint`] begins a savepoint. sea-orm begins a savepoint and a
    /// transaction alike, and two transactions one task begins at once (`join!`) must take
    /// turns, as they did on a pool of one connection, not nest.
    pub(crate) static SAVEPOINT: bool;
}

/// The statement that ends level `depth` (1: the transaction, more: a savepoint).
fn ending(depth: usize, commit: bool) -> String {
    match (depth, commit) {
        (1, true) => "COMMIT".into(),
        (1, false) => "ROLLBACK".into(),
        (_, true) => format!("RELEASE sp{depth}"),
        (_, false) => format!("ROLLBACK TO sp{depth}; RELEASE sp{depth}"),
    }
}

#[async_trait::async_trait]
impl ProxyDatabaseTrait for InThread {
    async fn query(&self, statement: Statement) -> Result<Vec<ProxyRow>, DbErr> {
        self.run(|inner| query(inner, &statement)).await
    }

    async fn execute(&self, statement: Statement) -> Result<ProxyExecResult, DbErr> {
        let me = task::try_id();
        if statement.sql == "COMMIT" && statement.values.is_none() {
            return self.commit_now(me);
        }
        self.run(|inner| execute(inner, &statement)).await
    }

    async fn begin(&self) {
        let me = task::try_id();
        if SAVEPOINT.try_with(|s| *s).unwrap_or(false) {
            let mut inner = self.lock();
            let Inner { conn, open, .. } = &mut *inner;
            if let Some(open) = open.as_mut().filter(|o| o.owner == me) {
                let depth = open.levels.len() + 1;
                let begun = conn.execute_batch(&format!("SAVEPOINT sp{depth}"));
                // A savepoint that did not begin has nothing to end.
                open.levels.push(begun.is_err());
                if let Err(e) = begun {
                    open.broken = Some(format!("a savepoint could not begin: {e}"));
                }
                return;
            }
        }
        // The semaphore is never closed, so the turn always comes.
        let Ok(turn) = self.turn.clone().acquire_owned().await else {
            return;
        };
        let mut inner = self.lock();
        // sea-orm's proxy cannot answer a failed BEGIN (a deferred one takes no lock, so only
        // a broken connection fails it): the transaction's statements answer it instead.
        let broken = (inner.conn.execute_batch("BEGIN").err())
            .map(|e| format!("the transaction could not begin: {e}"));
        inner.open = Some(Open {
            owner: me,
            // Nothing to end for a BEGIN that failed.
            levels: vec![broken.is_some()],
            broken,
            _turn: turn,
        });
    }

    async fn commit(&self) {
        if let Err(e) = self.end(true) {
            // Reached only by a commit that bypassed `write::commit` (clippy refuses it): the
            // caller would take the failure for success, so the process stops instead.
            tracing::error!(error = %e, "a commit failed and its caller cannot be told");
            std::process::abort();
        }
    }

    async fn rollback(&self) {
        if let Err(e) = self.end(false) {
            tracing::error!(error = %e, "a rollback failed");
        }
    }

    fn start_rollback(&self) {
        if let Err(e) = self.end(false) {
            tracing::error!(error = %e, "a rollback failed");
        }
    }
}

impl InThread {
    /// `COMMIT` run as a statement by the transaction's owner: commits (or releases the
    /// savepoint) and answers its error, leaving the transaction open on one.
    fn commit_now(&self, me: Option<task::Id>) -> Result<ProxyExecResult, DbErr> {
        let mut inner = self.lock();
        let Some(open) = inner.open.as_mut().filter(|o| o.owner == me) else {
            return Err(DbErr::Custom("COMMIT outside a transaction".into()));
        };
        if let Some(why) = &open.broken {
            return Err(DbErr::Exec(RuntimeErr::Internal(why.clone())));
        }
        let depth = open.levels.len();
        if open.levels.last() == Some(&true) {
            return Ok(ProxyExecResult::default());
        }
        inner
            .conn
            .execute_batch(&ending(depth, true))
            .map_err(|e| exec_err(&e))?;
        if let Some(level) = inner.open.as_mut().and_then(|o| o.levels.last_mut()) {
            *level = true;
        }
        Ok(ProxyExecResult::default())
    }
}

/// Opens the file with the sqlx pool's settings.
fn connect(url: &str) -> Result<Connection, String> {
    let rest = url
        .strip_prefix("sqlite:")
        .ok_or_else(|| format!("not a SQLite URL: {url}"))?;
    let (path, query) = rest.split_once('?').unwrap_or((rest, ""));
    let path = path.strip_prefix("//").unwrap_or(path);
    let mut flags = OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        match pair {
            "mode=rwc" => flags |= OpenFlags::SQLITE_OPEN_CREATE,
            "mode=rw" => {}
            "mode=ro" => flags = OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
            "mode=memory" => flags |= OpenFlags::SQLITE_OPEN_MEMORY,
            other => return Err(format!("unknown SQLite URL option `{other}` in {url}")),
        }
    }
    let conn = if path == ":memory:" {
        Connection::open_in_memory()
    } else {
        Connection::open_with_flags(path, flags)
    }
    .map_err(|e| format!("opening {path}: {e}"))?;
    conn.set_prepared_statement_cache_capacity(PREPARED);
    // Switching a new file to write-ahead logging takes its lock: an API and a worker started
    // together on one new file wait for each other here, once, as sqlx's connect did.
    conn.busy_timeout(BUSY_FOR).map_err(|e| e.to_string())?;
    conn.execute_batch(
        "PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL; PRAGMA foreign_keys = ON;",
    )
    .map_err(|e| e.to_string())?;
    // From here busy is answered at once and waited for by `run`, off the runtime's threads.
    conn.busy_timeout(Duration::ZERO)
        .map_err(|e| e.to_string())?;
    Ok(conn)
}

/// Whether `e` is another process holding the write lock (worth waiting for). A snapshot
/// another writer made stale (`SQLITE_BUSY_SNAPSHOT`) never frees up by waiting.
fn waits(e: &rusqlite::Error) -> bool {
    matches!(e, rusqlite::Error::SqliteFailure(f, _)
        if f.code == ErrorCode::DatabaseBusy && f.extended_code != ffi::SQLITE_BUSY_SNAPSHOT)
}

fn query(inner: &mut Inner, statement: &Statement) -> rusqlite::Result<Vec<ProxyRow>> {
    let columns = columns(inner, &statement.sql)?;
    let mut prepared = inner.conn.prepare_cached(&statement.sql)?;
    bind(&mut prepared, statement)?;
    let mut rows = prepared.raw_query();
    let mut out = Vec::new();
    while let Some(row) = rows.next()? {
        let mut values = BTreeMap::new();
        for (i, (name, kind)) in columns.names.iter().zip(&columns.kinds).enumerate() {
            values.insert(name.clone(), value(row.get_ref(i)?, *kind, i)?);
        }
        out.push(ProxyRow { values });
    }
    Ok(out)
}

fn execute(inner: &mut Inner, statement: &Statement) -> rusqlite::Result<ProxyExecResult> {
    let conn = &inner.conn;
    let rows_affected = match conn.prepare_cached(&statement.sql) {
        Ok(mut prepared) => {
            bind(&mut prepared, statement)?;
            // Stepped to the end rather than `raw_execute`d: a migration's PRAGMA answers rows.
            let mut rows = prepared.raw_query();
            while rows.next()?.is_some() {}
            usize::try_from(conn.changes()).unwrap_or(usize::MAX)
        }
        // Several statements in one text (a migration's), which carry no parameters: all or
        // nothing, so that trying them again after busy never runs one twice.
        Err(rusqlite::Error::MultipleStatement) if statement.values.is_none() => {
            conn.execute_batch("SAVEPOINT batch")?;
            if let Err(e) = conn.execute_batch(&statement.sql) {
                conn.execute_batch("ROLLBACK TO batch; RELEASE batch")?;
                return Err(e);
            }
            let changes = conn.changes();
            conn.execute_batch("RELEASE batch")?;
            usize::try_from(changes).unwrap_or(usize::MAX)
        }
        Err(e) => return Err(e),
    };
    Ok(ProxyExecResult {
        last_insert_id: u64::try_from(conn.last_insert_rowid()).unwrap_or(0),
        rows_affected: rows_affected as u64,
    })
}

/// What `sql` returns, worked out once per text: names, and the kinds of table columns.
fn columns(inner: &mut Inner, sql: &str) -> rusqlite::Result<Arc<Columns>> {
    if let Some(known) = inner.columns.get(sql) {
        return Ok(Arc::clone(known));
    }
    let prepared = inner.conn.prepare_cached(sql)?;
    let (names, kinds) = prepared
        .columns()
        .iter()
        .map(|c| {
            let kind = match c.decl_type() {
                Some(declared) => kind_of(c.name(), declared),
                None => computed_by_sea_orm(c.name()),
            };
            (c.name().to_owned(), kind)
        })
        .unzip();
    drop(prepared);
    let known = Arc::new(Columns { names, kinds });
    // Texts with values written into them (a list of placeholders as long as its list) would
    // grow the map without end; it is rebuilt as statements come back.
    if inner.columns.len() >= COLUMN_SETS {
        inner.columns.clear();
    }
    inner.columns.insert(sql.to_owned(), Arc::clone(&known));
    Ok(known)
}

/// A table column's kind, from the type its table declares: as the migrations write sea-orm's
/// column types on SQLite. `INTEGER` is an `i32` column, except a row sequence (`seq`, an
/// `INTEGER PRIMARY KEY`: SQLite's 64-bit rowid). `every_entity_column_reads_as_its_entity_says`
/// holds every entity column to this.
fn kind_of(name: &str, declared: &str) -> Option<Kind> {
    Some(match declared.to_ascii_lowercase().as_str() {
        "integer" if name == "seq" => Kind::BigInt,
        "integer" => Kind::Int,
        "bigint" => Kind::BigInt,
        "boolean" => Kind::Bool,
        "double" | "real" | "float" => Kind::Double,
        "timestamp_with_timezone_text" => Kind::Time,
        "json_text" => Kind::Json,
        "text" | "varchar" => Kind::Text,
        "blob" => Kind::Bytes,
        _ => return None,
    })
}

/// The computed columns sea-orm itself reads, which are not read by what SQLite stored: its
/// migrator's checks (`has_table` …, booleans) and its paginator's count (an `i32` on SQLite).
fn computed_by_sea_orm(name: &str) -> Option<Kind> {
    match name {
        "has_table" | "has_column" | "has_index" => Some(Kind::Bool),
        "num_items" => Some(Kind::Int),
        _ => None,
    }
}

/// One stored value as `kind` (a computed column's by what SQLite stored).
fn value(stored: ValueRef<'_>, kind: Option<Kind>, i: usize) -> rusqlite::Result<Value> {
    let wrong = || {
        rusqlite::Error::FromSqlConversionFailure(
            i,
            stored.data_type(),
            format!("a {:?} column holds {:?}", kind, stored.data_type()).into(),
        )
    };
    let text = |v: ValueRef<'_>| v.as_str().map(str::to_owned).map_err(|_| wrong());
    Ok(match (kind, stored) {
        (Some(Kind::Int), ValueRef::Null) => Value::Int(None),
        (Some(Kind::Int), ValueRef::Integer(n)) => {
            Value::Int(Some(i32::try_from(n).map_err(|_| wrong())?))
        }
        (Some(Kind::BigInt), ValueRef::Null) => Value::BigInt(None),
        (Some(Kind::BigInt) | None, ValueRef::Integer(n)) => Value::BigInt(Some(n)),
        (Some(Kind::Bool), ValueRef::Null) => Value::Bool(None),
        (Some(Kind::Bool), ValueRef::Integer(n)) => Value::Bool(Some(n != 0)),
        (Some(Kind::Double), ValueRef::Null) => Value::Double(None),
        (Some(Kind::Double), ValueRef::Integer(n)) => Value::Double(Some(n as f64)),
        (Some(Kind::Double) | None, ValueRef::Real(x)) => Value::Double(Some(x)),
        (Some(Kind::Text), ValueRef::Null) => Value::String(None),
        (Some(Kind::Text) | None, ValueRef::Text(_)) => {
            Value::String(Some(Box::new(text(stored)?)))
        }
        (Some(Kind::Time), ValueRef::Null) => Value::ChronoDateTimeUtc(None),
        (Some(Kind::Time), ValueRef::Text(_)) => {
            let at = time(&text(stored)?).ok_or_else(wrong)?;
            Value::ChronoDateTimeUtc(Some(Box::new(at)))
        }
        (Some(Kind::Json), ValueRef::Null) => Value::Json(None),
        (Some(Kind::Json), ValueRef::Text(_)) => {
            let json = serde_json::from_str(&text(stored)?).map_err(|_| wrong())?;
            Value::Json(Some(Box::new(json)))
        }
        (Some(Kind::Bytes), ValueRef::Null) => Value::Bytes(None),
        (Some(Kind::Bytes) | None, ValueRef::Blob(b)) => Value::Bytes(Some(Box::new(b.to_vec()))),
        // A computed NULL: any variant's `None` reads as `None` into an `Option` of any type.
        (None, ValueRef::Null) => Value::BigInt(None),
        _ => return Err(wrong()),
    })
}

/// A stored time: RFC 3339 as written, or SQLite's own formats (as sqlx reads them).
fn time(text: &str) -> Option<DateTime<Utc>> {
    if let Ok(at) = DateTime::parse_from_rfc3339(text) {
        return Some(at.with_timezone(&Utc));
    }
    const FORMATS: [&str; 4] = ["%F %T%.f%:z", "%F %T%.fZ", "%F %T%.f", "%FT%T%.f"];
    FORMATS.iter().find_map(|f| {
        DateTime::<FixedOffset>::parse_from_str(text, f)
            .map(|at| at.with_timezone(&Utc))
            .ok()
            .or_else(|| {
                NaiveDateTime::parse_from_str(text, f)
                    .ok()
                    .map(|at| Utc.from_utc_datetime(&at))
            })
    })
}

/// Binds the statement's values as sqlx wrote them, so rows read the same either way.
fn bind(
    prepared: &mut rusqlite::CachedStatement<'_>,
    statement: &Statement,
) -> rusqlite::Result<()> {
    let Some(values) = &statement.values else {
        return Ok(());
    };
    for (i, v) in values.0.iter().enumerate() {
        prepared.raw_bind_parameter(i + 1, sql_value(v)?)?;
    }
    Ok(())
}

fn sql_value(v: &Value) -> rusqlite::Result<Sql> {
    let unsupported = || rusqlite::Error::ToSqlConversionFailure(format!("{v:?}").into());
    Ok(match v {
        Value::Bool(b) => b.map_or(Sql::Null, |b| Sql::Integer(i64::from(b))),
        Value::TinyInt(n) => n.map_or(Sql::Null, |n| Sql::Integer(n.into())),
        Value::SmallInt(n) => n.map_or(Sql::Null, |n| Sql::Integer(n.into())),
        Value::Int(n) => n.map_or(Sql::Null, |n| Sql::Integer(n.into())),
        Value::BigInt(n) => n.map_or(Sql::Null, Sql::Integer),
        Value::TinyUnsigned(n) => n.map_or(Sql::Null, |n| Sql::Integer(n.into())),
        Value::SmallUnsigned(n) => n.map_or(Sql::Null, |n| Sql::Integer(n.into())),
        Value::Unsigned(n) => n.map_or(Sql::Null, |n| Sql::Integer(n.into())),
        Value::BigUnsigned(n) => match n {
            Some(n) => Sql::Integer(i64::try_from(*n).map_err(|_| unsupported())?),
            None => Sql::Null,
        },
        Value::Float(x) => x.map_or(Sql::Null, |x| Sql::Real(x.into())),
        Value::Double(x) => x.map_or(Sql::Null, Sql::Real),
        Value::String(s) => s.as_ref().map_or(Sql::Null, |s| Sql::Text(s.to_string())),
        Value::Char(c) => c.map_or(Sql::Null, |c| Sql::Text(c.to_string())),
        Value::Bytes(b) => b.as_ref().map_or(Sql::Null, |b| Sql::Blob(b.to_vec())),
        Value::Json(j) => match j {
            Some(j) => Sql::Text(serde_json::to_string(j).map_err(|_| unsupported())?),
            None => Sql::Null,
        },
        Value::ChronoDateTimeUtc(t) => t.as_ref().map_or(Sql::Null, |t| {
            Sql::Text(t.to_rfc3339_opts(SecondsFormat::AutoSi, false))
        }),
        Value::ChronoDateTimeWithTimeZone(t) => t.as_ref().map_or(Sql::Null, |t| {
            Sql::Text(t.to_rfc3339_opts(SecondsFormat::AutoSi, false))
        }),
        Value::ChronoDateTime(t) => t
            .as_ref()
            .map_or(Sql::Null, |t| Sql::Text(t.format("%F %T%.f").to_string())),
        Value::Uuid(u) => u
            .as_ref()
            .map_or(Sql::Null, |u| Sql::Blob(u.as_bytes().to_vec())),
        _ => return Err(unsupported()),
    })
}

/// A statement's error. A unique-key violation starts with [`UNIQUE_VIOLATION`]: sea-orm
/// recognises only sqlx's errors (`DbErr::sql_err`), so the store asks
/// `crate::error::is_unique_violation`, which knows both.
fn exec_err(e: &rusqlite::Error) -> DbErr {
    let unique = matches!(e, rusqlite::Error::SqliteFailure(f, _)
        if f.extended_code == ffi::SQLITE_CONSTRAINT_UNIQUE
            || f.extended_code == ffi::SQLITE_CONSTRAINT_PRIMARYKEY);
    let message = if unique {
        format!("{UNIQUE_VIOLATION}: {e}")
    } else {
        e.to_string()
    };
    DbErr::Exec(RuntimeErr::Internal(message))
}

/// How the message of a unique-key violation begins.
pub(crate) const UNIQUE_VIOLATION: &str = "unique key violated";

fn conn_err(e: &dyn std::fmt::Display) -> DbErr {
    DbErr::Conn(RuntimeErr::Internal(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::connect::open;
    use sea_orm::{ConnectionTrait, DatabaseConnection, DbBackend, TransactionTrait};
    use sea_orm_migration::MigratorTrait;

    /// The kind sea-orm decodes an entity's column type into.
    fn kind_for(column: &sea_orm::ColumnType) -> Kind {
        use sea_orm::ColumnType as C;
        match column {
            C::Integer | C::SmallInteger | C::TinyInteger => Kind::Int,
            C::BigInteger => Kind::BigInt,
            C::Boolean => Kind::Bool,
            C::Double | C::Float | C::Decimal(_) => Kind::Double,
            C::TimestampWithTimeZone | C::DateTime | C::Timestamp => Kind::Time,
            C::Json | C::JsonBinary => Kind::Json,
            C::Binary(_) | C::VarBinary(_) | C::Blob => Kind::Bytes,
            _ => Kind::Text,
        }
    }

    fn sql(text: &str) -> Statement {
        Statement::from_string(DbBackend::Sqlite, text)
    }

    async fn count(db: &impl ConnectionTrait, table: &str) -> i64 {
        let row = db
            .query_one(sql(&format!("SELECT COUNT(*) AS n FROM {table}")))
            .await
            .expect("counts")
            .expect("a row");
        row.try_get("", "n").expect("an i64")
    }

    /// A connection to a new file holding table `t` (the directory keeps the file).
    async fn file_db() -> (tempfile::TempDir, DatabaseConnection) {
        let dir = tempfile::tempdir().expect("a directory");
        let url = format!("sqlite://{}?mode=rwc", dir.path().join("t.db").display());
        let db = open(&url).await.expect("opens");
        db.execute_unprepared("CREATE TABLE t (id INTEGER PRIMARY KEY, v varchar)")
            .await
            .expect("creates");
        (dir, db)
    }

    /// Writes a row holding `v` into `t`.
    async fn insert(db: &impl ConnectionTrait, v: &str) -> Result<(), DbErr> {
        let sql = format!("INSERT INTO t (v) VALUES ('{v}')");
        db.execute_unprepared(&sql).await.map(drop)
    }

    /// Lets the other tasks run as far as they can (none of them can finish what it waits for).
    async fn let_others_run() {
        for _ in 0..100 {
            tokio::task::yield_now().await;
        }
    }

    /// Every entity column, as the migrations declare it, reads as the type its entity decodes:
    /// a column that did not would read as an error, or into an `Option` as `None`.
    #[tokio::test]
    async fn every_entity_column_reads_as_its_entity_says() {
        use crate::entities::*;
        use sea_orm::{ColumnTrait, EntityName, IdenStatic, Iterable};
        let db = open("sqlite::memory:").await.expect("opens");
        crate::Migrator::up(&db, None).await.expect("migrates");
        let mut checked = 0;
        macro_rules! check {
            ($($m:ident),* $(,)?) => {$({
                let table = $m::Entity.table_name();
                let declared: HashMap<String, String> = db
                    .query_all(sql(&format!("SELECT name, type FROM pragma_table_info('{table}')")))
                    .await
                    .expect("reads the table's columns")
                    .into_iter()
                    .map(|r| (r.try_get("", "name").unwrap(), r.try_get("", "type").unwrap()))
                    .collect();
                for column in <$m::Column as Iterable>::iter() {
                    let name = column.as_str();
                    let declared = declared.get(name).unwrap_or_else(|| panic!("{table}.{name}"));
                    assert_eq!(
                        kind_of(name, declared),
                        Some(kind_for(column.def().get_column_type())),
                        "{table}.{name} declared {declared}"
                    );
                    checked += 1;
                }
            })*};
        }
        check!(
            approvals,
            capacity_leases,
            change_windows,
            deployment_specifications,
            drift_findings,
            drift_rules,
            environments,
            fleet_rollouts,
            inbox_events,
            incidents,
            observed_workloads,
            outbox_events,
            provisioning_runs,
            quotas,
            reconciliation_proposals,
            run_starts,
            runtime_inventories,
            semaphore_slots,
            semaphores,
            untold_supersessions,
            worker_pools,
        );
        assert!(checked > 150, "{checked} columns");
    }

    /// Another task's statement waits for the open transaction to end, and then sees it.
    #[tokio::test]
    async fn a_transaction_holds_the_connection_until_it_ends() {
        let (_dir, db) = file_db().await;
        let txn = db.begin().await.expect("begins");
        insert(&txn, "a").await.expect("writes");
        let (started, mut asked) = tokio::sync::oneshot::channel();
        let other = db.clone();
        let reader = tokio::spawn(async move {
            started.send(()).ok();
            count(&other, "t").await
        });
        (&mut asked).await.expect("the reader started");
        let_others_run().await;
        assert!(!reader.is_finished(), "the read waits for the transaction");
        crate::commit(txn).await.expect("commits");
        assert_eq!(reader.await.expect("reads"), 1, "and sees its row");
    }

    /// sea-orm ends a transaction whose `begin` was cancelled while it waited for the turn;
    /// that must leave the transaction holding the turn alone.
    #[tokio::test]
    async fn a_begin_cancelled_while_it_waits_leaves_the_open_transaction_alone() {
        let (_dir, db) = file_db().await;
        let (began, wait_began) = tokio::sync::oneshot::channel();
        let (go_on, wait_go_on) = tokio::sync::oneshot::channel::<()>();
        let holder_db = db.clone();
        let holder = tokio::spawn(async move {
            let txn = holder_db.begin().await?;
            insert(&txn, "first").await?;
            began.send(()).ok();
            wait_go_on.await.ok();
            insert(&txn, "second").await?;
            crate::commit(txn).await
        });
        wait_began.await.expect("the holder began");
        let waiter_db = db.clone();
        let waiter = tokio::spawn(async move { waiter_db.begin().await.map(drop) });
        let_others_run().await;
        assert!(!waiter.is_finished(), "the second begin waits for the turn");
        waiter.abort();
        assert!(waiter.await.is_err_and(|e| e.is_cancelled()));
        go_on.send(()).expect("the holder waits");
        holder
            .await
            .expect("ran")
            .expect("its transaction is still open and commits");
        assert_eq!(count(&db, "t").await, 2);
    }

    /// Two transactions one task begins at once take turns, as on a pool of one connection:
    /// the second is not a savepoint of the first.
    #[tokio::test]
    async fn two_transactions_of_one_task_take_turns() {
        let (_dir, db) = file_db().await;
        let first = async {
            let txn = db.begin().await.expect("begins");
            insert(&txn, "given up").await.expect("writes");
            let_others_run().await;
            txn.rollback().await.expect("rolls back");
        };
        let second = async {
            let txn = db.begin().await.expect("begins");
            let seen = count(&txn, "t").await;
            insert(&txn, "kept").await.expect("writes");
            crate::commit(txn).await.expect("commits");
            seen
        };
        let ((), seen) = tokio::join!(first, second);
        assert_eq!(seen, 0, "the second began after the first ended");
        assert_eq!(count(&db, "t").await, 1);
    }

    /// A savepoint rolled back takes back only what was written since it began.
    #[tokio::test]
    async fn a_savepoint_rolls_back_alone() {
        let (_dir, db) = file_db().await;
        let txn = db.begin().await.expect("begins");
        insert(&txn, "kept").await.expect("writes");
        let savepoint = crate::write::savepoint(&txn).await.expect("a savepoint");
        insert(&savepoint, "given up").await.expect("writes");
        drop(savepoint);
        crate::commit(txn).await.expect("commits");
        assert_eq!(count(&db, "t").await, 1);
    }

    /// A commit that fails answers its error, and nothing of the transaction remains.
    #[tokio::test]
    async fn a_failed_commit_reaches_the_caller_and_writes_nothing() {
        let (_dir, db) = file_db().await;
        db.execute_unprepared(
            "CREATE TABLE child (id INTEGER PRIMARY KEY, t_id INTEGER \
             REFERENCES t (id) DEFERRABLE INITIALLY DEFERRED)",
        )
        .await
        .expect("creates");
        let txn = db.begin().await.expect("begins");
        txn.execute_unprepared("INSERT INTO child (t_id) VALUES (42)")
            .await
            .expect("a deferred check passes until the commit");
        let failed = crate::commit(txn).await;
        assert!(
            failed
                .as_ref()
                .is_err_and(|e| e.to_string().contains("FOREIGN KEY")),
            "{failed:?}"
        );
        assert_eq!(count(&db, "child").await, 0, "rolled back");
        let txn = db.begin().await.expect("the connection is free again");
        crate::commit(txn).await.expect("commits");
    }

    /// Another connection's write lock is waited for, without blocking the runtime's thread,
    /// and the write goes through once it is let go.
    #[tokio::test]
    async fn another_connections_write_lock_is_waited_for() {
        let (dir, db) = file_db().await;
        let other = Connection::open(dir.path().join("t.db")).expect("opens");
        other
            .execute_batch("BEGIN IMMEDIATE; INSERT INTO t (v) VALUES ('other')")
            .expect("holds the write lock");
        let writer = tokio::spawn(async move { insert(&db, "mine").await.map(|()| db) });
        let_others_run().await;
        assert!(!writer.is_finished(), "the write waits");
        other.execute_batch("COMMIT").expect("lets go");
        let db = writer.await.expect("ran").expect("wrote");
        assert_eq!(count(&db, "t").await, 2);
    }

    /// A unique-key violation is recognised as one (sea-orm recognises only sqlx's).
    #[tokio::test]
    async fn a_unique_violation_is_recognised() {
        let (_dir, db) = file_db().await;
        db.execute_unprepared("INSERT INTO t (id, v) VALUES (1, 'a')")
            .await
            .expect("writes");
        let error = db
            .execute_unprepared("INSERT INTO t (id, v) VALUES (1, 'b')")
            .await
            .expect_err("refused");
        assert!(crate::error::is_unique_violation(&error), "{error}");
    }
}
