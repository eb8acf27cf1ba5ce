//! Benchmark 4: the read API under fixed request rates, on SQLite and on PostgreSQL.
//!
//! One stack per database, seeded like a small tenant: `envs` environments with 20 workloads,
//! each applied by one run (so `GET /factory/provisioning/runs` returns a full page of 50 runs
//! with their receipts, and every inventory holds 20 observed workloads). Then each route gets
//! a warm-up and a measured interval at each rate, one route at a time. The baseline is the
//! trivial `/healthz` of the same server under the same load generator: what HTTP, the
//! generator and this machine cost before any handler work.

use crate::api::{for_each_concurrent, workloads};
use crate::loadgen::{self, Outcome};
use crate::stack::{Db, Stack, poll};
use crate::stats::{ms, ratio};
use crate::table::{Table, ratio_cell, verdict};
use anyhow::Context;
use runtime_cloud_store::entities::{provisioning_runs as runs, runtime_inventories as inv};
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
        seed(&stack, args.envs)
            .await
            .with_context(|| format!("seeding {}", db.name()))?;
        let http = reqwest::Client::new();
        for &rate in &args.rates {
            for route in [HEALTHZ, INVENTORY, RUNS] {
                let url = format!("{}{route}", stack.base_url);
                let warm = Duration::from_secs(args.warmup);
                loadgen::run(&http, &url, &stack.token, rate, warm).await;
                let out = loadgen::run(
                    &http,
                    &url,
                    &stack.token,
                    rate,
                    Duration::from_secs(args.duration),
                )
                .await;
                results.push((*db, route, rate, out));
            }
        }
        stack.stop().await;
    }
    report(&args, &results);
    Ok(())
}

async fn seed(stack: &Stack, envs: usize) -> anyhow::Result<()> {
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
    Ok(())
}

fn report(args: &Args, results: &[(Db, &str, f64, Outcome)]) {
    let mut t = Table::new(
        &format!(
            "Read API: fixed request rate, {} s per route after {} s warm-up ({} environments, 50-run pages)",
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
        "Target: p95 <= 10 ms at 1,000 requests/s",
        &["DB", "route", "p95 ms", "achieved /s", "verdict"],
    );
    for (db, route, rate, out) in results {
        let base = results
            .iter()
            .find(|(d, r, q, _)| d == db && *r == HEALTHZ && q == rate)
            .map(|(_, _, _, o)| o.latency.p95);
        let rel = base.map_or(f64::NAN, |b| {
            ratio(out.latency.p95.as_secs_f64(), b.as_secs_f64())
        });
        t.row(vec![
            db.name().into(),
            route.to_string(),
            format!("{rate:.0}"),
            format!("{:.0}", out.achieved),
            ms(out.latency.p50),
            ms(out.latency.p95),
            ms(out.latency.p99),
            ms(out.latency.max),
            out.errors.to_string(),
            if *route == HEALTHZ {
                "(baseline)".into()
            } else {
                ratio_cell(rel)
            },
        ]);
        if (*rate - 1000.0).abs() < f64::EPSILON && *route != HEALTHZ {
            let met = out.latency.p95 <= Duration::from_millis(10)
                && out.achieved >= 0.95 * rate
                && out.errors == 0;
            targets.row(vec![
                db.name().into(),
                route.to_string(),
                ms(out.latency.p95),
                format!("{:.0}", out.achieved),
                verdict(met),
            ]);
        }
    }
    t.print();
    targets.print();
}
