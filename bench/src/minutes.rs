//! The day's apply minutes of a project, as every run's start sums them (the API before it
//! answers 429, the run's lease request before it plans; the quota's `executionMinutesPerDay`):
//! `capacity::minutes_used` with the index that holds the minutes (`ix_provisioning_runs_project_minutes`) next to the
//! same sum with an index of the runs' completion times in its place, which found the day's runs but read each
//! one's row for its minutes. Both in the same database, on the same rows.

use crate::stack::Db;
use crate::stats::{ms, ratio, summarize};
use crate::table::{Table, ratio_cell};
use anyhow::Context;
use chrono::{Duration as Span, Utc};
use runtime_cloud_store::entities::provisioning_runs as runs;
use sea_orm::{ActiveValue::Set, ConnectionTrait, DatabaseConnection, EntityTrait};
use std::time::{Duration, Instant};

#[derive(Debug, Clone, clap::Args)]
pub struct Args {
    /// Runs of the project completed today (each counted by the sum).
    #[arg(long, default_value_t = 30_000)]
    pub today: usize,
    /// Runs of the project completed on earlier days (in the table, outside the sum).
    #[arg(long, default_value_t = 270_000)]
    pub older: usize,
    /// Sums timed with each index.
    #[arg(long, default_value_t = 30)]
    pub samples: usize,
    #[arg(long, value_enum, default_value_t = Db::Sqlite)]
    pub db: Db,
    /// Gather statistics only, without PostgreSQL's vacuum: the day's rows as just written.
    #[arg(long)]
    pub fresh: bool,
}

/// Rows per INSERT (SQLite allows 32,766 parameters a statement).
const CHUNK: usize = 1000;

pub async fn run(args: Args) -> anyhow::Result<()> {
    println!(
        "minutes: {} runs of one project completed today, {} earlier, on {}{}",
        args.today,
        args.older,
        args.db.name(),
        if args.fresh { ", not vacuumed" } else { "" }
    );
    let dir = crate::stack::work_dir()?;
    let (url, postgres) = crate::stack::fresh_db(args.db, dir.path()).await?;
    // As the product connects: its SQLite connection is not sqlx's (`store::connect`).
    let db = runtime_cloud_store::connect::open(&url).await?;
    let result = measure(&db, &args).await;
    db.close().await.ok();
    if let Some((admin, name)) = postgres {
        crate::stack::drop_postgres(&admin, &name).await;
    }
    result
}

async fn measure(db: &DatabaseConnection, args: &Args) -> anyhow::Result<()> {
    use sea_orm_migration::MigratorTrait;
    runtime_cloud_store::Migrator::up(db, None).await?;
    let started = Instant::now();
    seed(db, args).await.context("write the runs")?;
    println!(
        "wrote {} runs in {:.1} s",
        args.today + args.older,
        started.elapsed().as_secs_f64()
    );
    settle(db, args.fresh).await?;
    let covered = time(db, args).await?;
    // The baseline: an index that finds the day's runs, in place of the one holding their minutes.
    db.execute_unprepared("DROP INDEX ix_provisioning_runs_project_minutes")
        .await?;
    db.execute_unprepared(
        "CREATE INDEX ix_provisioning_runs_project_completed \
         ON provisioning_runs (tenant_id, project_id, completed_at)",
    )
    .await?;
    settle(db, args.fresh).await?;
    let uncovered = time(db, args).await?;

    let (c, u) = (summarize(&covered.1), summarize(&uncovered.1));
    anyhow::ensure!(covered.0 == uncovered.0, "the two sums differ");
    let mut t = Table::new(
        &format!(
            "The day's minutes of a project ({} runs today, sum {}), {}",
            args.today,
            covered.0,
            args.db.name()
        ),
        &["", "sums", "p50 ms", "p95 ms", "max ms"],
    );
    for (name, s) in [
        ("product (the minutes in the index)", &c),
        ("baseline (each run's row read)", &u),
    ] {
        t.row(vec![
            name.into(),
            s.count.to_string(),
            ms(s.p50),
            ms(s.p95),
            ms(s.max),
        ]);
    }
    t.row(vec![
        "product / baseline".into(),
        String::new(),
        ratio_cell(ratio(secs(c.p50), secs(u.p50))),
        ratio_cell(ratio(secs(c.p95), secs(u.p95))),
        ratio_cell(ratio(secs(c.max), secs(u.max))),
    ]);
    t.print();
    Ok(())
}

/// The table as the database keeps it in the steady state: its statistics gathered and, on
/// PostgreSQL, vacuumed as autovacuum does. An index-only scan skips the table only on pages
/// the last vacuum found all visible; rows written or updated since are read from the table
/// either way (`--fresh` measures that).
async fn settle(db: &DatabaseConnection, fresh: bool) -> anyhow::Result<()> {
    let sql = match db.get_database_backend() {
        sea_orm::DbBackend::Postgres if !fresh => "VACUUM ANALYZE provisioning_runs",
        _ => "ANALYZE",
    };
    db.execute_unprepared(sql).await?;
    Ok(())
}

fn secs(d: Duration) -> f64 {
    d.as_secs_f64()
}

/// The sum (as the product asks it) `args.samples` times, after one to warm the cache.
async fn time(db: &DatabaseConnection, args: &Args) -> anyhow::Result<(u32, Vec<Duration>)> {
    use runtime_cloud_store::capacity::minutes_used;
    let since = runtime_cloud_models::capacity::day_started_at(Utc::now());
    let sum = minutes_used(db, "acme", "shop", since).await?;
    let mut samples = Vec::with_capacity(args.samples);
    for _ in 0..args.samples {
        let at = Instant::now();
        minutes_used(db, "acme", "shop", since).await?;
        samples.push(at.elapsed());
    }
    Ok((sum, samples))
}

/// The project's runs: `today` completed since midnight (UTC), `older` on the days before,
/// each with an apply receipt of a real run's size, a minute each.
async fn seed(db: &DatabaseConnection, args: &Args) -> anyhow::Result<()> {
    let now = Utc::now();
    let midnight = runtime_cloud_models::capacity::day_started_at(now);
    let since_midnight = (now - midnight).num_milliseconds().max(1);
    let receipt = serde_json::json!({
        "outputs": {"endpoint": "https://shop.example.test", "replicas": 3},
        "durationMs": 41_000,
        "result": "succeeded",
        "runnerVersion": "sandbox-1",
        "reason": null,
        "padding": "x".repeat(600),
    });
    let total = args.today + args.older;
    for start in (0..total).step_by(CHUNK) {
        let rows = (start..(start + CHUNK).min(total)).map(|i| {
            let completed = if i < args.today {
                midnight + Span::milliseconds(i as i64 % since_midnight)
            } else {
                midnight - Span::minutes(1 + i as i64 % (60 * 24 * 30))
            };
            runs::ActiveModel {
                provisioning_run_id: Set(format!("run-{i:08}")),
                tenant_id: Set("acme".into()),
                project_id: Set("shop".into()),
                environment_id: Set(format!("env-{:04}", i % 1000)),
                specification_id: Set("spec".into()),
                specification_version: Set(1),
                kind: Set("Deploy".into()),
                apply_receipt: Set(Some(receipt.clone())),
                apply_minutes: Set(Some(1)),
                state: Set(Some("Applied".into())),
                started_at: Set(completed - Span::minutes(1)),
                completed_at: Set(Some(completed)),
                created_at: Set(completed - Span::minutes(1)),
                updated_at: Set(completed),
                ..Default::default()
            }
        });
        runs::Entity::insert_many(rows).exec(db).await?;
    }
    Ok(())
}
