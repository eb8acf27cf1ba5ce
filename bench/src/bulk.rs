//! Rows by the million, written straight into a stack's read DB: what the read API and
//! `/metrics` must answer from after years of use, in minutes instead of the years of runs
//! and sweeps it would take through the API.
//!
//! Every row copies a template the product wrote itself (an environment, its inventory and
//! the run that applied it), so its JSON (receipts, workloads) has the real shape and size;
//! only ids, names and times differ. The rows go in through the read DB's own INSERTs, so the
//! metric counts' triggers count them like any write. Synthetic runs and findings are older
//! than anything the product wrote (their UUIDv7 ids spread over the past year), so the
//! product's own rows stay first in every newest-first list.

use anyhow::Context;
use chrono::{DateTime, Duration as Span, Utc};
use runtime_cloud_store::entities::{
    drift_findings as findings, environments as envs, provisioning_runs as runs,
    runtime_inventories as inv,
};
use sea_orm::{
    ActiveModelTrait, ColumnTrait, DatabaseConnection, EntityTrait, IntoActiveModel, QueryFilter,
    TransactionTrait,
};
use std::time::Instant;

/// How many rows of each kind to add.
#[derive(Debug, Clone, Copy, Default)]
pub struct Rows {
    /// Environments named `bulk-00000`…, each observed now with the template's workloads.
    pub envs: usize,
    /// Applied runs, spread over those environments in turn.
    pub runs: usize,
    /// Open `missing` findings, spread over those environments in turn.
    pub findings: usize,
}

impl Rows {
    pub fn is_empty(&self) -> bool {
        self.envs == 0
    }
}

/// Rows per INSERT: a run has 30 columns, and SQLite allows 32,766 parameters a statement.
const CHUNK: usize = 1000;
/// INSERTs per transaction.
const CHUNKS_PER_TXN: usize = 10;

/// The name of the `i`th bulk environment.
pub fn env_name(i: usize) -> String {
    format!("bulk-{i:05}")
}

/// Adds `rows` to `tenant`'s read tables, copying the product's own rows of `template_env`
/// (which must have been applied by a run). Prints what it wrote and how long it took.
pub async fn seed(
    db: &DatabaseConnection,
    tenant: &str,
    template_env: &str,
    rows: Rows,
) -> anyhow::Result<()> {
    if rows.is_empty() {
        return Ok(());
    }
    let started = Instant::now();
    let env = envs::Entity::find()
        .filter(envs::Column::TenantId.eq(tenant))
        .filter(envs::Column::EnvironmentId.eq(template_env))
        .one(db)
        .await?
        .context("the template environment")?;
    let inventory = inv::Entity::find()
        .filter(inv::Column::TenantId.eq(tenant))
        .filter(inv::Column::EnvironmentId.eq(template_env))
        .one(db)
        .await?
        .context("the template inventory")?;
    let run = runs::Entity::find()
        .filter(runs::Column::TenantId.eq(tenant))
        .filter(runs::Column::EnvironmentId.eq(template_env))
        .filter(runs::Column::State.eq("Applied"))
        .one(db)
        .await?
        .context("the template's applied run")?;
    let workload = inventory
        .workloads
        .as_array()
        .and_then(|w| w.first())
        .cloned()
        .context("the template inventory has no workload")?;
    let now = Utc::now();
    // Runs and findings spread evenly over the past year, oldest first.
    let year_ms = Span::days(365).num_milliseconds();
    let at = |i: usize, n: usize| {
        now - Span::milliseconds(year_ms - year_ms * i as i64 / n.max(1) as i64)
    };

    insert(db, rows.envs, |i| {
        let mut m = env.clone();
        m.id = uuid::Uuid::now_v7().to_string();
        m.environment_id = env_name(i);
        m.labels = Some(format!(r#"{{"shard":"{}"}}"#, i % 16));
        m.into_active_model().reset_all()
    })
    .await?;
    insert(db, rows.envs, |i| {
        let mut m = inventory.clone();
        m.id = uuid::Uuid::now_v7().to_string();
        m.environment_id = env_name(i);
        m.observed_at = Some(now);
        m.into_active_model().reset_all()
    })
    .await?;
    insert(db, rows.runs, |i| {
        let started = at(i, rows.runs);
        let mut m = run.clone();
        m.provisioning_run_id = v7(started);
        m.environment_id = env_name(i % rows.envs);
        m.idempotency_key = None;
        m.request_hash = None;
        m.started_at = started;
        m.created_at = started;
        m.completed_at = Some(started + Span::seconds(2));
        m.updated_at = started + Span::seconds(2);
        m.into_active_model().reset_all()
    })
    .await?;
    insert(db, rows.findings, |i| {
        let detected = at(i, rows.findings);
        let env = i % rows.envs;
        findings::Model {
            finding_id: v7(detected),
            tenant_id: tenant.to_owned(),
            environment_id: env_name(env),
            kind: "missing".into(),
            resource: format!("bulk-workload-{}", i / rows.envs),
            declared: Some(workload.clone()),
            observed: None,
            detected_at: detected,
            proposal_id: None,
            resolved_at: None,
            rule: None,
            changed_by: None,
            suppressed_by: None,
            created_at: detected,
            updated_at: detected,
        }
        .into_active_model()
        .reset_all()
    })
    .await?;
    println!(
        "  bulk rows: {} environments and inventories, {} runs, {} findings in {:.1} s",
        rows.envs,
        rows.runs,
        rows.findings,
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

/// A UUIDv7 of `at`: ordering by id orders by time, as for the product's own ids.
fn v7(at: DateTime<Utc>) -> String {
    let ts = uuid::Timestamp::from_unix(
        uuid::NoContext,
        at.timestamp() as u64,
        at.timestamp_subsec_nanos(),
    );
    uuid::Uuid::new_v7(ts).to_string()
}

/// Inserts `n` rows made by `row`, [`CHUNK`] per statement, [`CHUNKS_PER_TXN`] per transaction.
async fn insert<A, F>(db: &DatabaseConnection, n: usize, row: F) -> anyhow::Result<()>
where
    A: ActiveModelTrait + Send,
    <A::Entity as EntityTrait>::Model: IntoActiveModel<A>,
    F: Fn(usize) -> A,
{
    let mut i = 0;
    while i < n {
        let txn = db.begin().await?;
        for _ in 0..CHUNKS_PER_TXN {
            if i >= n {
                break;
            }
            let end = (i + CHUNK).min(n);
            A::Entity::insert_many((i..end).map(&row))
                .exec_without_returning(&txn)
                .await?;
            i = end;
        }
        txn.commit().await?;
    }
    Ok(())
}
