//! Admitting a run: a run accepted (its row, its start, and the lease it waits with when its
//! project's quota is full, in one transaction: [`accept_run`]), and the deferred starts a freed
//! slot lets start chosen, one admitter at a time ([`admit_deferred`]). Their workflows are
//! started by the caller (`temporal::admission`); `store::run_starts` says how a start that was
//! written and not made is made later.

use chrono::Utc;
use runtime_cloud_models::RunInput;
use runtime_cloud_models::capacity::{
    CapacityWait, admissible as slots_free, backlog_share, defers_start,
};
use runtime_cloud_models::options::ProvisioningOptions;
use runtime_cloud_store::capacity::{self, NewLease};
use runtime_cloud_store::runs::{self, NewRun};
use runtime_cloud_store::{Error, begin_write, run_starts};
use sea_orm::{ConnectionTrait, DbBackend};
use std::collections::HashSet;

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

/// What [`accept_run`] wrote.
#[derive(Debug, Clone, PartialEq)]
pub struct Accepted {
    /// The workflow's input.
    pub input: RunInput,
    /// The start is deferred until the project has a free slot: nothing to start now.
    pub deferred: bool,
}

/// Accepts a run: writes its row and its start in one transaction and returns the workflow's
/// input. With an `admission`, the start is deferred when the project's runs in flight fill its
/// quota or runs were deferred before it ([`defers_start`]). [`Error::Duplicate`] when a run
/// with this id or `Idempotency-Key` exists.
pub async fn accept_run(
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
            let earlier = run_starts::deferred_count(&txn, tenant, project).await?;
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
    run_starts::insert(&txn, &input, now, deferral.is_some()).await?;
    txn.commit().await?;
    Ok(Accepted {
        input,
        deferred: deferral.is_some(),
    })
}

/// Admits the deferred starts that may start now ([`admissible`]), of the project `only` or
/// of every project with a backlog: marks them no longer deferred and returns them, oldest
/// first per project. The caller starts their workflows and forgets each start
/// (`run_starts::started`); a caller that dies first leaves them to the API's starter
/// (`run_starts::due`), as any start accepted
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
pub async fn admit_deferred(
    db: &sea_orm::DatabaseConnection,
    only: Option<(&str, &str)>,
) -> Result<Vec<RunInput>, Error> {
    // Most releases find no backlog: a read says so without taking the write lock. A start
    // deferred just after it is admitted by the next release or the starter's next round.
    if !run_starts::any_deferred(db, only).await? {
        return Ok(Vec::new());
    }
    let txn = begin_write(db).await?;
    if txn.get_database_backend() == DbBackend::Postgres {
        txn.execute_unprepared(&format!("SELECT pg_advisory_xact_lock({ADMISSION_LOCK})"))
            .await?;
    }
    let backlogs = run_starts::deferring_projects(&txn).await?;
    let mut admitted = Vec::new();
    if !backlogs.is_empty() {
        let working = tenants_at_work(&txn, &backlogs).await?;
        for (tenant, project) in &backlogs {
            if only.is_none_or(|only| only == (tenant.as_str(), project.as_str())) {
                admitted.extend(admissible(&txn, tenant, project, working).await?);
            }
        }
    }
    let ids: Vec<String> = admitted.iter().map(|i| i.run_id.clone()).collect();
    run_starts::mark_admitted(&txn, &ids).await?;
    txn.commit().await?;
    Ok(admitted)
}

/// The advisory lock admitters take on PostgreSQL ([`admit_deferred`]). The key: the number of
/// the migration that creates `run_starts` (as the metrics fold's is its migration's), so no
/// other lock takes it by chance.
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
    let deferred = run_starts::deferred_count(db, tenant_id, project_id).await?;
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
    run_starts::oldest_deferred(db, tenant_id, project_id, free).await
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

#[cfg(test)]
mod tests {
    use super::*;
    use runtime_cloud_models::EnvironmentClass;
    use runtime_cloud_store::fixtures::{self, declaration, workload};
    use runtime_cloud_store::run_starts::{
        deferred_count, deferring_projects, due, pending, started, unstarted, withdraw,
    };
    use runtime_cloud_store::specifications;

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
        let input = accept_run(&db, &new("r1"), &options, None)
            .await
            .unwrap()
            .input;
        accept_run(&db, &new("r2"), &options, None).await.unwrap();
        let err = accept_run(&db, &new("r1"), &options, None)
            .await
            .unwrap_err();
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
        runtime_cloud_store::environments::Environment,
        specifications::Specification,
    ) {
        use runtime_cloud_models::capacity::QuotaLimits;
        let (env, spec) = fixtures::declared(db, "dev", EnvironmentClass::NonProduction).await;
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
            let accepted = accept_run(&db, &new, &options, Some(&admission(run, 1)))
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
        assert!(
            admit_deferred(&db, Some(("acme", "shop")))
                .await
                .unwrap()
                .is_empty()
        );

        // r1 ends: r2 takes the slot, r3 may wait for it, r4 may not yet.
        capacity::move_lease(&db, "lease-r1", LeaseState::Released, at)
            .await
            .unwrap();
        capacity::move_lease(&db, "lease-r2", LeaseState::Granted, at)
            .await
            .unwrap();
        assert_eq!(
            ids(admit_deferred(&db, Some(("acme", "shop"))).await.unwrap()),
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
            admit_deferred(&db, Some(("acme", "shop")))
                .await
                .unwrap()
                .is_empty(),
            "r3 waits, not started yet: admitted once"
        );
        started(&db, "r3").await.unwrap();
        assert!(
            admit_deferred(&db, Some(("acme", "shop")))
                .await
                .unwrap()
                .is_empty(),
            "r3 waits"
        );
        // Its workflow asks for the lease recorded with it: one lease, its attempt filled in.
        let mut asked = admission("r3", 1).lease;
        asked.attempt_id = "attempt-3".into();
        capacity::request_lease(&db, asked, at).await.unwrap();
        let page = runtime_cloud_store::Page {
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
            accept_run(&db, &new, &options, Some(&admission(run, 4)))
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
            async move { admit_deferred(&db, Some(("acme", "shop"))).await.unwrap() }
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
