//! What `GET /metrics` reports from the read tables: [`read`] from the counts the database keeps
//! as rows change (migration `m20261206_000012_create_metric_counts`, whose doc says how), and
//! [`recount`] from the rows themselves.
//!
//! A scrape costs a few small indexed reads, however many runs, findings and environments the
//! tables hold: the counts (one row per metric and labels), the environments whose last
//! observation is older than the staleness window (an index range over those only; the stale
//! gauge is time-dependent and no trigger fires when time passes), the recorded quotas. On
//! PostgreSQL the scrape first folds the deltas writers appended since the last one into the
//! counts, so its cost also follows the writes since, never the tables' size.
//!
//! [`recount`] scans every row as the scrape did before; it is what [`read`] must equal (the
//! tests and the metrics benchmark compare the two).

use crate::Error;
use crate::decode::At;
use crate::entities::{environments as env_rows, runtime_inventories as inv_rows};
use crate::error::Unreadable;
use crate::{capacity, environments, findings, inventory, proposals, rollouts, runs};
use chrono::{DateTime, Utc};
use runtime_cloud_models::capacity::{LeaseState, day_started_at};
use runtime_cloud_models::drift::{DriftKind, ProposalState};
use runtime_cloud_models::observation::ObservationAge;
use runtime_cloud_models::options::InventoryOptions;
use runtime_cloud_models::rollouts::RolloutState;
use runtime_cloud_models::{ProvisioningKind, ProvisioningState};
use sea_orm::sea_query::{Expr, Query};
use sea_orm::{
    ColumnTrait, ConnectionTrait, DatabaseConnection, DbBackend, EntityTrait, QueryFilter,
    QuerySelect, Statement, TransactionTrait,
};
use std::collections::{BTreeMap, HashMap};

pub use crate::migration::m20261206_000012_create_metric_counts::APPLY_DURATION_BOUNDS_MS;
pub use capacity::QuotaUse;

const TABLE: &str = "metric_counts";

/// The counts `GET /metrics` reports, at one moment.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Counts {
    /// Runs that ended, by (tenant, kind, state; `""` for none).
    pub runs_ended: BTreeMap<(String, &'static str, &'static str), u64>,
    /// Apply durations of the runs that applied or failed with a receipt, by kind.
    pub apply_durations: BTreeMap<&'static str, Durations>,
    /// Proposals by (tenant, state, destructive).
    pub proposals: BTreeMap<(String, &'static str, bool), u64>,
    /// Open findings by (tenant, kind, whether a drift rule suppresses them).
    pub open_findings: BTreeMap<(String, &'static str, bool), u64>,
    /// Per tenant with an environment: its environments without a fresh observation (never
    /// observed, flagged stale, or observed longer ago than `StalenessMinutes`).
    pub stale_environments: BTreeMap<String, u64>,
    /// Rollouts by (tenant, state): how many, and how many instances they move.
    pub rollouts: BTreeMap<(String, &'static str), (u64, u64)>,
    /// Leases waiting or granted, by (tenant, pool, state).
    pub held_leases: BTreeMap<(String, String, &'static str), u64>,
    /// The quota use of every project with a granted lease or apply minutes today.
    pub quota_use: Vec<QuotaUse>,
}

/// Apply durations: how many fell in each bucket of [`APPLY_DURATION_BOUNDS_MS`], and their sum.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Durations {
    /// `[i]`: at most the bound `i` (and above the one before); the last: above every bound.
    /// Not cumulative.
    pub buckets: [u64; APPLY_DURATION_BOUNDS_MS.len() + 1],
    /// The durations' sum, in milliseconds.
    pub sum_ms: u64,
}

impl Durations {
    /// The bucket of a duration.
    pub fn bucket_of(ms: u64) -> usize {
        APPLY_DURATION_BOUNDS_MS
            .iter()
            .position(|b| ms <= *b)
            .unwrap_or(APPLY_DURATION_BOUNDS_MS.len())
    }

    fn observe(&mut self, ms: u64) {
        self.buckets[Self::bucket_of(ms)] += 1;
        self.sum_ms += ms;
    }

    /// How many durations.
    pub fn count(&self) -> u64 {
        self.buckets.iter().sum()
    }
}

/// The metrics kept in `metric_counts`, but for `apply_minutes` (read by day).
const ALL_DAYS: &[&str] = &[
    "runs_ended",
    "apply_durations",
    "proposals",
    "open_findings",
    "environments",
    "observed_environments",
    "held_leases",
    "rollouts",
];

/// One counter: a metric, its labels, how many rows and their total.
struct Counter {
    metric: String,
    keys: [String; 4],
    n: u64,
    total: u64,
}

impl Counter {
    fn at(&self) -> String {
        format!("{}/{}", self.metric, self.keys.join("/"))
    }
}

/// PostgreSQL: folds the deltas writers appended into the counts every `every`, until `stop`
/// (SQLite keeps its counts in place: nothing to do). The worker runs it, so the deltas stay a
/// few minutes' writes whether or not anything scrapes `/metrics`: without it they grew with
/// every run and finding until the next scrape, which then folded and read them all at once.
/// A failed fold is logged and tried again at the next tick (the deltas stay where they are).
pub async fn keep_folding(db: DatabaseConnection, every: std::time::Duration, stop: impl Future) {
    if db.get_database_backend() != DbBackend::Postgres {
        return;
    }
    tokio::pin!(stop);
    loop {
        tokio::select! {
            _ = &mut stop => return,
            () = tokio::time::sleep(every) => {}
        }
        if let Err(e) = fold(&db).await {
            tracing::warn!(error = %e, "metric deltas not folded; trying again");
        }
    }
}

/// PostgreSQL: folds the deltas writers appended into the counts, in one transaction (the
/// read adds what is left, so a fold skipped or under way changes no value). One replica
/// folds at a time (a transaction-scoped advisory lock; the others skip it). A fold lost in a
/// crash is lost whole, deltas and all, so its commit need not wait for the disk.
async fn fold(db: &DatabaseConnection) -> Result<(), Error> {
    let txn = db.begin().await?;
    txn.execute_unprepared("SET LOCAL synchronous_commit = off")
        .await?;
    let locked = txn
        .query_one(Statement::from_string(
            DbBackend::Postgres,
            // The key: the number of the migration that keeps the counts.
            "SELECT pg_try_advisory_xact_lock(2026120600012) AS locked",
        ))
        .await?
        .map(|r| r.try_get::<bool>("", "locked"))
        .transpose()?
        .unwrap_or(false);
    if locked {
        txn.execute_unprepared(
            "WITH moved AS (DELETE FROM metric_deltas \
               RETURNING metric, key1, key2, key3, key4, n, total) \
             INSERT INTO metric_counts (metric, key1, key2, key3, key4, n, total) \
             SELECT metric, key1, key2, key3, key4, SUM(n), SUM(total) FROM moved \
             GROUP BY metric, key1, key2, key3, key4 \
             ORDER BY metric, key1, key2, key3, key4 \
             ON CONFLICT (metric, key1, key2, key3, key4) DO UPDATE \
             SET n = metric_counts.n + excluded.n, total = metric_counts.total + excluded.total",
        )
        .await?;
    }
    txn.commit().await?;
    Ok(())
}

/// The counters (counts plus deltas not yet folded, in one statement: one snapshot) of
/// `metrics`, and the apply minutes of `today` and later, but for those at zero.
async fn counters(db: &impl ConnectionTrait, today: &str) -> Result<Vec<Counter>, Error> {
    let names: Vec<String> = ALL_DAYS.iter().map(|m| format!("'{m}'")).collect();
    // `today` is `YYYY-MM-DD`, formatted here from a date: safe inline.
    let filter = format!(
        "metric IN ({}) OR (metric = 'apply_minutes' AND key1 >= '{today}')",
        names.join(", ")
    );
    let sql = format!(
        "SELECT metric, key1, key2, key3, key4, \
           CAST(SUM(n) AS BIGINT) AS n, CAST(SUM(total) AS BIGINT) AS total \
         FROM (SELECT metric, key1, key2, key3, key4, n, total FROM metric_counts WHERE {filter} \
           UNION ALL \
           SELECT metric, key1, key2, key3, key4, n, total FROM metric_deltas WHERE {filter}) c \
         GROUP BY metric, key1, key2, key3, key4 HAVING SUM(n) <> 0"
    );
    let rows = db
        .query_all(Statement::from_string(db.get_database_backend(), sql))
        .await?;
    rows.into_iter()
        .map(|r| {
            let metric: String = r.try_get("", "metric")?;
            let keys = [
                r.try_get("", "key1")?,
                r.try_get("", "key2")?,
                r.try_get("", "key3")?,
                r.try_get("", "key4")?,
            ];
            let (n, total): (i64, i64) = (r.try_get("", "n")?, r.try_get("", "total")?);
            let mut c = Counter {
                metric,
                keys,
                n: 0,
                total: 0,
            };
            // Below zero only when a counted row changed without its trigger: say so.
            let whole = |v: i64, column| {
                u64::try_from(v).map_err(|_| Error::Corrupt {
                    table: TABLE,
                    column,
                    row: c.at(),
                    source: Unreadable::Count(v.to_string()),
                })
            };
            let (n, total) = (whole(n, "n")?, whole(total, "total")?);
            c.n = n;
            c.total = total;
            Ok(c)
        })
        .collect()
}

/// Per tenant, its environments observed (not flagged stale) before `cutoff`: one range of
/// `ix_inventories_stale_observed`, over those rows only.
async fn observed_before(
    db: &impl ConnectionTrait,
    cutoff: DateTime<Utc>,
    tenant: Option<&str>,
) -> Result<BTreeMap<String, u64>, Error> {
    let registered = Query::select()
        .expr(Expr::val(1))
        .from(env_rows::Entity)
        .and_where(
            Expr::col((env_rows::Entity, env_rows::Column::TenantId))
                .equals((inv_rows::Entity, inv_rows::Column::TenantId)),
        )
        .and_where(
            Expr::col((env_rows::Entity, env_rows::Column::EnvironmentId))
                .equals((inv_rows::Entity, inv_rows::Column::EnvironmentId)),
        )
        // A retired environment is never stale: nothing observes it any more.
        .and_where(Expr::col((env_rows::Entity, env_rows::Column::State)).eq("active"))
        .to_owned();
    let mut rows = inv_rows::Entity::find();
    if let Some(tenant) = tenant {
        rows = rows.filter(inv_rows::Column::TenantId.eq(tenant));
    }
    let rows: Vec<(String, i64)> = rows
        .select_only()
        .column(inv_rows::Column::TenantId)
        .column_as(Expr::col(inv_rows::Column::Id).count(), "n")
        .filter(inv_rows::Column::Stale.eq(false))
        .filter(inv_rows::Column::ObservedAt.lt(cutoff))
        .filter(Expr::exists(registered))
        .group_by(inv_rows::Column::TenantId)
        .into_tuple()
        .all(db)
        .await?;
    Ok(rows
        .into_iter()
        .map(|(tenant, n)| (tenant, u64::try_from(n).unwrap_or(0)))
        .collect())
}

/// The counts at `now`, from the counts the database keeps (see the module's doc).
pub async fn read(
    db: &DatabaseConnection,
    now: DateTime<Utc>,
    inventory: &InventoryOptions,
) -> Result<Counts, Error> {
    if db.get_database_backend() == DbBackend::Postgres {
        fold(db).await?;
    }
    read_unfolded(db, now, inventory).await
}

/// One tenant's stale environments and open findings (suppressed ones aside), as [`read`]
/// counts them, for the fleet's summary: that tenant's counters only (another tenant's cannot
/// fail it), without folding first (the counters add the deltas not folded yet: no write on a
/// read that may come often).
pub async fn fleet_counts(
    db: &impl ConnectionTrait,
    tenant: &str,
    now: DateTime<Utc>,
    inventory: &InventoryOptions,
) -> Result<FleetCounts, Error> {
    let backend = db.get_database_backend();
    let (first, second) = match backend {
        DbBackend::Postgres => ("$1", "$1"),
        _ => ("?", "?"),
    };
    let wanted = "metric IN ('open_findings', 'environments', 'observed_environments')";
    let sql = format!(
        "SELECT metric, key3, CAST(SUM(n) AS BIGINT) AS n \
         FROM (SELECT metric, key3, n FROM metric_counts WHERE {wanted} AND key1 = {first} \
           UNION ALL \
           SELECT metric, key3, n FROM metric_deltas WHERE {wanted} AND key1 = {second}) c \
         GROUP BY metric, key3"
    );
    let values: Vec<sea_orm::Value> = match backend {
        DbBackend::Postgres => vec![tenant.into()],
        _ => vec![tenant.into(), tenant.into()],
    };
    let (mut registered, mut observed, mut open_drift) = (0u64, 0u64, 0u64);
    for row in db
        .query_all(Statement::from_sql_and_values(backend, sql, values))
        .await?
    {
        let (metric, key3): (String, String) =
            (row.try_get("", "metric")?, row.try_get("", "key3")?);
        let n = u64::try_from(row.try_get::<i64>("", "n")?).unwrap_or(0);
        match metric.as_str() {
            "environments" => registered += n,
            "observed_environments" => observed += n,
            "open_findings" if key3 != "true" => open_drift += n,
            _ => {}
        }
    }
    let old = observed_before(db, stale_before(now, inventory), Some(tenant)).await?;
    let old = old.get(tenant).copied().unwrap_or(0);
    Ok(FleetCounts {
        stale_environments: stale(registered, observed, old),
        open_drift,
    })
}

/// An observation older than this is stale (`InventoryOptions::is_stale`: older than
/// `now - window`).
fn stale_before(now: DateTime<Utc>, inventory: &InventoryOptions) -> DateTime<Utc> {
    now - chrono::Duration::seconds(inventory.staleness_secs() as i64)
}

/// Stale environments from the counts: those registered, but those observed (and not
/// flagged), and back those of them observed before [`stale_before`].
fn stale(registered: u64, observed: u64, observed_long_ago: u64) -> u64 {
    (registered + observed_long_ago).saturating_sub(observed)
}

/// Per tenant (or of `tenant` only), how long ago its environments were last observed
/// successfully, at `now`. One read of every inventory's last observation (an indexed column
/// per row): unlike the counts, ages change as time passes, with no write to keep them by.
pub async fn observation_ages(
    db: &impl ConnectionTrait,
    now: DateTime<Utc>,
    tenant: Option<&str>,
) -> Result<BTreeMap<String, ObservationAge>, Error> {
    let mut ages: BTreeMap<String, Vec<f64>> = BTreeMap::new();
    for (tenant, at) in inventory::observed_times(db, tenant).await? {
        let age = (now - at).num_milliseconds().max(0) as f64 / 1000.0;
        ages.entry(tenant).or_default().push(age);
    }
    Ok(ages
        .into_iter()
        .filter_map(|(tenant, ages)| Some((tenant, ObservationAge::of(ages)?)))
        .collect())
}

/// A tenant's counts for the fleet's summary ([`fleet_counts`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FleetCounts {
    pub stale_environments: u64,
    pub open_drift: u64,
}

/// [`read`] without folding first.
async fn read_unfolded(
    db: &impl ConnectionTrait,
    now: DateTime<Utc>,
    inventory: &InventoryOptions,
) -> Result<Counts, Error> {
    let today = day_started_at(now).format("%Y-%m-%d").to_string();
    let mut out = Counts::default();
    // Per tenant: environments registered, and observed (not flagged) at some time.
    let mut environments: BTreeMap<String, (u64, u64)> = BTreeMap::new();
    // Per (tenant, project): leases granted, and runs with apply minutes today and their sum.
    let mut quota: BTreeMap<(String, String), (u64, u64, u64)> = BTreeMap::new();
    for c in counters(db, &today).await? {
        let row = c.at();
        let at = At {
            table: TABLE,
            row: &row,
        };
        let [k1, k2, k3, k4] = c.keys;
        let flag = |v: &str| v == "true";
        match c.metric.as_str() {
            "runs_ended" => {
                let kind: ProvisioningKind = at.wire("key2", &k2)?;
                let state: Option<ProvisioningState> =
                    at.wire_opt("key3", Some(k3.as_str()).filter(|s| !s.is_empty()))?;
                let state = state.map_or("", |s| s.as_str());
                *out.runs_ended
                    .entry((k1, kind.as_str(), state))
                    .or_default() += c.n;
            }
            "apply_durations" => {
                let kind: ProvisioningKind = at.wire("key2", &k2)?;
                let bucket = match k3.as_str() {
                    "+Inf" => Some(APPLY_DURATION_BOUNDS_MS.len()),
                    bound => APPLY_DURATION_BOUNDS_MS
                        .iter()
                        .position(|b| b.to_string() == bound),
                };
                let Some(bucket) = bucket else {
                    return Err(Error::Corrupt {
                        table: TABLE,
                        column: "key3",
                        row,
                        source: Unreadable::Count(k3),
                    });
                };
                let d = out.apply_durations.entry(kind.as_str()).or_default();
                d.buckets[bucket] += c.n;
                d.sum_ms += c.total;
            }
            "apply_minutes" => {
                let e = quota.entry((k2, k3)).or_default();
                e.1 += c.n;
                e.2 += c.total;
            }
            "proposals" => {
                let state: ProposalState = at.wire("key2", &k2)?;
                *out.proposals
                    .entry((k1, state.as_str(), flag(&k3)))
                    .or_default() += c.n;
            }
            "open_findings" => {
                let kind: DriftKind = at.wire("key2", &k2)?;
                *out.open_findings
                    .entry((k1, kind.as_str(), flag(&k3)))
                    .or_default() += c.n;
            }
            "environments" => environments.entry(k1).or_default().0 += c.n,
            "observed_environments" => environments.entry(k1).or_default().1 += c.n,
            "held_leases" => {
                let state: LeaseState = at.wire("key4", &k4)?;
                if state == LeaseState::Granted {
                    quota.entry((k1.clone(), k3)).or_default().0 += c.n;
                }
                *out.held_leases.entry((k1, k2, state.as_str())).or_default() += c.n;
            }
            "rollouts" => {
                let state: RolloutState = at.wire("key2", &k2)?;
                let e = out.rollouts.entry((k1, state.as_str())).or_default();
                e.0 += c.n;
                e.1 += c.total;
            }
            // A metric a newer version of the product counts: not this one's to report.
            _ => {}
        }
    }
    let old = observed_before(db, stale_before(now, inventory), None).await?;
    for (tenant, (registered, observed)) in environments {
        if registered == 0 {
            continue;
        }
        let old = old.get(&tenant).copied().unwrap_or(0);
        out.stale_environments
            .insert(tenant, stale(registered, observed, old));
    }
    let limits = capacity::recorded_limits(db).await?;
    out.quota_use = quota
        .into_iter()
        .filter(|(_, (granted, runs, _))| *granted > 0 || *runs > 0)
        .map(
            |((tenant_id, project_id), (granted, _, minutes))| QuotaUse {
                limits: limits
                    .get(&(tenant_id.clone(), project_id.clone()))
                    .cloned()
                    .unwrap_or_default(),
                tenant_id,
                project_id,
                leases_granted: granted,
                minutes_used: minutes,
            },
        )
        .collect();
    Ok(out)
}

/// (tenant, environment).
type EnvKey = (String, String);
/// (flagged stale, last observation).
type Freshness = (bool, Option<DateTime<Utc>>);

/// The counts at `now`, from every row (what the scrape did before the counts were kept): what
/// [`read`] must equal.
pub async fn recount(
    db: &impl ConnectionTrait,
    now: DateTime<Utc>,
    inventory_options: &InventoryOptions,
) -> Result<Counts, Error> {
    let mut out = Counts::default();
    for (tenant, kind, state) in runs::ended(db).await? {
        let state = state.map_or("", |s| s.as_str());
        *out.runs_ended
            .entry((tenant, kind.as_str(), state))
            .or_default() += 1;
    }
    for (kind, receipt) in runs::apply_receipts(db).await? {
        if let Some(receipt) = receipt {
            out.apply_durations
                .entry(kind.as_str())
                .or_default()
                .observe(receipt.duration_ms);
        }
    }
    for (tenant, destructive, state) in proposals::tally(db).await? {
        *out.proposals
            .entry((tenant, state.as_str(), destructive))
            .or_default() += 1;
    }
    for (tenant, kind, suppressed) in findings::open_kinds(db).await? {
        *out.open_findings
            .entry((tenant, kind.as_str(), suppressed))
            .or_default() += 1;
    }
    let observed: HashMap<EnvKey, Freshness> = inventory::freshness(db)
        .await?
        .into_iter()
        .map(|(tenant, env, stale, at)| ((tenant, env), (stale, at)))
        .collect();
    for (tenant, env) in environments::keys(db).await? {
        let stale = match observed.get(&(tenant.clone(), env)) {
            None => true,
            Some((flag, at)) => inventory_options.is_stale(*flag, *at, now),
        };
        *out.stale_environments.entry(tenant).or_default() += u64::from(stale);
    }
    for (tenant, state, instances) in rollouts::states(db).await? {
        let e = out.rollouts.entry((tenant, state.as_str())).or_default();
        e.0 += 1;
        e.1 += instances;
    }
    for (tenant, pool, state, n) in capacity::lease_counts(db).await? {
        *out.held_leases
            .entry((tenant, pool, state.as_str()))
            .or_default() += n;
    }
    out.quota_use = capacity::quota_use(db, day_started_at(now)).await?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::capacity::{NewLease, move_lease, request_lease};
    use crate::entities::{
        capacity_leases as lease_rows, drift_findings as finding_rows,
        fleet_rollouts as rollout_rows, provisioning_runs as run_rows,
        reconciliation_proposals as proposal_rows,
    };
    use crate::environments::NewEnvironment;
    use crate::fixtures;
    use chrono::Duration;
    use runtime_cloud_models::EnvironmentClass;
    use runtime_cloud_models::rollouts::{RolloutInstance, RolloutStatus};
    use sea_orm::{ActiveModelTrait, ActiveValue::Set};

    /// The kept counts, once they equal the recount.
    async fn exact(db: &DatabaseConnection, now: DateTime<Utc>) -> Counts {
        let options = InventoryOptions::default();
        let kept = read(db, now, &options).await.unwrap();
        let counted = recount(db, now, &options).await.unwrap();
        assert_eq!(kept, counted, "the kept counts differ from the rows");
        // The fleet's summary reads one tenant's counts: the same as the whole read's.
        let tenants: std::collections::BTreeSet<&String> = (kept.stale_environments.keys())
            .chain(kept.open_findings.keys().map(|(t, _, _)| t))
            .collect();
        for tenant in tenants {
            let open_drift = (kept.open_findings.iter())
                .filter(|((t, _, suppressed), _)| t == tenant && !suppressed)
                .map(|(_, n)| n)
                .sum();
            let stale_environments = kept.stale_environments.get(tenant).copied().unwrap_or(0);
            assert_eq!(
                fleet_counts(db, tenant, now, &options).await.unwrap(),
                FleetCounts {
                    stale_environments,
                    open_drift
                },
                "{tenant}"
            );
        }
        kept
    }

    async fn register(db: &DatabaseConnection, tenant: &str, env: &str) {
        environments::register(
            db,
            NewEnvironment {
                tenant_id: tenant.into(),
                environment_id: env.into(),
                project_id: "shop".into(),
                class: EnvironmentClass::NonProduction,
                target: Default::default(),
                mode: None,
                labels: Default::default(),
                customer_tenant_id: None,
                pool_id: None,
                expires_at: None,
            },
        )
        .await
        .unwrap();
    }

    async fn inventory(db: &DatabaseConnection, env: &str, observed_at: Option<DateTime<Utc>>) {
        let now = Utc::now();
        inv_rows::ActiveModel {
            id: Set(format!("inv-{env}")),
            tenant_id: Set("acme".into()),
            environment_id: Set(env.into()),
            project_id: Set("shop".into()),
            workloads: Set(serde_json::json!([])),
            observed_at: Set(observed_at),
            stale: Set(false),
            created_at: Set(now),
            updated_at: Set(now),
            ..Default::default()
        }
        .insert(db)
        .await
        .unwrap();
    }

    async fn set_inventory(
        db: &DatabaseConnection,
        env: &str,
        col: inv_rows::Column,
        v: sea_orm::Value,
    ) {
        inv_rows::Entity::update_many()
            .col_expr(col, Expr::value(v))
            .filter(inv_rows::Column::Id.eq(format!("inv-{env}")))
            .exec(db)
            .await
            .unwrap();
    }

    async fn finding(db: &impl ConnectionTrait, id: &str, env: &str, kind: &str) {
        let now = Utc::now();
        finding_rows::ActiveModel {
            finding_id: Set(id.into()),
            tenant_id: Set("acme".into()),
            environment_id: Set(env.into()),
            kind: Set(kind.into()),
            resource: Set(format!("deployment/{id}")),
            detected_at: Set(now),
            created_at: Set(now),
            updated_at: Set(now),
            ..Default::default()
        }
        .insert(db)
        .await
        .unwrap();
    }

    async fn proposal(db: &DatabaseConnection, id: &str, state: &str, destructive: bool) {
        let now = Utc::now();
        let row = proposal_rows::ActiveModel {
            proposal_id: Set(id.into()),
            tenant_id: Set("acme".into()),
            environment_id: Set("dev".into()),
            finding_ids: Set(serde_json::json!([])),
            direction: Set("adoptObserved".into()),
            plan_summary: Set(serde_json::json!({})),
            destructive: Set(destructive),
            state: Set(state.into()),
            raised_at: Set(now),
            created_at: Set(now),
            updated_at: Set(now),
            ..Default::default()
        };
        row.insert(db).await.unwrap();
    }

    /// How a run ended: its state, completion, apply duration (ms) and minutes.
    type Ended<'a> = (&'a str, DateTime<Utc>, Option<u64>, Option<i32>);

    /// A run, under way or ended.
    async fn run(db: &DatabaseConnection, id: &str, kind: &str, ended: Option<Ended<'_>>) {
        let now = Utc::now();
        let receipt = |ms: u64| {
            serde_json::json!({ "outputs": {}, "durationMs": ms, "result": "succeeded",
                "runnerVersion": "test" })
        };
        run_rows::ActiveModel {
            provisioning_run_id: Set(id.into()),
            tenant_id: Set("acme".into()),
            project_id: Set("shop".into()),
            environment_id: Set("dev".into()),
            specification_id: Set("spec".into()),
            specification_version: Set(1),
            kind: Set(kind.into()),
            state: Set(ended.map(|e| e.0.to_owned())),
            completed_at: Set(ended.map(|e| e.1)),
            apply_receipt: Set(ended.and_then(|e| e.2).map(receipt)),
            apply_minutes: Set(ended.and_then(|e| e.3)),
            started_at: Set(now),
            created_at: Set(now),
            updated_at: Set(now),
            ..Default::default()
        }
        .insert(db)
        .await
        .unwrap();
    }

    fn status(state: RolloutState, instances: usize) -> serde_json::Value {
        let instances = (0..instances)
            .map(|i| RolloutInstance {
                environment_id: format!("env-{i}"),
                wave: 0,
                provisioning_run_id: None,
                skipped: false,
                converged: false,
                rollback_run_id: None,
            })
            .collect();
        serde_json::to_value(RolloutStatus {
            state,
            current_wave: 0,
            waves_completed: 0,
            instances,
            halt: None,
        })
        .unwrap()
    }

    async fn rollout(db: &DatabaseConnection, id: &str, instances: usize) {
        let now = Utc::now();
        rollout_rows::ActiveModel {
            rollout_id: Set(id.into()),
            tenant_id: Set("acme".into()),
            state: Set("Running".into()),
            input: Set(serde_json::json!({})),
            status: Set(status(RolloutState::Running, instances)),
            requested_by: Set("alice".into()),
            created_at: Set(now),
            updated_at: Set(now),
            ..Default::default()
        }
        .insert(db)
        .await
        .unwrap();
    }

    fn lease(id: &str, pool: &str) -> NewLease {
        NewLease {
            lease_id: id.into(),
            tenant_id: "acme".into(),
            project_id: "shop".into(),
            run_id: format!("run-{id}"),
            attempt_id: "attempt-1".into(),
            holder_kind: "provisioning-run".into(),
            holder_id: format!("provisioning-run/run-{id}"),
            pool_id: pool.into(),
            cpu: 1.0,
            memory_gb: 2.0,
        }
    }

    fn key(tenant: &str) -> String {
        tenant.to_owned()
    }

    /// Every counted table inserted into, updated and deleted from: after each write the kept
    /// counts equal a recount from the rows (a missing or wrong trigger breaks one of these).
    async fn counts_stay_exact_on(db: DatabaseConnection) {
        let now = Utc::now();
        let fresh = Some(now - Duration::minutes(1));
        let old = Some(now - Duration::minutes(20));
        let empty = exact(&db, now).await;
        assert_eq!(empty, Counts::default());

        // Environments and their freshness: never observed, observed, observed too long ago,
        // flagged; and an inventory whose environment is registered after it.
        for env in ["dev", "prod", "never"] {
            register(&db, "acme", env).await;
        }
        register(&db, "globex", "solo").await;
        inventory(&db, "dev", fresh).await;
        inventory(&db, "prod", old).await;
        inventory(&db, "late", fresh).await;
        inventory(&db, "unseen", None).await;
        let c = exact(&db, now).await;
        assert_eq!(c.stale_environments.get(&key("acme")), Some(&2));
        assert_eq!(c.stale_environments.get(&key("globex")), Some(&1));
        set_inventory(&db, "dev", inv_rows::Column::Stale, true.into()).await;
        assert_eq!(exact(&db, now).await.stale_environments[&key("acme")], 3);
        set_inventory(&db, "dev", inv_rows::Column::Stale, false.into()).await;
        set_inventory(&db, "prod", inv_rows::Column::ObservedAt, fresh.into()).await;
        assert_eq!(exact(&db, now).await.stale_environments[&key("acme")], 1);
        register(&db, "acme", "late").await;
        register(&db, "acme", "unseen").await;
        assert_eq!(exact(&db, now).await.stale_environments[&key("acme")], 2);
        set_inventory(&db, "unseen", inv_rows::Column::ObservedAt, fresh.into()).await;
        inv_rows::Entity::delete_many()
            .filter(inv_rows::Column::Id.eq("inv-dev"))
            .exec(&db)
            .await
            .unwrap();
        assert_eq!(exact(&db, now).await.stale_environments[&key("acme")], 2);
        // Time passes: what was fresh is stale, with no write at all.
        let later = now + Duration::minutes(30);
        assert_eq!(exact(&db, later).await.stale_environments[&key("acme")], 5);
        // A retired environment leaves the counts: never stale, observed or not.
        let txn = crate::begin_write(&db).await.unwrap();
        crate::environments::retire_in(&txn, "acme", "prod", Some("run-1"))
            .await
            .unwrap();
        txn.commit().await.unwrap();
        assert_eq!(exact(&db, later).await.stale_environments[&key("acme")], 4);
        assert_eq!(exact(&db, now).await.stale_environments[&key("acme")], 2);

        // Findings: open, suppressed, resolved, moved to another kind, deleted.
        for (id, kind) in [
            ("f1", "replica"),
            ("f2", "missing"),
            ("f3", "missing"),
            ("f4", "version"),
        ] {
            finding(&db, id, "dev", kind).await;
        }
        exact(&db, now).await;
        let set = |id: &'static str, col: finding_rows::Column, v: sea_orm::Value| {
            let db = &db;
            async move {
                finding_rows::Entity::update_many()
                    .col_expr(col, Expr::value(v))
                    .filter(finding_rows::Column::FindingId.eq(id))
                    .exec(db)
                    .await
                    .unwrap();
            }
        };
        set("f1", finding_rows::Column::SuppressedBy, "rule-1".into()).await;
        set("f2", finding_rows::Column::ResolvedAt, Some(now).into()).await;
        set("f4", finding_rows::Column::Kind, "missing".into()).await;
        let c = exact(&db, now).await;
        assert_eq!(
            c.open_findings,
            BTreeMap::from([
                ((key("acme"), "missing", false), 2),
                ((key("acme"), "replica", true), 1),
            ])
        );
        set(
            "f2",
            finding_rows::Column::ResolvedAt,
            None::<DateTime<Utc>>.into(),
        )
        .await;
        finding_rows::Entity::delete_many()
            .filter(finding_rows::Column::FindingId.is_in(["f3", "f1"]))
            .exec(&db)
            .await
            .unwrap();
        let c = exact(&db, now).await;
        assert_eq!(
            c.open_findings,
            BTreeMap::from([((key("acme"), "missing", false), 2)])
        );

        // Proposals: raised, decided, deleted.
        proposal(&db, "p1", "Proposed", false).await;
        proposal(&db, "p2", "Proposed", true).await;
        proposal(&db, "p3", "Accepted", false).await;
        exact(&db, now).await;
        proposal_rows::Entity::update_many()
            .col_expr(proposal_rows::Column::State, Expr::value("Rejected"))
            .filter(proposal_rows::Column::ProposalId.eq("p2"))
            .exec(&db)
            .await
            .unwrap();
        proposal_rows::Entity::delete_many()
            .filter(proposal_rows::Column::ProposalId.eq("p3"))
            .exec(&db)
            .await
            .unwrap();
        let c = exact(&db, now).await;
        assert_eq!(
            c.proposals,
            BTreeMap::from([
                ((key("acme"), "Proposed", false), 1),
                ((key("acme"), "Rejected", true), 1),
            ])
        );

        // Runs: under way, then ended; a duration at and just above every bucket's bound;
        // apply minutes today and yesterday; a receipt rewritten; a run deleted.
        run(&db, "r-open", "baseline", None).await;
        exact(&db, now).await;
        run_rows::Entity::update_many()
            .col_expr(run_rows::Column::State, Expr::value("Applied"))
            .col_expr(run_rows::Column::CompletedAt, Expr::value(Some(now)))
            .col_expr(run_rows::Column::ApplyMinutes, Expr::value(Some(3)))
            .col_expr(
                run_rows::Column::ApplyReceipt,
                Expr::value(serde_json::json!({ "outputs": {}, "durationMs": 1200,
                    "result": "succeeded", "runnerVersion": "test" })),
            )
            .filter(run_rows::Column::ProvisioningRunId.eq("r-open"))
            .exec(&db)
            .await
            .unwrap();
        exact(&db, now).await;
        for (i, bound) in APPLY_DURATION_BOUNDS_MS.iter().enumerate() {
            for (j, ms) in [*bound, bound + 1].into_iter().enumerate() {
                let state = if j == 0 { "Applied" } else { "Failed" };
                run(
                    &db,
                    &format!("r-{i}-{j}"),
                    "promotion",
                    Some((state, now, Some(ms), None)),
                )
                .await;
            }
        }
        run(
            &db,
            "r-rejected",
            "baseline",
            Some(("Rejected", now, None, None)),
        )
        .await;
        run(
            &db,
            "r-yesterday",
            "baseline",
            Some(("Applied", now - Duration::days(1), Some(10), Some(7))),
        )
        .await;
        run(
            &db,
            "r-cancelled",
            "baseline",
            Some(("Cancelled", now, None, Some(0))),
        )
        .await;
        let c = exact(&db, now).await;
        let promotions = &c.apply_durations["promotion"];
        assert_eq!(
            promotions.count(),
            2 * APPLY_DURATION_BOUNDS_MS.len() as u64
        );
        assert_eq!(
            promotions.buckets[0], 1,
            "5 ms is in the first bucket, 6 ms is not"
        );
        assert_eq!(
            promotions.buckets[APPLY_DURATION_BOUNDS_MS.len()],
            1,
            "above the last"
        );
        assert_eq!(c.runs_ended[&(key("acme"), "baseline", "Applied")], 2);
        let shop = &c.quota_use[0];
        assert_eq!(
            (shop.minutes_used, shop.leases_granted),
            (3, 0),
            "today's minutes only"
        );
        run_rows::Entity::update_many()
            .col_expr(
                run_rows::Column::ApplyReceipt,
                Expr::value(serde_json::json!({ "outputs": {}, "durationMs": 70_000,
                    "result": "succeeded", "runnerVersion": "test" })),
            )
            .col_expr(run_rows::Column::Kind, Expr::value("promotion"))
            .filter(run_rows::Column::ProvisioningRunId.eq("r-open"))
            .exec(&db)
            .await
            .unwrap();
        exact(&db, now).await;
        run_rows::Entity::delete_many()
            .filter(run_rows::Column::ProvisioningRunId.is_in(["r-open", "r-0-0"]))
            .exec(&db)
            .await
            .unwrap();
        let c = exact(&db, now).await;
        assert_eq!(c.quota_use[0].minutes_used, 0);
        assert_eq!(
            c.quota_use[0].limits.concurrent_runs, 10,
            "the default quota"
        );

        // Leases: waiting, granted, released, in two pools; one deleted.
        for (id, pool) in [("l1", "default"), ("l2", "default"), ("l3", "gpu")] {
            request_lease(&db, lease(id, pool), now).await.unwrap();
        }
        move_lease(&db, "l1", LeaseState::Granted, now)
            .await
            .unwrap();
        move_lease(&db, "l3", LeaseState::Granted, now)
            .await
            .unwrap();
        let c = exact(&db, now).await;
        assert_eq!(c.quota_use[0].leases_granted, 2);
        move_lease(&db, "l1", LeaseState::Released, now)
            .await
            .unwrap();
        lease_rows::Entity::delete_many()
            .filter(lease_rows::Column::LeaseId.eq("l2"))
            .exec(&db)
            .await
            .unwrap();
        let c = exact(&db, now).await;
        assert_eq!(
            c.held_leases,
            BTreeMap::from([((key("acme"), "gpu".to_owned(), "granted"), 1)])
        );

        // Rollouts: started, grown and halted, deleted.
        rollout(&db, "ro1", 3).await;
        rollout(&db, "ro2", 2).await;
        exact(&db, now).await;
        rollout_rows::Entity::update_many()
            .col_expr(rollout_rows::Column::State, Expr::value("Halted"))
            .col_expr(
                rollout_rows::Column::Status,
                Expr::value(status(RolloutState::Halted, 5)),
            )
            .filter(rollout_rows::Column::RolloutId.eq("ro1"))
            .exec(&db)
            .await
            .unwrap();
        rollout_rows::Entity::delete_many()
            .filter(rollout_rows::Column::RolloutId.eq("ro2"))
            .exec(&db)
            .await
            .unwrap();
        let c = exact(&db, now).await;
        assert_eq!(
            c.rollouts,
            BTreeMap::from([((key("acme"), "Halted"), (1, 5))])
        );
    }

    fixtures::on_both_databases!(
        counts_stay_exact_sqlite,
        counts_stay_exact_postgres,
        counts_stay_exact_on
    );

    /// PostgreSQL: the deltas writers append are folded into the counts by the worker's
    /// [`keep_folding`], with no scrape, and the counts stay exact.
    #[tokio::test]
    async fn deltas_are_folded_without_a_scrape_postgres() {
        let db = fixtures::postgres().await;
        let deltas = |db: DatabaseConnection| async move {
            let row = db
                .query_one(Statement::from_string(
                    DbBackend::Postgres,
                    "SELECT COUNT(*) AS n FROM metric_deltas",
                ))
                .await
                .unwrap()
                .unwrap();
            row.try_get::<i64>("", "n").unwrap()
        };
        register(&db, "acme", "dev").await;
        finding(&db, "f1", "dev", "missing").await;
        assert!(
            deltas(db.clone()).await > 0,
            "the writes appended no deltas"
        );
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let folding = tokio::spawn(keep_folding(
            db.clone(),
            std::time::Duration::from_millis(20),
            stopped,
        ));
        let folded = async {
            while deltas(db.clone()).await > 0 {
                tokio::task::yield_now().await;
            }
        };
        tokio::time::timeout(std::time::Duration::from_secs(30), folded)
            .await
            .expect("the deltas were not folded");
        stop.send(()).unwrap();
        folding.await.unwrap();
        let c = exact(&db, Utc::now()).await;
        assert_eq!(c.open_findings.values().sum::<u64>(), 1);
    }

    /// PostgreSQL: writers of the same count never wait for each other (they append deltas).
    /// Counts updated in place would make the second transaction wait for the first one's
    /// commit, which comes after: it would run into its lock timeout instead of committing.
    #[tokio::test]
    async fn writers_of_one_count_do_not_wait_for_each_other_postgres() {
        let db = fixtures::postgres().await;
        let first = db.begin().await.unwrap();
        finding(&first, "f1", "dev", "missing").await;
        let second = db.begin().await.unwrap();
        second
            .execute_unprepared("SET LOCAL lock_timeout = '10s'")
            .await
            .unwrap();
        finding(&second, "f2", "prod", "missing").await;
        second.commit().await.unwrap();
        first.commit().await.unwrap();
        let c = exact(&db, Utc::now()).await;
        assert_eq!(c.open_findings[&(key("acme"), "missing", false)], 2);
    }
}
