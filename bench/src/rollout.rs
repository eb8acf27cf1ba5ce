//! Benchmark 7: a fleet rollout over many instances, next to the same change made by bare
//! provisioning runs.
//!
//! Both sides start from the same fleet on a stack of their own: `instances` non-production
//! environments, each declared at version 1.0.0 of `workloads` workloads with its sandbox
//! target holding exactly that (written through the product's own `Sandbox::store`, as the
//! fleet benchmark does).
//!
//! - **Rollout**: one `POST /fleet/rollouts` moving every instance to 2.0.0 in the default
//!   waves (a canary, then 25 %, 50 %, 100 % of the instances), no bake; the wall time runs from
//!   the request to the rollout's `Completed` — every instance's run `Applied` *and* observed
//!   converged after it, wave after wave.
//! - **Bare runs** (the baseline): the same change as an operator makes it without the fleet
//!   module — a 2.0.0 declaration and a `promotion` run per environment, `seed_concurrency`
//!   requests in flight, all at once (no waves, no canary, no convergence checks); the wall time
//!   runs from the first request to the last run's observation after its apply.
//!
//! Each side prints its Temporal actions per instance (every workflow run on its task queue,
//! counted as `actions` explains), so the rollout's own cost shows next to the runs it starts.

use crate::actions::{self, Tally};
use crate::api::{Api, for_each_concurrent, workloads};
use crate::stack::{self, Db, Stack, poll, wait_idle};
use crate::stats::ratio;
use crate::table::{Table, ratio_cell};
use anyhow::Context;
use runtime_cloud_models::Workload;
use serde_json::json;
use std::sync::Arc;
use std::time::{Duration, Instant};

#[derive(Debug, Clone, clap::Args)]
pub struct Args {
    /// Instances (non-production environments) the release moves.
    #[arg(long, default_value_t = 1000)]
    pub instances: usize,
    /// Workloads per instance.
    #[arg(long, default_value_t = 2)]
    pub workloads: usize,
    /// Requests in flight while seeding, and the bare runs' requests in flight.
    #[arg(long, default_value_t = 32)]
    pub seed_concurrency: usize,
    #[arg(long, value_enum, default_value_t = Db::Sqlite)]
    pub db: Db,
}

struct Measured {
    wall: Duration,
    tally: Tally,
}

pub async fn run(args: Args) -> anyhow::Result<()> {
    println!(
        "rollout: {} instances x {} workloads on {}",
        args.instances,
        args.workloads,
        args.db.name()
    );
    let rollout = rollout(&args).await.context("rollout")?;
    let bare = bare_runs(&args).await.context("bare runs")?;
    report(&args, &rollout, &bare);
    Ok(())
}

fn names(n: usize) -> Vec<String> {
    (0..n).map(|i| format!("inst-{i:05}")).collect()
}

fn at_version(workloads: &[Workload], version: &str) -> Vec<Workload> {
    workloads
        .iter()
        .cloned()
        .map(|mut w| {
            w.version = version.to_owned();
            w
        })
        .collect()
}

/// A stack whose fleet runs 1.0.0 everywhere, as declared.
async fn seeded(args: &Args) -> anyhow::Result<(Stack, Arc<Vec<Workload>>)> {
    let stack = Stack::start(args.db).await?;
    let wl = Arc::new(at_version(&workloads(args.workloads), "1.0.0"));
    let seeding = Instant::now();
    let fleet = crate::fleet::Fleet {
        workloads: wl.to_vec(),
        drifting: false,
    };
    crate::fleet::seed(&stack, names(args.instances), &fleet, args.seed_concurrency).await?;
    println!(
        "  seeded {} instances in {:.1} s",
        args.instances,
        seeding.elapsed().as_secs_f64()
    );
    Ok((stack, wl))
}

async fn rollout(args: &Args) -> anyhow::Result<Measured> {
    let (stack, wl) = seeded(args).await?;
    let api = stack.api();
    let versions: serde_json::Map<String, serde_json::Value> = wl
        .iter()
        .map(|w| (w.name.clone(), json!("2.0.0")))
        .collect();
    let t0 = Instant::now();
    let started = api
        .post(
            "/fleet/rollouts",
            json!({ "productId": "bench", "versions": versions, "bakeSeconds": 0,
                    "convergeDeadlineSeconds": 3600 }),
            202,
        )
        .await?;
    let id = started["rolloutId"]
        .as_str()
        .context("rollout id")?
        .to_owned();
    let waves = started["input"]["waves"].as_array().map_or(0, Vec::len);
    let last = std::sync::Mutex::new(Instant::now());
    poll(
        "the rollout to complete",
        Duration::from_millis(500),
        Duration::from_secs(7200),
        || {
            let api = &api;
            let id = &id;
            let last = &last;
            async move {
                let r = api.get(&format!("/fleet/rollouts/{id}")).await?;
                match r["state"].as_str() {
                    Some("Completed") => return Ok(Some(())),
                    Some("Running") => {}
                    other => anyhow::bail!("the rollout ended {other:?}: {r}"),
                }
                let mut last = last.lock().unwrap_or_else(|e| e.into_inner());
                if last.elapsed() > Duration::from_secs(15) {
                    println!(
                        "  wave {}/{waves} after {:.0} s",
                        r["status"]["currentWave"].as_u64().unwrap_or(0) + 1,
                        t0.elapsed().as_secs_f64()
                    );
                    *last = Instant::now();
                }
                Ok(None)
            }
        },
    )
    .await?;
    let wall = t0.elapsed();
    println!(
        "  rollout completed in {:.1} s ({waves} waves)",
        wall.as_secs_f64()
    );
    let tally = tally(&stack).await?;
    stack.stop().await;
    Ok(Measured { wall, tally })
}

async fn bare_runs(args: &Args) -> anyhow::Result<Measured> {
    let (stack, wl) = seeded(args).await?;
    let api = stack.api();
    let next = Arc::new(at_version(&wl, "2.0.0"));
    let t0 = Instant::now();
    for_each_concurrent(names(args.instances), args.seed_concurrency, |env| {
        let (api, next) = (api.clone(), next.clone());
        async move {
            api.declare(&env, &next).await?;
            api.post(
                "/factory/provisioning/runs",
                json!({ "environmentId": env, "kind": "promotion" }),
                202,
            )
            .await?;
            Ok(())
        }
    })
    .await
    .context("starting the runs")?;
    let client = runtime_cloud_temporal::connect(&stack::temporal_address()?, "default").await?;
    // Every run has applied and observed after it once no workflow of the queue runs.
    wait_applied(&api, args.instances).await?;
    wait_idle(&client, &stack.task_queue).await?;
    let wall = t0.elapsed();
    println!("  bare runs done in {:.1} s", wall.as_secs_f64());
    let tally = tally(&stack).await?;
    stack.stop().await;
    Ok(Measured { wall, tally })
}

async fn wait_applied(api: &Api, n: usize) -> anyhow::Result<()> {
    poll(
        "every run applied",
        Duration::from_millis(500),
        Duration::from_secs(7200),
        || async move {
            let applied = api.runs_in_state("Applied").await?.len();
            let failed = api.runs_in_state("Failed").await?.len();
            anyhow::ensure!(failed == 0, "{failed} runs failed");
            Ok((applied >= n).then_some(()))
        },
    )
    .await
}

/// The Temporal actions of every workflow run on the stack's task queue.
async fn tally(stack: &Stack) -> anyhow::Result<Tally> {
    let client = runtime_cloud_temporal::connect(&stack::temporal_address()?, "default").await?;
    wait_idle(&client, &stack.task_queue).await?;
    actions::tally(&client, &crate::stack::product_workflows(&stack.task_queue)).await
}

fn report(args: &Args, rollout: &Measured, bare: &Measured) {
    let n = args.instances as f64;
    let mut table = Table::new(
        &format!(
            "Fleet rollout vs bare runs: {} instances x {} workloads, {}",
            args.instances,
            args.workloads,
            args.db.name()
        ),
        &[
            "",
            "wall s",
            "instances/s",
            "workflow runs",
            "actions / instance",
        ],
    );
    for (name, m) in [
        ("rollout (waves, converged as observed)", rollout),
        ("bare runs (all at once)", bare),
    ] {
        table.row(vec![
            name.to_owned(),
            format!("{:.1}", m.wall.as_secs_f64()),
            format!("{:.1}", n / m.wall.as_secs_f64()),
            m.tally.runs.to_string(),
            format!("{:.1}", m.tally.actions / n),
        ]);
    }
    table.row(vec![
        "rollout / bare".to_owned(),
        ratio_cell(ratio(rollout.wall.as_secs_f64(), bare.wall.as_secs_f64())),
        String::new(),
        String::new(),
        ratio_cell(ratio(rollout.tally.actions, bare.tally.actions)),
    ]);
    table.print();
}
