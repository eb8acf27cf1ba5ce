//! Benchmark 4: the read API under fixed request rates, on SQLite and on PostgreSQL.
//!
//! One stack per database, seeded like a small tenant: `envs` environments with 20 workloads,
//! each applied by one run (so `GET /factory/provisioning/runs` returns a full page of 50 runs
//! with their receipts, and every inventory holds 20 observed workloads). Then each route gets
//! a warm-up and a measured interval at each rate, one route at a time. The baseline is the
//! trivial `/healthz` of the same server under the same load generator: what HTTP, the
//! generator and this machine cost before any handler work.
//!
//! At scale (`--runs`, `--bulk-envs`, `--findings`): [`crate::bulk`] then adds that many rows
//! copied from the product's own (environments observed now, applied runs and open findings
//! spread over the past year), and more routes are measured: one environment's runs, one run,
//! one environment's findings, a page of environments, and `/metrics` (at `--metrics-rate`: a
//! scrape is every 15 s per Prometheus replica, not 1,000 a second). Before measuring, the
//! metrics the scrape reads from its counts are checked equal to a recount of the rows, and on
//! PostgreSQL the list queries the store issues are printed with `EXPLAIN (ANALYZE, BUFFERS)`.

use crate::api::{for_each_concurrent, workloads};
use crate::bulk;
use crate::loadgen::{self, Outcome};
use crate::stack::{Db, Stack, poll};
use crate::stats::{ms, ratio};
use crate::table::{Table, ratio_cell, verdict};
use anyhow::Context;
use runtime_cloud_models::options::InventoryOptions;
use runtime_cloud_store::entities::{provisioning_runs as runs, runtime_inventories as inv};
use runtime_cloud_store::metrics;
use sea_orm::{ColumnTrait, EntityTrait, PaginatorTrait, QueryFilter};
use std::sync::Arc;
use std::time::Duration;

#[derive(Debug, Clone, clap::Args)]
pub struct Args {
    /// Request rates (per second), comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "1000")]
    pub rates: Vec<f64>,
    /// Measured seconds per route and rate.
    #[arg(long, default_value_t = 10)]
    pub duration: u64,
    /// Unmeasured seconds before each measurement.
    #[arg(long, default_value_t = 2)]
    pub warmup: u64,
    /// Environments (one applied run each).
    #[arg(long, default_value_t = 50)]
    pub envs: usize,
    /// Applied runs added straight into the read DB, spread over the bulk environments.
    #[arg(long, default_value_t = 0)]
    pub runs: usize,
    /// Environments added straight into the read DB (each observed, with an inventory); at
    /// least 1 when `--runs` or `--findings` is given.
    #[arg(long, default_value_t = 0)]
    pub bulk_envs: usize,
    /// Open findings added straight into the read DB, spread over the bulk environments.
    #[arg(long, default_value_t = 0)]
    pub findings: usize,
    /// Request rate of `/metrics` and of the fleet's summary (per second).
    #[arg(long, default_value_t = 20.0)]
    pub metrics_rate: f64,
    /// Databases, comma-separated.
    #[arg(
        long,
        value_enum,
        value_delimiter = ',',
        default_value = "sqlite,postgres"
    )]
    pub db: Vec<Db>,
}

const INVENTORY: &str = "/factory/environments/env-000/inventory";
const RUNS: &str = "/factory/provisioning/runs";
const HEALTHZ: &str = "/healthz";
const METRICS: &str = "/metrics";
/// The fleet's summary: counts, as `/metrics` keeps them; at `/metrics`' rate (a console polls it).
const SUMMARY: &str = "/fleet/meta/summary";

impl Args {
    fn bulk(&self) -> bulk::Rows {
        let envs = if self.runs + self.findings > 0 {
            self.bulk_envs.max(1)
        } else {
            self.bulk_envs
        };
        bulk::Rows {
            envs,
            runs: self.runs,
            findings: self.findings,
        }
    }

    /// The routes measured, each with its own rate when it has one.
    fn routes(&self, stack_run: &str) -> Vec<(String, Option<f64>)> {
        let mut routes = vec![
            (HEALTHZ.to_owned(), None),
            (INVENTORY.to_owned(), None),
            (RUNS.to_owned(), None),
        ];
        let rows = self.bulk();
        if !rows.is_empty() {
            let env = bulk::env_name(rows.envs / 2);
            routes.extend([
                (format!("{RUNS}?environmentId={env}"), None),
                (format!("{RUNS}/{stack_run}"), None),
                (format!("/factory/environments/{env}/drift"), None),
                ("/factory/environments?limit=50".to_owned(), None),
                (METRICS.to_owned(), Some(self.metrics_rate)),
                (SUMMARY.to_owned(), Some(self.metrics_rate)),
                // The first page again, a minute and a half after its first measurement: a
                // figure that moves between the two is the machine's state (what the bulk
                // writes left to flush), not the route's.
                (RUNS.to_owned(), None),
            ]);
        }
        routes
    }
}

/// One route measured at one rate.
struct Measured {
    db: Db,
    route: String,
    /// The rate of the round (`--rates`) it was measured in.
    round: f64,
    /// The rate it was measured at: the round's, or the route's own.
    rate: f64,
    out: Outcome,
}

pub async fn run(args: Args) -> anyhow::Result<()> {
    let mut results = Vec::new();
    for db in &args.db {
        println!(
            "read: {} on {}",
            args.rates
                .iter()
                .map(|r| format!("{r}/s"))
                .collect::<Vec<_>>()
                .join(", "),
            db.name()
        );
        let stack = Stack::start(*db).await?;
        let run = seed(&stack, args.envs)
            .await
            .with_context(|| format!("seeding {}", db.name()))?;
        let rows = args.bulk();
        if !rows.is_empty() {
            use sea_orm::ConnectionTrait;
            let conn = stack.db().await?;
            bulk::seed(&conn, &stack.tenant, "env-000", rows).await?;
            check_metrics(&conn).await?;
            if *db == Db::Postgres {
                // What autovacuum would do on its own some time after a million inserts, done
                // now so it does not compete with the measurement.
                conn.execute_unprepared("VACUUM (ANALYZE)").await?;
                explain(&conn, &stack.tenant, &bulk::env_name(rows.envs / 2)).await?;
            }
        }
        let http = reqwest::Client::new();
        // `/metrics` reads every tenant's counts: a scraper's token (the PlatformAdmin role).
        let scraper = stack.mint(&stack.tenant, &["PlatformAdmin"], &["factory.meta.read"])?;
        for &round in &args.rates {
            for (route, own_rate) in args.routes(&run) {
                let rate = own_rate.unwrap_or(round);
                let url = format!("{}{route}", stack.base_url);
                let token = if route == METRICS {
                    &scraper
                } else {
                    &stack.token
                };
                let warm = Duration::from_secs(args.warmup);
                loadgen::run(&http, &url, token, rate, warm).await;
                let out =
                    loadgen::run(&http, &url, token, rate, Duration::from_secs(args.duration))
                        .await;
                results.push(Measured {
                    db: *db,
                    route,
                    round,
                    rate,
                    out,
                });
            }
        }
        stack.stop().await;
    }
    report(&args, &results);
    Ok(())
}

/// Seeds `envs` environments through the API; returns one of their runs' id.
async fn seed(stack: &Stack, envs: usize) -> anyhow::Result<String> {
    let api = stack.api();
    let wl = Arc::new(workloads(20));
    let names: Vec<String> = (0..envs).map(|i| format!("env-{i:03}")).collect();
    for_each_concurrent(names, 8, |env| {
        let (api, wl) = (api.clone(), wl.clone());
        async move {
            api.environment(&env).await?;
            api.declare(&env, &wl).await?;
            api.plan_run(&env).await?;
            Ok(())
        }
    })
    .await?;
    // Wait until every run applied and the observation after it recorded the inventory, so no
    // background work runs during the measurement.
    let db = stack.db().await?;
    let tenant = stack.tenant.as_str();
    let want = envs as u64;
    poll(
        "the seed runs and observations",
        Duration::from_millis(250),
        Duration::from_secs(600),
        || async {
            let applied = runs::Entity::find()
                .filter(runs::Column::TenantId.eq(tenant))
                .filter(runs::Column::State.eq("Applied"))
                .count(&db)
                .await?;
            let observed = inv::Entity::find()
                .filter(inv::Column::TenantId.eq(tenant))
                .filter(inv::Column::ObservedAt.is_not_null())
                .count(&db)
                .await?;
            Ok((applied >= want && observed >= want).then_some(()))
        },
    )
    .await?;
    let inventory = api.get(INVENTORY).await?;
    anyhow::ensure!(
        inventory["workloads"].as_array().map(Vec::len) == Some(20),
        "the inventory has not 20 workloads: {inventory}"
    );
    // Let the worker go quiet (the last observations' workflows closing).
    tokio::time::sleep(Duration::from_secs(2)).await;
    let page = api.get(RUNS).await?;
    page["items"][0]["provisioningRunId"]
        .as_str()
        .map(str::to_owned)
        .with_context(|| format!("no run in {page}"))
}

/// Fails unless the counts `/metrics` reads equal a recount of the rows (the bulk rows were
/// counted by the triggers like any write).
async fn check_metrics(db: &sea_orm::DatabaseConnection) -> anyhow::Result<()> {
    let options = InventoryOptions::default();
    let now = chrono::Utc::now();
    let started = std::time::Instant::now();
    let read = metrics::read(db, now, &options).await?;
    let first = started.elapsed();
    let recount = metrics::recount(db, now, &options).await?;
    anyhow::ensure!(
        read == recount,
        "the metric counts differ from a recount:\n{read:?}\n{recount:?}"
    );
    println!(
        "  metric counts equal a recount of the rows (first read, folding the seed's deltas: {} ms)",
        ms(first)
    );
    Ok(())
}

/// Prints the plans PostgreSQL chooses for the store's list queries on these rows.
async fn explain(db: &sea_orm::DatabaseConnection, tenant: &str, env: &str) -> anyhow::Result<()> {
    use runtime_cloud_store::{Page, findings, runs};
    use sea_orm::{ConnectionTrait, DbBackend, QueryTrait, Statement};
    let page = Page {
        after: None,
        rows: 51,
    };
    let by_env = runs::RunFilter {
        environment_id: Some(env.to_owned()),
        ..Default::default()
    };
    let queries = [
        (
            "runs, newest first",
            runs::list_query(tenant, &Default::default(), &page).build(DbBackend::Postgres),
        ),
        (
            "one environment's runs",
            runs::list_query(tenant, &by_env, &page).build(DbBackend::Postgres),
        ),
        (
            "one environment's findings",
            findings::list_query(tenant, env, None, None, &page).build(DbBackend::Postgres),
        ),
    ];
    for (what, stmt) in queries {
        let sql = format!("EXPLAIN (ANALYZE, BUFFERS) {stmt}");
        let rows = db
            .query_all(Statement::from_string(DbBackend::Postgres, sql))
            .await?;
        println!("  EXPLAIN {what}: {stmt}");
        for row in rows {
            let line: String = row.try_get_by_index(0)?;
            println!("    {line}");
        }
    }
    Ok(())
}

fn report(args: &Args, results: &[Measured]) {
    let rows = args.bulk();
    let scale = if rows.is_empty() {
        String::new()
    } else {
        format!(
            "; plus {} environments, {} runs, {} open findings written straight into the tables",
            rows.envs, rows.runs, rows.findings
        )
    };
    let mut t = Table::new(
        &format!(
            "Read API: fixed request rate, {} s per route after {} s warm-up ({} environments, 50-run pages{scale})",
            args.duration, args.warmup, args.envs
        ),
        &[
            "DB",
            "route",
            "target /s",
            "achieved /s",
            "p50 ms",
            "p95 ms",
            "p99 ms",
            "max ms",
            "errors",
            "p95 / healthz p95",
        ],
    );
    let mut targets = Table::new(
        "Targets: p95 <= 10 ms at 1,000 requests/s; /metrics p95 <= 20 ms",
        &["DB", "route", "p95 ms", "achieved /s", "verdict"],
    );
    for m in results {
        let base = results
            .iter()
            .find(|b| b.db == m.db && b.route == HEALTHZ && b.round == m.round)
            .map(|b| b.out.latency.p95);
        let rel = base.map_or(f64::NAN, |b| {
            ratio(m.out.latency.p95.as_secs_f64(), b.as_secs_f64())
        });
        let out = &m.out;
        t.row(vec![
            m.db.name().into(),
            m.route.clone(),
            format!("{:.0}", m.rate),
            format!("{:.0}", out.achieved),
            ms(out.latency.p50),
            ms(out.latency.p95),
            ms(out.latency.p99),
            ms(out.latency.max),
            out.errors.to_string(),
            if m.route == HEALTHZ {
                "(baseline)".into()
            } else {
                ratio_cell(rel)
            },
        ]);
        let bound = if m.route == METRICS {
            Some(Duration::from_millis(20))
        } else if (m.rate - 1000.0).abs() < f64::EPSILON && m.route != HEALTHZ {
            Some(Duration::from_millis(10))
        } else {
            None
        };
        if let Some(bound) = bound {
            let met = out.latency.p95 <= bound && out.achieved >= 0.95 * m.rate && out.errors == 0;
            targets.row(vec![
                m.db.name().into(),
                m.route.clone(),
                ms(out.latency.p95),
                format!("{:.0}", out.achieved),
                verdict(met),
            ]);
        }
    }
    t.print();
    targets.print();
}
