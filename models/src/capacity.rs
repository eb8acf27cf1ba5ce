//! Execution capacity (spec 003, ExecutionCapacityService): worker pools, tenant quotas and
//! capacity leases. The rules, pure: what a quota may say, what one applies when none is
//! recorded, when a day's execution minutes reset.

use chrono::{DateTime, Duration, Utc};
use serde::{Deserialize, Serialize};

crate::wire::wire_enum!(
    /// Who a pool serves.
    PoolKind, "pool kind" {
        /// Runs of every tenant bound to it.
        Shared => "shared",
        /// One tenant's runs only (a customer-isolated or production boundary).
        Dedicated => "dedicated",
    }
);

crate::wire::wire_enum!(
    /// Whether a pool takes work.
    PoolState, "pool state" {
        /// Its workers serve runs.
        Active => "active",
        /// It finishes what it holds and takes nothing new.
        Draining => "draining",
        /// It takes nothing.
        Disabled => "disabled",
    }
);

crate::wire::wire_enum!(
    /// Where a capacity lease stands.
    LeaseState, "lease state" {
        /// Asked for; the quota holds it back.
        Waiting => "waiting",
        /// Held by its run.
        Granted => "granted",
        /// Given back when the run ended.
        Released => "released",
        /// Taken back: its holder vanished.
        Expired => "expired",
    }
);

/// What a quota bounds, per tenant and project.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct QuotaLimits {
    /// Runs holding a lease at once.
    pub concurrent_runs: u32,
    /// Sandboxes (runner processes) at once.
    pub concurrent_sandboxes: u32,
    /// CPUs one attempt's runner process may use.
    pub cpu_per_attempt: f64,
    /// Memory one attempt's runner process may use, in GB.
    pub memory_gb_per_attempt: f64,
    /// Apply minutes per UTC day, counted from the receipts.
    pub execution_minutes_per_day: u32,
}

impl Default for QuotaLimits {
    /// What a tenant and project without a recorded quota get (`source: default`).
    fn default() -> Self {
        Self {
            concurrent_runs: 10,
            concurrent_sandboxes: 10,
            cpu_per_attempt: 2.0,
            memory_gb_per_attempt: 4.0,
            execution_minutes_per_day: 1440,
        }
    }
}

impl QuotaLimits {
    /// Why these limits cannot be a quota, if they cannot.
    pub fn check(&self) -> Result<(), String> {
        if self.concurrent_runs == 0 {
            return Err("concurrentRuns must be at least 1".into());
        }
        if self.concurrent_sandboxes == 0 {
            return Err("concurrentSandboxes must be at least 1".into());
        }
        for (name, v) in [
            ("cpuPerAttempt", self.cpu_per_attempt),
            ("memoryGbPerAttempt", self.memory_gb_per_attempt),
        ] {
            if !v.is_finite() || v <= 0.0 {
                return Err(format!("{name} must be a positive number"));
            }
        }
        Ok(())
    }
}

/// What the OS holds a runner process to, from the project's quota (what is enforced and how:
/// docs/operations.md, "Execution capacity").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ProcessLimits {
    /// CPUs the process may run on: `cpuPerAttempt` rounded up.
    pub cpus: u32,
    /// Bytes of data segment (heap) each process may allocate: `memoryGbPerAttempt` GiB.
    pub memory_bytes: u64,
}

impl QuotaLimits {
    /// The limits a runner process of an attempt under this quota gets.
    pub fn process_limits(&self) -> ProcessLimits {
        ProcessLimits {
            cpus: (self.cpu_per_attempt.ceil() as u32).max(1),
            memory_bytes: (self.memory_gb_per_attempt * (1u64 << 30) as f64) as u64,
        }
    }
}

/// When the execution minutes counted on `now`'s UTC day reset: the next UTC midnight.
pub fn minutes_reset_at(now: DateTime<Utc>) -> DateTime<Utc> {
    let today = now.date_naive().and_hms_opt(0, 0, 0).unwrap_or_default();
    DateTime::<Utc>::from_naive_utc_and_offset(today, Utc) + Duration::days(1)
}

/// The whole minutes an apply of `duration_ms` counts, rounded up (an apply of one second
/// uses a minute, as metered execution is billed). An apply that ran started its first minute
/// however short it was: a sandbox apply can measure 0 ms, and would otherwise cost nothing.
pub fn apply_minutes(duration_ms: u64) -> u32 {
    u32::try_from(duration_ms.div_ceil(60_000).max(1)).unwrap_or(u32::MAX)
}

/// A project whose day's execution minutes are spent: new runs are refused until `resets_at`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MinutesSpent {
    pub project_id: String,
    pub used: u32,
    pub limit: u32,
    pub resets_at: DateTime<Utc>,
}

impl std::fmt::Display for MinutesSpent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "quota executionMinutesPerDay of project `{}` is spent: {} of {} apply minutes used today; it resets at {}",
            self.project_id,
            self.used,
            self.limit,
            self.resets_at
                .to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
        )
    }
}

/// Whether a project that used `used` apply minutes today may start another run at `now`.
pub fn check_minutes(
    project_id: &str,
    used: u32,
    limits: &QuotaLimits,
    now: DateTime<Utc>,
) -> Result<(), MinutesSpent> {
    if used < limits.execution_minutes_per_day {
        return Ok(());
    }
    Err(MinutesSpent {
        project_id: project_id.to_owned(),
        used,
        limit: limits.execution_minutes_per_day,
        resets_at: minutes_reset_at(now),
    })
}

/// Midnight UTC of `now`'s day: the day's apply minutes are counted from it.
pub fn day_started_at(now: DateTime<Utc>) -> DateTime<Utc> {
    minutes_reset_at(now) - Duration::days(1)
}

/// Why a run of pool `pool_id` in `state` with `workers` polling cannot plan yet; None when
/// it can (the pool is active and served).
pub fn pool_hold(pool_id: &str, state: PoolState, workers: u32) -> Option<String> {
    match state {
        PoolState::Active if workers > 0 => None,
        PoolState::Active => Some(format!("no worker polls pool `{pool_id}`")),
        other => Some(format!("pool `{pool_id}` is {other}: it takes no new runs")),
    }
}

crate::wire::wire_enum!(
    /// What holds a run back before it plans.
    CapacityHold, "capacity hold" {
        /// Every slot of the project's `concurrentRuns` is held by other runs.
        Quota => "quota",
        /// No worker serves the environment's pool.
        Pool => "pool",
    }
);

/// A run held back before it plans, as its `waitingForCapacity` shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct CapacityWait {
    /// The quota's slots are all held, or the pool has no worker.
    pub held_by: CapacityHold,
    pub project_id: String,
    /// The quota in force: how many runs of the project may hold a lease at once.
    pub concurrent_runs: u32,
    /// Where that quota comes from (`default` when none is recorded).
    pub quota_source: String,
    /// The environment's worker pool, when it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pool_id: Option<String>,
    /// What holds it, in words (`all 2 concurrentRuns of project shop are held`, `no worker
    /// polls pool eu-isolated`, `pool eu-isolated is draining`).
    pub reason: String,
    /// Since when the run waits.
    pub since: DateTime<Utc>,
}

impl CapacityWait {
    /// A run held because its project's `concurrent_runs` are all held (by runs in flight).
    pub fn quota_full(
        project_id: &str,
        concurrent_runs: u32,
        quota_source: String,
        pool_id: Option<String>,
        since: DateTime<Utc>,
    ) -> Self {
        Self {
            held_by: CapacityHold::Quota,
            project_id: project_id.to_owned(),
            concurrent_runs,
            quota_source,
            pool_id,
            reason: format!(
                "all {concurrent_runs} concurrentRuns of project `{project_id}` are held"
            ),
            since,
        }
    }
}

/// Activity slots of one pool worker: the Temporal SDK's default, which `worker --pool` keeps.
pub const SLOTS_PER_WORKER: u32 = 100;

/// The share of a pool's capacity in use: the runs holding a lease in it over its workers'
/// slots. A pool without a worker is fully used when anything waits for it, idle otherwise.
pub fn utilisation(granted: u64, backlog: u64, workers: u32) -> f64 {
    if workers == 0 {
        return if granted + backlog > 0 { 1.0 } else { 0.0 };
    }
    let slots = f64::from(workers) * f64::from(SLOTS_PER_WORKER);
    ((granted as f64) / slots).min(1.0)
}

/// Whether the API defers the start of a project's new run instead of starting its workflow
/// (admission): runs of the project were deferred before it (they go first, in arrival
/// order), or its runs in flight fill its `concurrentRuns` and one more already waits for a
/// slot in the project's capacity semaphore. That one waiter is always let in: a release
/// grants it the moment a slot frees, and while it waits it checks that the semaphore's
/// holders still exist (a holder terminated by hand would otherwise keep its slot forever).
/// Deferring only ever saves work: the semaphore still bounds the runs that start.
pub fn defers_start(in_flight: u64, deferred: u64, concurrent_runs: u32) -> bool {
    deferred > 0 || in_flight > u64::from(concurrent_runs.max(1))
}

/// How many of a project's `deferred` runs may start now: the `concurrentRuns` and the one
/// waiter of [`defers_start`], less the runs that started and hold or wait for a lease.
/// `held` counts the leases waiting or granted, the deferred runs' own waiting leases among
/// them.
pub fn admissible(held: u64, deferred: u64, concurrent_runs: u32) -> u64 {
    let started = held.saturating_sub(deferred);
    (u64::from(concurrent_runs.max(1)) + 1)
        .saturating_sub(started)
        .min(deferred)
}

/// The part of a project's `concurrentRuns` its backlog may fill while `others` other tenants
/// have runs at work and no backlog of their own: an equal share with each of them
/// (`concurrentRuns / (others + 1)`, rounded up, at least 1), the whole quota when they have
/// none. Fairness between tenants needs more than queue order: a project working through a
/// thousand runs keeps its quota's worth of workflows busy, and those take the machine from
/// another tenant's few runs however their tasks are ordered (docs/benchmarks.md, section 8).
/// So a flood yields half of its concurrency to one other tenant while that tenant works and
/// takes it back when it is done. Only runs admitted from the backlog are held to the share:
/// a project without a backlog starts its runs up to its quota, and tenants that both flood
/// each keep their quota.
pub fn backlog_share(concurrent_runs: u32, others: u64) -> u32 {
    let share = u64::from(concurrent_runs.max(1)).div_ceil(others.saturating_add(1));
    u32::try_from(share).unwrap_or(u32::MAX).max(1)
}

/// Ask for a run's capacity lease before it plans: read the project's quota, refuse when its
/// day's execution minutes are spent, record the lease `waiting`, and, when the environment
/// has no worker pool, ask for a slot of the project's capacity semaphore at once (the lease is
/// granted with the slot). A run whose environment has a pool asks once a worker serves it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LeaseRequest {
    /// Chosen by the workflow, so a retried request records one lease.
    pub lease_id: String,
    pub tenant_id: String,
    pub project_id: String,
    pub environment_id: String,
    pub run_id: String,
    /// The workflow execution that asks (its Temporal run id).
    pub attempt_id: String,
    /// The workflow id the lease's semaphore grants to.
    pub holder_workflow_id: String,
    /// The project's capacity semaphore (`capacity/{tenant}/{project}`).
    pub semaphore_id: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_quota_bounds_something() {
        assert_eq!(QuotaLimits::default().check(), Ok(()));
        let zero = QuotaLimits {
            concurrent_runs: 0,
            ..Default::default()
        };
        assert!(zero.check().is_err());
        let nan = QuotaLimits {
            cpu_per_attempt: f64::NAN,
            ..Default::default()
        };
        assert!(nan.check().is_err());
    }

    #[test]
    fn minutes_reset_at_the_next_utc_midnight_and_round_up() {
        let now: DateTime<Utc> = "2026-12-01T19:59:00Z".parse().unwrap();
        assert_eq!(
            minutes_reset_at(now),
            "2026-12-02T00:00:00Z".parse::<DateTime<Utc>>().unwrap()
        );
        assert_eq!(apply_minutes(1), 1);
        assert_eq!(apply_minutes(120_000), 2);
        assert_eq!(apply_minutes(120_001), 3);
        assert_eq!(apply_minutes(0), 1, "an apply measured as 0 ms still ran");
        assert_eq!(
            day_started_at(now),
            "2026-12-01T00:00:00Z".parse::<DateTime<Utc>>().unwrap()
        );
    }

    #[test]
    fn a_runner_process_gets_the_quotas_cpus_rounded_up_and_its_memory() {
        let limits = QuotaLimits {
            cpu_per_attempt: 1.5,
            memory_gb_per_attempt: 0.5,
            ..Default::default()
        };
        assert_eq!(
            limits.process_limits(),
            ProcessLimits {
                cpus: 2,
                memory_bytes: 512 << 20
            }
        );
    }

    #[test]
    fn a_run_plans_only_in_an_active_pool_that_a_worker_serves() {
        assert_eq!(pool_hold("eu", PoolState::Active, 1), None);
        assert_eq!(
            pool_hold("eu", PoolState::Active, 0).as_deref(),
            Some("no worker polls pool `eu`")
        );
        assert_eq!(
            pool_hold("eu", PoolState::Draining, 3).as_deref(),
            Some("pool `eu` is draining: it takes no new runs")
        );
    }

    #[test]
    fn a_pool_is_used_by_the_runs_holding_its_leases() {
        assert_eq!(utilisation(0, 0, 0), 0.0);
        assert_eq!(utilisation(1, 0, 0), 1.0, "work and no worker");
        assert_eq!(utilisation(0, 3, 0), 1.0);
        assert_eq!(utilisation(50, 0, 1), 0.5);
        assert_eq!(utilisation(500, 0, 2), 1.0);
    }

    #[test]
    fn a_project_whose_minutes_are_spent_is_refused_until_midnight() {
        let now: DateTime<Utc> = "2026-12-01T19:59:00Z".parse().unwrap();
        let limits = QuotaLimits {
            execution_minutes_per_day: 5,
            ..Default::default()
        };
        assert_eq!(check_minutes("shop", 4, &limits, now), Ok(()));
        let spent = check_minutes("shop", 5, &limits, now).unwrap_err();
        assert_eq!(
            spent.to_string(),
            "quota executionMinutesPerDay of project `shop` is spent: 5 of 5 apply minutes used today; it resets at 2026-12-02T00:00:00Z"
        );
    }

    #[test]
    fn a_start_is_deferred_behind_earlier_ones_or_a_full_quota_and_its_waiter() {
        assert!(!defers_start(1, 0, 2), "a slot is free");
        assert!(
            !defers_start(2, 0, 2),
            "both held: one waits in the semaphore"
        );
        assert!(defers_start(3, 0, 2), "both held and one waiting");
        assert!(defers_start(0, 1, 2), "one deferred before it goes first");
        assert!(
            defers_start(2, 0, 0),
            "a quota of 0 counts as 1, like its semaphore"
        );
    }

    #[test]
    fn a_backlog_shares_its_quota_with_the_other_tenants_at_work() {
        assert_eq!(
            backlog_share(10, 0),
            10,
            "nobody else works: the whole quota"
        );
        assert_eq!(backlog_share(10, 1), 5, "one other tenant: half");
        assert_eq!(backlog_share(10, 2), 4, "rounded up");
        assert_eq!(backlog_share(10, 50), 1, "never less than one run");
        assert_eq!(backlog_share(0, 0), 1, "a quota of 0 counts as 1");
        assert_eq!(backlog_share(u32::MAX, 0), u32::MAX);
    }

    #[test]
    fn deferred_runs_are_admitted_into_the_slots_started_runs_leave() {
        // Two started runs hold leases, one waits, three deferred runs wait with theirs.
        assert_eq!(admissible(6, 3, 2), 0, "both slots held, one waiter");
        assert_eq!(
            admissible(5, 3, 2),
            1,
            "the waiter was granted: another may wait"
        );
        assert_eq!(admissible(4, 3, 2), 2, "a slot freed");
        assert_eq!(admissible(3, 3, 10), 3, "never more than are deferred");
        assert_eq!(admissible(0, 0, 10), 0, "nothing deferred");
        assert_eq!(
            admissible(1, 3, 2),
            3,
            "fewer held than deferred: none started"
        );
    }
}
