//! Durable counting semaphores held in the database: an environment's lock
//! (`environment/{tenant}/{env}`, one slot: one applying run at a time) and a project's
//! capacity (`capacity/{tenant}/{project}`, the quota's `concurrentRuns` slots).
//!
//! At most `slots` workflows hold a semaphore; the rest wait in arrival order. A take, a release
//! and the grants they make are one write transaction each (or part of the caller's: a run takes
//! its environment's lock and its capacity slot in one, [`take_in`]), one at a time per
//! semaphore (SQLite's write lock; on PostgreSQL the semaphore's row, which every take and
//! release writes first).
//! A waiter made holder is not told by this module: the caller signals it `granted` and marks
//! it [`told`]; until then every take and release of the semaphore names it again
//! ([`Settled::to_tell`]), so a grant lost with a killed worker is sent by the next one, and
//! the waiter reads its row again on a timer besides.
//!
//! A capacity semaphore's slots are its holders' capacity leases (`capacity_leases`, spec 003):
//! with [`Ask::leases`] a holder's lease is granted in the transaction that grants its slot and
//! released in the one that releases it, so the two never disagree and a run's lease costs no
//! write of its own.
//!
//! Before, each semaphore was a workflow of its own: a lock workflow started for every run,
//! and every ask and release a workflow task of the project's capacity semaphore. Those were
//! most of a run's cost on the Temporal server.

use crate::entities::semaphore_slots as slots;
use crate::entities::semaphores;
use crate::{Error, begin_write, capacity};
use chrono::Utc;
use sea_orm::sea_query::{Expr, OnConflict};
use sea_orm::{
    ColumnTrait, ConnectionTrait, DatabaseConnection, DatabaseTransaction, EntityTrait,
    QueryFilter, QueryOrder, QuerySelect, Set,
};

/// A workflow asking for a slot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ask<'a> {
    /// `environment/{tenant}/{env}` or `capacity/{tenant}/{project}`.
    pub semaphore_id: &'a str,
    pub tenant_id: &'a str,
    /// The workflow id that wants a slot.
    pub holder_id: &'a str,
    /// How many may hold the semaphore, as the asker reads it now: a quota changed while runs
    /// hold slots takes nothing back, it bounds the next grants.
    pub slots: u32,
    /// The slots are capacity leases: a holder's lease moves with its slot.
    pub leases: bool,
}

/// What a take answers.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Taken {
    /// The asker holds a slot (else it waits its turn).
    pub holds: bool,
    /// When the asker waits: the holders and the waiters before it, whose workflows it may
    /// check still exist (one terminated by hand never releases, nor leaves the queue).
    pub ahead: Vec<String>,
    /// Holders to signal `granted` (and then mark [`told`]).
    pub to_tell: Vec<String>,
}

/// A semaphore's holders and waiters, as tests and the soak's invariants read them.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Holders {
    pub slots: u32,
    /// Who holds it, in arrival order, with whether it was told.
    pub holders: Vec<(String, bool)>,
    /// Who waits, oldest first.
    pub queue: Vec<String>,
}

/// Takes a slot for `ask.holder_id` when one is free and nobody waits before it, else queues
/// it; asking again keeps its place (or its slot). Grants the waiters a raised limit frees.
pub async fn take(db: &DatabaseConnection, ask: Ask<'_>) -> Result<Taken, Error> {
    let txn = begin_write(db).await?;
    let taken = take_in(&txn, ask).await?;
    txn.commit().await?;
    Ok(taken)
}

/// [`take`] in the caller's write transaction (begun with [`begin_write`]): a run takes its
/// environment's lock and its project's capacity slot in one.
pub async fn take_in(txn: &DatabaseTransaction, ask: Ask<'_>) -> Result<Taken, Error> {
    // The upsert writes the semaphore's row first: on PostgreSQL it holds the row's lock
    // until commit, so takes and releases of one semaphore go one at a time.
    let limit = ask.slots.max(1);
    let row = semaphores::ActiveModel {
        id: Set(ask.semaphore_id.to_owned()),
        tenant_id: Set(ask.tenant_id.to_owned()),
        slots: Set(i32::try_from(limit).unwrap_or(i32::MAX)),
    };
    semaphores::Entity::insert(row)
        .on_conflict(
            OnConflict::column(semaphores::Column::Id)
                .update_column(semaphores::Column::Slots)
                .to_owned(),
        )
        .exec_without_returning(txn)
        .await?;
    let (mut rows, mut granted) = settle(txn, ask.semaphore_id, limit).await?;
    let mine = rows.iter().position(|r| r.holder_id == ask.holder_id);
    let holds = match mine {
        Some(i) if rows[i].holding => {
            // It asks again: it did not learn it holds (a lost answer or grant).
            if !rows[i].told {
                mark(txn, ask.semaphore_id, ask.holder_id).await?;
                rows[i].told = true;
            }
            true
        }
        Some(_) => false,
        None => {
            let held = rows.iter().filter(|r| r.holding).count();
            let waits = rows.iter().any(|r| !r.holding);
            let holds = held < limit as usize && !waits;
            let arrived = rows.iter().map(|r| r.arrived).max().unwrap_or(0) + 1;
            let row = slots::Model {
                semaphore_id: ask.semaphore_id.to_owned(),
                holder_id: ask.holder_id.to_owned(),
                holding: holds,
                told: holds,
                arrived,
            };
            slots::Entity::insert(slots::ActiveModel::from(row.clone()))
                .exec_without_returning(txn)
                .await?;
            rows.push(row);
            holds
        }
    };
    if ask.leases {
        // Asked again while holding: its lease may still say waiting (a lost answer).
        if holds {
            granted.push(ask.holder_id.to_owned());
        }
        capacity::grant_leases(txn, &granted, Utc::now()).await?;
    }
    let ahead = if holds {
        Vec::new()
    } else {
        let mine = rows.iter().find(|r| r.holder_id == ask.holder_id);
        let arrived = mine.map_or(i64::MAX, |r| r.arrived);
        rows.iter()
            .filter(|r| r.holding || r.arrived < arrived)
            .map(|r| r.holder_id.clone())
            .collect()
    };
    Ok(Taken {
        holds,
        ahead,
        to_tell: untold(&rows),
    })
}

/// Lets `holder_id` go: its slot (which goes to the oldest waiters) or its place in the queue,
/// with its lease when the slots are `leases`. Also drops a holder that no longer exists.
/// Answers the holders to signal `granted`.
pub async fn release(
    db: &DatabaseConnection,
    semaphore_id: &str,
    holder_id: &str,
    leases: bool,
) -> Result<Vec<String>, Error> {
    let txn = begin_write(db).await?;
    let letting = Letting {
        semaphore_id,
        holder_id,
        leases,
    };
    let to_tell = release_in(&txn, letting).await?;
    txn.commit().await?;
    Ok(to_tell)
}

/// A slot (or a place in the queue) a holder lets go.
#[derive(Debug, Clone, Copy)]
pub struct Letting<'a> {
    pub semaphore_id: &'a str,
    pub holder_id: &'a str,
    /// The slots are a project's capacity: the holder's lease is released with its slot.
    pub leases: bool,
}

/// [`release`] in the caller's write transaction (begun with [`begin_write`]).
pub async fn release_in(
    txn: &DatabaseTransaction,
    letting: Letting<'_>,
) -> Result<Vec<String>, Error> {
    let Letting {
        semaphore_id,
        holder_id,
        leases,
    } = letting;
    // Writes the semaphore's row first, as a take does (see there), and reads its limit back
    // in the same statement.
    let touched = semaphores::Entity::update_many()
        .col_expr(
            semaphores::Column::Slots,
            Expr::col(semaphores::Column::Slots).into(),
        )
        .filter(semaphores::Column::Id.eq(semaphore_id))
        .exec_with_returning(txn)
        .await?;
    let Some(limit) = touched.first().map(|sem| sem.slots) else {
        return Ok(Vec::new());
    };
    slots::Entity::delete_many()
        .filter(slots::Column::SemaphoreId.eq(semaphore_id))
        .filter(slots::Column::HolderId.eq(holder_id))
        .exec(txn)
        .await?;
    let (rows, granted) = settle(txn, semaphore_id, u32::try_from(limit).unwrap_or(1)).await?;
    if leases {
        let now = Utc::now();
        capacity::release_leases(txn, holder_id, now).await?;
        capacity::grant_leases(txn, &granted, now).await?;
    }
    Ok(untold(&rows))
}

/// `holder_id` was signalled its grant: it knows it holds its slot.
pub async fn told(
    db: &impl ConnectionTrait,
    semaphore_id: &str,
    holder_id: &str,
) -> Result<(), Error> {
    mark(db, semaphore_id, holder_id).await
}

/// Who holds `semaphore_id` and who waits; none when nobody ever took it.
pub async fn holders(
    db: &impl ConnectionTrait,
    semaphore_id: &str,
) -> Result<Option<Holders>, Error> {
    let Some(sem) = semaphores::Entity::find_by_id(semaphore_id).one(db).await? else {
        return Ok(None);
    };
    let rows = in_arrival_order(db, semaphore_id).await?;
    let (held, waiting): (Vec<_>, Vec<_>) = rows.into_iter().partition(|r| r.holding);
    Ok(Some(Holders {
        slots: u32::try_from(sem.slots).unwrap_or(1),
        holders: held.into_iter().map(|r| (r.holder_id, r.told)).collect(),
        queue: waiting.into_iter().map(|r| r.holder_id).collect(),
    }))
}

/// The semaphores `holder_id` holds or waits for (the soak's invariants).
pub async fn of_holder(db: &impl ConnectionTrait, holder_id: &str) -> Result<Vec<String>, Error> {
    Ok(slots::Entity::find()
        .select_only()
        .column(slots::Column::SemaphoreId)
        .filter(slots::Column::HolderId.eq(holder_id))
        .into_tuple()
        .all(db)
        .await?)
}

/// Grants free slots (of `limit`) to the oldest waiters; answers every row, arrival order, and
/// the waiters it granted.
async fn settle(
    txn: &impl ConnectionTrait,
    semaphore_id: &str,
    limit: u32,
) -> Result<(Vec<slots::Model>, Vec<String>), Error> {
    let mut rows = in_arrival_order(txn, semaphore_id).await?;
    let held = rows.iter().filter(|r| r.holding).count();
    let free = (limit as usize).saturating_sub(held);
    let mut promoted = Vec::new();
    for row in rows.iter_mut().filter(|r| !r.holding).take(free) {
        row.holding = true;
        row.told = false;
        promoted.push(row.holder_id.clone());
    }
    if !promoted.is_empty() {
        slots::Entity::update_many()
            .col_expr(slots::Column::Holding, true.into())
            .col_expr(slots::Column::Told, false.into())
            .filter(slots::Column::SemaphoreId.eq(semaphore_id))
            .filter(slots::Column::HolderId.is_in(promoted.clone()))
            .exec(txn)
            .await?;
    }
    Ok((rows, promoted))
}

async fn in_arrival_order(
    db: &impl ConnectionTrait,
    semaphore_id: &str,
) -> Result<Vec<slots::Model>, Error> {
    Ok(slots::Entity::find()
        .filter(slots::Column::SemaphoreId.eq(semaphore_id))
        .order_by_asc(slots::Column::Arrived)
        .all(db)
        .await?)
}

async fn mark(db: &impl ConnectionTrait, semaphore_id: &str, holder_id: &str) -> Result<(), Error> {
    slots::Entity::update_many()
        .col_expr(slots::Column::Told, true.into())
        .filter(slots::Column::SemaphoreId.eq(semaphore_id))
        .filter(slots::Column::HolderId.eq(holder_id))
        .filter(slots::Column::Holding.eq(true))
        .exec(db)
        .await?;
    Ok(())
}

fn untold(rows: &[slots::Model]) -> Vec<String> {
    rows.iter()
        .filter(|r| r.holding && !r.told)
        .map(|r| r.holder_id.clone())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures;

    fn ask<'a>(holder: &'a str, slots: u32) -> Ask<'a> {
        Ask {
            semaphore_id: "capacity/acme/shop",
            tenant_id: "acme",
            holder_id: holder,
            slots,
            leases: false,
        }
    }

    async fn a_semaphore_grants_free_slots_in_arrival_order_on(db: DatabaseConnection) {
        let sem = "capacity/acme/shop";
        let r1 = take(&db, ask("r1", 2)).await.unwrap();
        assert!(r1.holds && r1.to_tell.is_empty());
        assert!(take(&db, ask("r2", 2)).await.unwrap().holds, "a free slot");
        let r3 = take(&db, ask("r3", 2)).await.unwrap();
        assert!(!r3.holds, "full: r3 waits");
        assert_eq!(r3.ahead, ["r1", "r2"], "a waiter may check the holders");
        let r4 = take(&db, ask("r4", 2)).await.unwrap();
        assert!(!r4.holds);
        assert_eq!(r4.ahead, ["r1", "r2", "r3"], "and the waiters before it");
        assert!(
            !take(&db, ask("r3", 2)).await.unwrap().holds,
            "asking again: still waiting"
        );

        // r1 leaves: its slot is r3's (the oldest waiter), not a newcomer's.
        assert_eq!(release(&db, sem, "r1", false).await.unwrap(), ["r3"]);
        let r5 = take(&db, ask("r5", 2)).await.unwrap();
        assert!(!r5.holds, "r4 waits before it");
        assert_eq!(r5.to_tell, ["r3"], "r3 not told yet: named again");
        told(&db, sem, "r3").await.unwrap();
        assert!(release(&db, sem, "nobody", false).await.unwrap().is_empty());

        // A waiter leaving (it gave up) frees nothing; a raised limit grants at once.
        assert!(release(&db, sem, "r4", false).await.unwrap().is_empty());
        let r6 = take(&db, ask("r6", 4)).await.unwrap();
        assert!(r6.holds, "the limit raised grants r5, then r6 holds");
        assert_eq!(r6.to_tell, ["r5"]);
        let state = holders(&db, sem).await.unwrap().unwrap();
        assert_eq!(state.slots, 4);
        assert_eq!(
            state.holders,
            [
                ("r2".to_owned(), true),
                ("r3".to_owned(), true),
                ("r5".to_owned(), false),
                ("r6".to_owned(), true)
            ]
        );
        assert!(state.queue.is_empty());

        // A holder that lost its grant and asks again learns it holds.
        assert!(take(&db, ask("r5", 4)).await.unwrap().holds);
        assert!(
            holders(&db, sem)
                .await
                .unwrap()
                .unwrap()
                .holders
                .iter()
                .all(|h| h.1)
        );
        assert_eq!(of_holder(&db, "r5").await.unwrap(), [sem]);
        assert_eq!(holders(&db, "environment/acme/none").await.unwrap(), None);
    }

    fixtures::on_both_databases!(
        a_semaphore_grants_free_slots_in_arrival_order_sqlite,
        a_semaphore_grants_free_slots_in_arrival_order_postgres,
        a_semaphore_grants_free_slots_in_arrival_order_on
    );

    /// Takers and releasers at once never hold more than the slots, and every waiter is
    /// granted once the holders go.
    async fn takers_at_once_never_hold_more_than_the_slots_on(db: DatabaseConnection) {
        let sem = "capacity/acme/shop";
        let names: Vec<String> = (0..16).map(|i| format!("r{i:02}")).collect();
        let takes = names.iter().map(|n| {
            let db = db.clone();
            async move { take(&db, ask(n, 3)).await.unwrap().holds }
        });
        let held = futures::future::join_all(takes).await;
        assert_eq!(held.iter().filter(|h| **h).count(), 3);
        let state = holders(&db, sem).await.unwrap().unwrap();
        assert_eq!((state.holders.len(), state.queue.len()), (3, 13));
        // Everyone leaves, holders and waiters at once, in any order.
        let releases = names.iter().map(|n| {
            let db = db.clone();
            async move { release(&db, sem, n, false).await.unwrap() }
        });
        futures::future::join_all(releases).await;
        let state = holders(&db, sem).await.unwrap().unwrap();
        assert!(
            state.holders.is_empty() && state.queue.is_empty(),
            "{state:?}"
        );
    }

    fixtures::on_both_databases!(
        takers_at_once_never_hold_more_than_the_slots_sqlite,
        takers_at_once_never_hold_more_than_the_slots_postgres,
        takers_at_once_never_hold_more_than_the_slots_on
    );

    /// Two takes in one transaction (a run's lock and its capacity slot) stand or fall
    /// together: rolled back, neither semaphore holds the run; committed, both do, and a
    /// release reads the limit its take wrote.
    async fn takes_in_one_transaction_stand_or_fall_together_on(db: DatabaseConnection) {
        let (lock, capacity) = ("environment/acme/dev", "capacity/acme/shop");
        let conn = &db;
        async fn take_on(txn: &DatabaseTransaction, sem: &str, holder: &str, slots: u32) -> Taken {
            let ask = Ask {
                semaphore_id: sem,
                ..ask(holder, slots)
            };
            take_in(txn, ask).await.unwrap()
        }
        let both = |holder: &'static str| async move {
            let txn = begin_write(conn).await.unwrap();
            let lock = take_on(&txn, lock, holder, 1).await;
            let slot = take_on(&txn, capacity, holder, 2).await;
            (txn, lock, slot)
        };
        let (txn, lock_taken, slot_taken) = both("r1").await;
        assert!(lock_taken.holds && slot_taken.holds);
        txn.rollback().await.unwrap();
        assert_eq!(
            holders(&db, lock).await.unwrap(),
            None,
            "nothing half-written"
        );
        assert_eq!(holders(&db, capacity).await.unwrap(), None);

        let (txn, ..) = both("r1").await;
        txn.commit().await.unwrap();
        assert_eq!(of_holder(&db, "r1").await.unwrap().len(), 2);
        let (txn, lock_taken, _) = both("r2").await;
        assert!(!lock_taken.holds, "one slot: r2 waits for the lock");
        txn.commit().await.unwrap();
        assert_eq!(release(&db, lock, "r1", false).await.unwrap(), ["r2"]);
        let state = holders(&db, capacity).await.unwrap().unwrap();
        assert_eq!((state.slots, state.holders.len()), (2, 2));
    }

    fixtures::on_both_databases!(
        takes_in_one_transaction_stand_or_fall_together_sqlite,
        takes_in_one_transaction_stand_or_fall_together_postgres,
        takes_in_one_transaction_stand_or_fall_together_on
    );
}
