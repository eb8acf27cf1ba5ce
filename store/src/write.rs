//! Write transactions that wait for each other on SQLite instead of failing ([`begin_write`]),
//! and writes that do not read back what they wrote ([`put`]).
//!
//! A SQLite transaction begins deferred: its first read takes a snapshot, and its first write
//! must then upgrade to the write lock. If another connection (the worker's, while the API
//! writes) committed since the snapshot, SQLite refuses the upgrade at once, without waiting for
//! the busy timeout: a read-then-write transaction fails with "database is locked" (a 500 from
//! the API, a retried activity in the worker). Taking the write lock with the first statement
//! (what `BEGIN IMMEDIATE` does; sea-orm begins with a plain `BEGIN`) makes a concurrent writer
//! wait its turn instead. PostgreSQL needs nothing of the kind.

use crate::Error;
use sea_orm::{
    ActiveModelTrait, ConnectionTrait, DatabaseConnection, DatabaseTransaction, DbBackend,
    EntityTrait, IntoActiveModel, QueryTrait, TransactionTrait,
};

/// Begins a transaction that will write, holding SQLite's write lock from its first statement.
pub async fn begin_write(db: &DatabaseConnection) -> Result<DatabaseTransaction, Error> {
    let txn = db.begin().await?;
    if db.get_database_backend() == DbBackend::Sqlite {
        // A write that changes nothing: it takes the write lock, waiting for it as long as the
        // busy timeout allows.
        txn.execute_unprepared("UPDATE outbox_events SET seq = seq WHERE 1 = 0")
            .await?;
    }
    Ok(txn)
}

/// Writes `row`: inserts it when `new`, else updates its changed columns by primary key.
/// Unlike sea-orm's `insert` and `update`, it does not read the row back: on SQLite without
/// RETURNING that is a second statement, and either way every column is decoded again, receipts
/// and workload lists included, for callers that already have what they wrote.
///
/// Unlike sea-orm's `update` too, an update that matches no row is not an error: callers read
/// the row in the same transaction first (so it exists), which is what makes `new` right.
pub async fn put<A>(db: &impl ConnectionTrait, row: A, new: bool) -> Result<(), Error>
where
    A: ActiveModelTrait + Send,
    <A::Entity as EntityTrait>::Model: IntoActiveModel<A>,
{
    if new {
        A::Entity::insert(row).exec_without_returning(db).await?;
    } else {
        let update = A::Entity::update(row).build(db.get_database_backend());
        db.execute(update).await?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two connections of one SQLite file (two processes' pools): a read-then-write transaction whose snapshot another
    /// connection's commit outdated fails as deferred, and succeeds begun with `begin_write`.
    #[tokio::test]
    async fn a_writer_waits_for_another_instead_of_failing() {
        let dir = tempfile::tempdir().unwrap();
        let url = format!("sqlite://{}?mode=rwc", dir.path().join("w.db").display());
        let open = || async { crate::connect::open(&url).await.unwrap() };
        let (a, b) = (open().await, open().await);
        a.execute_unprepared("CREATE TABLE outbox_events (seq INTEGER PRIMARY KEY, v INTEGER)")
            .await
            .unwrap();
        a.execute_unprepared("INSERT INTO outbox_events VALUES (1, 1)")
            .await
            .unwrap();
        let b = &b;
        let read_then_write = |txn: DatabaseTransaction| async move {
            txn.execute_unprepared("SELECT v FROM outbox_events")
                .await?;
            b.execute_unprepared("UPDATE outbox_events SET v = v + 1")
                .await
                .ok();
            txn.execute_unprepared("UPDATE outbox_events SET v = 10")
                .await?;
            txn.commit().await
        };
        let deferred = read_then_write(a.begin().await.unwrap()).await;
        assert!(
            deferred.is_err(),
            "a deferred read-then-write fails: {deferred:?}"
        );
        // Begun for writing, the other connection's write is the one that waits (and, with
        // the lock held through the commit here, gives up); this transaction commits.
        let immediate = read_then_write(begin_write(&a).await.unwrap()).await;
        assert!(immediate.is_ok(), "{immediate:?}");
    }
}
