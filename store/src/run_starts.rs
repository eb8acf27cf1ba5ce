//! `run_starts`: runs the API wrote whose workflow may not have started yet.
//!
//! A run's row and its workflow live in two systems, so no single write makes both. The API
//! writes the row and its start here in one transaction ([`accept`]), then starts the workflow
//! and forgets the start ([`started`]); a start Temporal refused takes the run back
//! ([`withdraw`]). A process killed between the two, or a withdrawal the database refused,
//! leaves the start here: the API's starter starts what is older than a grace period
//! ([`due`]) — a start is idempotent by the workflow's id — so no run's row is left without its
//! workflow, and a client that sends the same `Idempotency-Key` again has it started at once
//! ([`pending`]).
//!
//! Admission: a run accepted while its project's `concurrentRuns` are all in flight (or behind
//! runs deferred before it) is written with its start *deferred* and a `waiting` capacity
//! lease, and shows `waitingForCapacity`; no workflow is started for it, so a tenant's flood
//! costs the workflow service nothing past its quota and other tenants' runs do not queue
//! behind it there. When a lease of the project is released or expires (and on every round of
//! the API's starter, and when a quota changes) the oldest deferred starts that fit the free
//! slots are started ([`admit`], one admitter at a time). Admission only saves work: the project's capacity
//! semaphore still bounds the runs that start, so a start admitted early waits there.

use crate::capacity::{self, NewLease};
use crate::decode::{At, to_json};
use crate::entities::run_starts as rows;
use crate::runs::{self, NewRun};
use crate::{Error, begin_write};
use chrono::{DateTime, Utc};
use runtime_cloud_models::RunInput;
use runtime_cloud_models::capacity::{
    CapacityWait, admissible as slots_free, backlog_share, defers_start,
};
use runtime_cloud_models::options::ProvisioningOptions;
use sea_orm::sea_query::Expr;
use sea_orm::{
    ActiveModelTrait, ActiveValue::Set, ColumnTrait, ConnectionTrait, DbBackend, EntityTrait,
    PaginatorTrait, QueryFilter, QueryOrder, QuerySelect,
};
use std::collections::HashSet;

const TABLE: &str = "run_starts";

/// What deferring a run's start takes: the quota in force, and the lease and the wait the run
/// shows while deferred.
#[derive(Debug, Clone)]
pub struct Admission {
    /// The project's `concurrentRuns`.
    pub concurrent_runs: u32,
    /// Recorded `waiting` for a deferred run; the run asks for it once started.
    pub lease: NewLease,
    /// What a deferred run shows as `waitingForCapacity`.
    pub wait: CapacityWait,
}

/// What [`accept`] wrote.
#[derive(Debug, Clone, PartialEq)]
pub struct Accepted {
    /// The workflow's input.
    pub input: RunInput,
    /// The start is deferred until the project has a free slot: nothing to start now.
    pub deferred: bool,
}

/// Writes the run's row and its start in one transaction and returns the workflow's input.
/// With an `admission`, the start is deferred when the project's runs in flight fill its
/// quota or runs were deferred before it ([`defers_start`]). [`Error::Duplicate`] when a run
/// with this id or `Idempotency-Key` exists.
pub async fn accept(
    db: &sea_orm::DatabaseConnection,
    new: &NewRun<'_>,
    options: &ProvisioningOptions,
    admission: Option<&Admission>,
) -> Result<Accepted, Error> {
    let txn = begin_write(db).await?;
    let mut input = new.input(options);
    let (tenant, project) = (&input.tenant_id, &input.project_id);
    let deferral = match admission {
        Some(a) => {
            let in_flight = runs::in_flight(&txn, tenant, project).await?;
            let earlier = deferred_count(&txn, tenant, project).await?;
            defers_start(in_flight, earlier, a.concurrent_runs).then_some(a)
        }
        None => None,
    };
    runs::insert(&txn, new, deferral.map(|a| &a.wait)).await?;
    let now = Utc::now();
    if let Some(a) = deferral {
        capacity::request_lease(&txn, a.lease.clone(), now).await?;
        input.lease_id = Some(a.lease.lease_id.clone());
    }
    rows::ActiveModel {
        provisioning_run_id: Set(input.run_id.clone()),
        tenant_id: Set(input.tenant_id.clone()),
        input: Set(to_json(&input)?),
        accepted_at: Set(now),
        project_id: Set(Some(input.project_id.clone())),
        deferred: Set(deferral.is_some()),
    }
    .insert(&txn)
    .await
    .map_err(Error::on_insert(TABLE))?;
    txn.commit().await?;
    Ok(Accepted {
        input,
        deferred: deferral.is_some(),
    })
}

/// How many starts of the tenant's project are deferred.
async fn deferred_count(
    db: &impl ConnectionTrait,
    tenant_id: &str,
    project_id: &str,
) -> Result<u64, Error> {
    Ok(deferred_of(tenant_id, project_id).count(db).await?)
}

fn deferred_of(tenant_id: &str, project_id: &str) -> sea_orm::Select<rows::Entity> {
    rows::Entity::find()
        .filter(rows::Column::Deferred.eq(true))
        .filter(rows::Column::TenantId.eq(tenant_id))
        .filter(rows::Column::ProjectId.eq(project_id))
}

/// Admits the deferred starts that may start now ([`admissible`]), of the project `only` or
/// of every project with a backlog: marks them no longer deferred and returns them, oldest
/// first per project. The caller starts their workflows and forgets each start ([`started`]);
/// a caller that dies first leaves them to the API's starter ([`due`]), as any start accepted
/// and not yet made.
///
/// Admitters run at once (every lease release admits, and so does the API's starter), and
/// each counts the free slots from the deferred starts and the leases held: one that counted
/// while another was between choosing its runs and forgetting their starts counted a chosen
/// run's lease as a started run's *and* the run as still deferred, and admitted one run too
/// many (a CI run saw a backlog fill the share another tenant's work left it, and more). So
/// admission counts and marks in one write transaction, one admitter at a time: SQLite's
/// write lock does that, on PostgreSQL a transaction-scoped advisory lock. One lock for every
/// project, not one per project: a project's share depends on the other tenants' backlogs.
pub async fn admit(
    db: &sea_orm::DatabaseConnection,
    only: Option<(&str, &str)>,
) -> Result<Vec<RunInput>, Error> {
    // Most releases find no backlog: a read says so without taking the write lock. A start
    // deferred just after it is admitted by the next release or the starter's next round.
    let mut any = rows::Entity::find().filter(rows::Column::Deferred.eq(true));
    if let Some((tenant_id, project_id)) = only {
        any = deferred_of(tenant_id, project_id);
    }
    if any.limit(1).one(db).await?.is_none() {
        return Ok(Vec::new());
    }
    let txn = begin_write(db).await?;
    if txn.get_database_backend() == DbBackend::Postgres {
        txn.execute_unprepared(&format!("SELECT pg_advisory_xact_lock({ADMISSION_LOCK})"))
            .await?;
    }
    let backlogs = deferring_projects(&txn).await?;
    let mut admitted = Vec::new();
    if !backlogs.is_empty() {
        let working = tenants_at_work(&txn, &backlogs).await?;
        for (tenant, project) in &backlogs {
            if only.is_none_or(|only| only == (tenant.as_str(), project.as_str())) {
                admitted.extend(admissible(&txn, tenant, project, working).await?);
            }
        }
    }
    if !admitted.is_empty() {
        rows::Entity::update_many()
            .col_expr(rows::Column::Deferred, Expr::value(false))
            .filter(
                rows::Column::ProvisioningRunId.is_in(admitted.iter().map(|i| i.run_id.clone())),
            )
            .exec(&txn)
            .await?;
    }
    txn.commit().await?;
    Ok(admitted)
}

/// The advisory lock admitters take on PostgreSQL ([`admit`]). The key: the number of the
/// migration that creates `run_starts` (as the metrics fold's is its migration's), so no other
/// lock takes it by chance.
const ADMISSION_LOCK: i64 = 2026120600003;

/// The deferred starts of the tenant's project that may start now, oldest first: as many as
/// its share of its quota ([`backlog_share`] with the `working` tenants without a backlog: all
/// of it when there are none) has slots not held by runs that started ([`slots_free`]).
async fn admissible(
    db: &impl ConnectionTrait,
    tenant_id: &str,
    project_id: &str,
    working: u64,
) -> Result<Vec<RunInput>, Error> {
    let deferred = deferred_count(db, tenant_id, project_id).await?;
    if deferred == 0 {
        return Ok(Vec::new());
    }
    let quota = capacity::quota(db, tenant_id, project_id).await?;
    let held = capacity::held_leases(db, tenant_id, project_id).await?;
    let share = backlog_share(quota.limits.concurrent_runs, working);
    let free = slots_free(held, deferred, share);
    if free == 0 {
        return Ok(Vec::new());
    }
    deferred_of(tenant_id, project_id)
        .order_by_asc(rows::Column::AcceptedAt)
        .order_by_asc(rows::Column::ProvisioningRunId)
        .limit(free)
        .all(db)
        .await?
        .into_iter()
        .map(read)
        .collect()
}

/// How many tenants have runs at work and no backlog (none of the `backlogs`' tenants): a
/// granted lease whose run is not idle ([`runs::idle_among`]: waiting for an approval or a
/// change window, which may take days and costs nothing). These are the tenants a backlog
/// shares its quota with ([`backlog_share`]).
async fn tenants_at_work(
    db: &impl ConnectionTrait,
    backlogs: &[(String, String)],
) -> Result<u64, Error> {
    let backlogged: HashSet<&str> = backlogs.iter().map(|(tenant, _)| tenant.as_str()).collect();
    let granted: Vec<(String, String)> = capacity::granted(db)
        .await?
        .into_iter()
        .filter(|(tenant, _)| !backlogged.contains(tenant.as_str()))
        .collect();
    if granted.is_empty() {
        return Ok(0);
    }
    let run_ids: Vec<String> = granted.iter().map(|(_, run)| run.clone()).collect();
    let idle = runs::idle_among(db, &run_ids).await?;
    let at_work: HashSet<&str> = granted
        .iter()
        .filter(|(_, run)| !idle.contains(run))
        .map(|(tenant, _)| tenant.as_str())
        .collect();
    Ok(at_work.len() as u64)
}

/// The (tenant, project) pairs with deferred starts.
pub async fn deferring_projects(db: &impl ConnectionTrait) -> Result<Vec<(String, String)>, Error> {
    let pairs: Vec<(String, String)> = rows::Entity::find()
        .select_only()
        .column(rows::Column::TenantId)
        .column(rows::Column::ProjectId)
        .filter(rows::Column::Deferred.eq(true))
        .distinct()
        .into_tuple()
        .all(db)
        .await?;
    Ok(pairs)
}

/// The run's workflow started: nothing is left to start.
pub async fn started(db: &impl ConnectionTrait, run_id: &str) -> Result<(), Error> {
    rows::Entity::delete_by_id(run_id.to_owned())
        .exec(db)
        .await?;
    Ok(())
}

/// Takes back a run whose workflow could not be started: its row and its start go together.
pub async fn withdraw(
    db: &sea_orm::DatabaseConnection,
    tenant_id: &str,
    run_id: &str,
) -> Result<(), Error> {
    let txn = begin_write(db).await?;
    started(&txn, run_id).await?;
    runs::delete(&txn, tenant_id, run_id).await?;
    txn.commit().await?;
    Ok(())
}

/// A run whose workflow may not have started.
#[derive(Debug, Clone, PartialEq)]
pub struct Pending {
    /// The workflow's input.
    pub input: RunInput,
    /// When the request wrote the run: until [`RUN_START_IN_FLIGHT`] after, it may still be
    /// starting it, or about to take it back.
    ///
    /// [`RUN_START_IN_FLIGHT`]: runtime_cloud_models::options::RUN_START_IN_FLIGHT
    pub accepted_at: DateTime<Utc>,
    /// Deferred until its project has a free slot: nobody is starting it.
    pub deferred: bool,
}

/// The tenant's run `run_id`, when its workflow may not have started.
pub async fn pending(
    db: &impl ConnectionTrait,
    tenant_id: &str,
    run_id: &str,
) -> Result<Option<Pending>, Error> {
    let Some(row) = rows::Entity::find_by_id(run_id.to_owned())
        .filter(rows::Column::TenantId.eq(tenant_id))
        .one(db)
        .await?
    else {
        return Ok(None);
    };
    let (accepted_at, deferred) = (row.accepted_at, row.deferred);
    Ok(Some(Pending {
        input: read(row)?,
        accepted_at,
        deferred,
    }))
}

/// Run `run_id`'s input, when its workflow may not have started: its start is deferred, or
/// admitted ([`admit`]) or accepted and not made yet (its caller checked the run's tenant).
pub async fn unstarted(db: &impl ConnectionTrait, run_id: &str) -> Result<Option<RunInput>, Error> {
    rows::Entity::find_by_id(run_id.to_owned())
        .one(db)
        .await?
        .map(read)
        .transpose()
}

/// Up to `limit` starts accepted before `before` and not deferred, oldest first: their
/// requests are over, so their workflows are started by nobody else.
pub async fn due(
    db: &impl ConnectionTrait,
    before: DateTime<Utc>,
    limit: u64,
) -> Result<Vec<RunInput>, Error> {
    rows::Entity::find()
        .filter(rows::Column::AcceptedAt.lt(before))
        .filter(rows::Column::Deferred.eq(false))
        .order_by_asc(rows::Column::AcceptedAt)
        .limit(limit)
        .all(db)
        .await?
        .into_iter()
        .map(read)
        .collect()
}

fn read(row: rows::Model) -> Result<RunInput, Error> {
    let at = At {
        table: TABLE,
        row: &row.provisioning_run_id,
    };
    at.json("input", &row.input)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures::{self, declaration, workload};
    use crate::specifications;
    use runtime_cloud_models::EnvironmentClass;

    #[tokio::test]
    async fn a_start_is_pending_until_started_and_withdrawn_with_its_run() {
        let db = fixtures::sqlite().await;
        let env = fixtures::environment(&db, "dev", EnvironmentClass::NonProduction).await;
        let spec =
            specifications::declare(&db, &declaration("dev", vec![workload("api", "1.0.0", 2)]))
                .await
                .unwrap();
        let options = ProvisioningOptions::default();
        let new = |id: &'static str| fixtures::new_run(id, &env, &spec);
        let input = accept(&db, &new("r1"), &options, None).await.unwrap().input;
        accept(&db, &new("r2"), &options, None).await.unwrap();
        let err = accept(&db, &new("r1"), &options, None).await.unwrap_err();
        assert!(matches!(err, Error::Duplicate { .. }), "{err:?}");

        let found = pending(&db, "acme", "r1").await.unwrap().expect("pending");
        assert_eq!(found.input, input);
        assert!(found.accepted_at <= Utc::now());
        assert_eq!(
            pending(&db, "other", "r1").await.unwrap(),
            None,
            "another tenant's"
        );
        let later = Utc::now() + chrono::Duration::seconds(1);
        let ids = |due: Vec<RunInput>| due.into_iter().map(|i| i.run_id).collect::<Vec<_>>();
        assert_eq!(ids(due(&db, later, 10).await.unwrap()), ["r1", "r2"]);
        assert_eq!(ids(due(&db, later, 1).await.unwrap()), ["r1"]);
        let earlier = Utc::now() - chrono::Duration::seconds(60);
        assert!(
            due(&db, earlier, 10).await.unwrap().is_empty(),
            "still in its request"
        );

        started(&db, "r1").await.unwrap();
        assert_eq!(pending(&db, "acme", "r1").await.unwrap(), None);
        assert!(
            runs::find(&db, "acme", "r1").await.unwrap().is_some(),
            "the run stays"
        );

        withdraw(&db, "acme", "r2").await.unwrap();
        assert_eq!(pending(&db, "acme", "r2").await.unwrap(), None);
        assert!(
            runs::find(&db, "acme", "r2").await.unwrap().is_none(),
            "taken back"
        );
        assert!(due(&db, later, 10).await.unwrap().is_empty());
    }

    /// A deferred run's lease and wait, as the API records them.
    fn admission(run: &str, concurrent_runs: u32) -> Admission {
        Admission {
            concurrent_runs,
            lease: NewLease {
                lease_id: format!("lease-{run}"),
                tenant_id: "acme".into(),
                project_id: "shop".into(),
                run_id: run.into(),
                attempt_id: String::new(),
                holder_kind: "provisioning-run".into(),
                holder_id: format!("provisioning-run/{run}"),
                pool_id: "default".into(),
                cpu: 1.0,
                memory_gb: 2.0,
            },
            wait: CapacityWait::quota_full(
                "shop",
                concurrent_runs,
                "manual".into(),
                None,
                Utc::now(),
            ),
        }
    }

    /// Environment `dev` of acme's project `shop`, whose quota is `concurrent_runs`, with a
    /// declared specification.
    async fn shop_with_quota(
        db: &sea_orm::DatabaseConnection,
        concurrent_runs: u32,
    ) -> (
        crate::environments::Environment,
        specifications::Specification,
    ) {
        use runtime_cloud_models::capacity::QuotaLimits;
        let env = fixtures::environment(db, "dev", EnvironmentClass::NonProduction).await;
        let spec =
            specifications::declare(db, &declaration("dev", vec![workload("api", "1.0.0", 2)]))
                .await
                .unwrap();
        let limits = QuotaLimits {
            concurrent_runs,
            ..QuotaLimits::default()
        };
        capacity::set_quota(db, "acme", "shop", &limits, "manual", "admin")
            .await
            .unwrap();
        (env, spec)
    }

    async fn starts_over_the_quota_are_deferred_and_admitted_oldest_first_on(
        db: sea_orm::DatabaseConnection,
    ) {
        use runtime_cloud_models::capacity::LeaseState;
        let (env, spec) = shop_with_quota(&db, 1).await;
        let options = ProvisioningOptions::default();
        let mut verdicts = Vec::new();
        for run in ["r1", "r2", "r3", "r4"] {
            let new = fixtures::new_run(run, &env, &spec);
            let accepted = accept(&db, &new, &options, Some(&admission(run, 1)))
                .await
                .unwrap();
            verdicts.push(accepted.deferred);
            assert_eq!(
                accepted.input.lease_id.is_some(),
                accepted.deferred,
                "{run}: a deferred run asks for the lease recorded with it"
            );
        }
        assert_eq!(
            verdicts,
            [false, false, true, true],
            "one holds the slot, one waits for it, the rest are deferred"
        );
        let r3 = runs::find(&db, "acme", "r3").await.unwrap().expect("r3");
        assert!(r3.waiting_for_capacity.is_some(), "a deferred run says why");
        let r1 = runs::find(&db, "acme", "r1").await.unwrap().expect("r1");
        assert!(r1.waiting_for_capacity.is_none());
        assert_eq!(
            deferring_projects(&db).await.unwrap(),
            [("acme".to_owned(), "shop".to_owned())]
        );
        assert!(unstarted(&db, "r4").await.unwrap().is_some(), "deferred");
        assert!(
            unstarted(&db, "r1").await.unwrap().is_some(),
            "not started yet"
        );
        let later = Utc::now() + chrono::Duration::seconds(1);
        let ids = |inputs: Vec<RunInput>| inputs.into_iter().map(|i| i.run_id).collect::<Vec<_>>();
        assert_eq!(
            ids(due(&db, later, 10).await.unwrap()),
            ["r1", "r2"],
            "not the deferred"
        );

        // r1 holds the slot, r2 waits for it: nothing to admit.
        started(&db, "r1").await.unwrap();
        started(&db, "r2").await.unwrap();
        assert!(unstarted(&db, "r1").await.unwrap().is_none());
        let at = Utc::now();
        let mut r1_lease = admission("r1", 1).lease;
        r1_lease.attempt_id = "attempt-1".into();
        capacity::request_lease(&db, r1_lease, at).await.unwrap();
        capacity::move_lease(&db, "lease-r1", LeaseState::Granted, at)
            .await
            .unwrap();
        capacity::request_lease(&db, admission("r2", 1).lease, at)
            .await
            .unwrap();
        assert!(admit(&db, Some(("acme", "shop"))).await.unwrap().is_empty());

        // r1 ends: r2 takes the slot, r3 may wait for it, r4 may not yet.
        capacity::move_lease(&db, "lease-r1", LeaseState::Released, at)
            .await
            .unwrap();
        capacity::move_lease(&db, "lease-r2", LeaseState::Granted, at)
            .await
            .unwrap();
        assert_eq!(
            ids(admit(&db, Some(("acme", "shop"))).await.unwrap()),
            ["r3"]
        );
        assert!(
            unstarted(&db, "r3").await.unwrap().is_some(),
            "admitted, not started yet"
        );
        assert_eq!(
            ids(due(&db, later, 10).await.unwrap()),
            ["r3"],
            "the starter starts it should its admitter not"
        );
        assert!(
            admit(&db, Some(("acme", "shop"))).await.unwrap().is_empty(),
            "r3 waits, not started yet: admitted once"
        );
        started(&db, "r3").await.unwrap();
        assert!(
            admit(&db, Some(("acme", "shop"))).await.unwrap().is_empty(),
            "r3 waits"
        );
        // Its workflow asks for the lease recorded with it: one lease, its attempt filled in.
        let mut asked = admission("r3", 1).lease;
        asked.attempt_id = "attempt-3".into();
        capacity::request_lease(&db, asked, at).await.unwrap();
        let page = crate::Page {
            after: None,
            rows: 10,
        };
        let r3_leases = capacity::leases(&db, "acme", None, Some("r3"), &page)
            .await
            .unwrap();
        assert_eq!(r3_leases.len(), 1);
        assert_eq!(r3_leases[0].attempt_id, "attempt-3");
        assert_eq!(r3_leases[0].state, LeaseState::Waiting);
    }

    fixtures::on_both_databases!(
        starts_over_the_quota_are_deferred_and_admitted_oldest_first_sqlite,
        starts_over_the_quota_are_deferred_and_admitted_oldest_first_postgres,
        starts_over_the_quota_are_deferred_and_admitted_oldest_first_on
    );

    /// Admitters at once (every release admits) admit each free slot once between them.
    async fn admitters_at_once_admit_each_slot_once_on(db: sea_orm::DatabaseConnection) {
        use runtime_cloud_models::capacity::LeaseState;
        let (env, spec) = shop_with_quota(&db, 4).await;
        let options = ProvisioningOptions::default();
        let runs: Vec<String> = (1..=12).map(|i| format!("r{i:02}")).collect();
        for run in &runs {
            let new = fixtures::new_run(run, &env, &spec);
            accept(&db, &new, &options, Some(&admission(run, 4)))
                .await
                .unwrap();
        }
        // Five started (the quota and its waiter); three of them hold a granted lease.
        let at = Utc::now();
        for run in &runs[..5] {
            started(&db, run).await.unwrap();
        }
        for run in &runs[..3] {
            capacity::request_lease(&db, admission(run, 4).lease, at)
                .await
                .unwrap();
            capacity::move_lease(&db, &format!("lease-{run}"), LeaseState::Granted, at)
                .await
                .unwrap();
        }
        // Free: the quota's four and the waiter, less the three: two of the seven deferred.
        let admitters = (0..8).map(|_| {
            let db = db.clone();
            async move { admit(&db, Some(("acme", "shop"))).await.unwrap() }
        });
        let mut admitted: Vec<String> = futures::future::join_all(admitters)
            .await
            .into_iter()
            .flatten()
            .map(|input| input.run_id)
            .collect();
        admitted.sort();
        assert_eq!(admitted, ["r06", "r07"], "each free slot admitted once");
        assert_eq!(deferred_count(&db, "acme", "shop").await.unwrap(), 5);
    }

    fixtures::on_both_databases!(
        admitters_at_once_admit_each_slot_once_sqlite,
        admitters_at_once_admit_each_slot_once_postgres,
        admitters_at_once_admit_each_slot_once_on
    );
}
