//! Benchmark 1: provisioning throughput and latency.
//!
//! Product: non-production environments are registered and declared over HTTP, then runs are
//! requested with `POST /factory/provisioning/runs`, one per environment (runs on one
//! environment are serialized by its lock by design). Latency is from the moment the client
//! sent the request to the `completedAt` the product recorded with `Applied`; the rate is runs
//! divided by the time from the first request to the last `Applied`.
//!
//! Baselines: [`crate::baseline::BaselineRun`], six no-op steps, started with the Temporal
//! client on the same server, worker in its own process with the same settings; latency from
//! the start request to the close time Temporal recorded. The baseline runs the six as
//! regular activities; the second runs them split as the product does (four local), so the
//! ratio to it is what the lock, the search attributes and the after-apply observation cost.
//! `--shape` adds a baseline of any shape, the product's own Temporal shape among them, to tell
//! what that shape costs Temporal from what the product's own work costs.

use crate::api::{Api, for_each_concurrent, workloads};
use crate::baseline::{self, BaselineRun, PRODUCT_SHAPED_RUN, REGULAR_RUN};
use crate::stack::{self, Db, Stack, poll};
use crate::stats::{Summary, ms, rate, ratio, summarize};
use crate::table::{Table, ratio_cell, verdict};
use anyhow::{Context, bail};
use runtime_cloud_store::entities::provisioning_runs as runs;
use runtime_cloud_workflows::search_attributes::{ENVIRONMENT_ID, RUN_KIND, TENANT_ID};
use sea_orm::{ColumnTrait, EntityTrait, PaginatorTrait, QueryFilter};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};
use temporalio_client::{Client, WorkflowCountOptions, WorkflowListOptions, WorkflowStartOptions};
use temporalio_common::search_attributes::SearchAttributes;

#[derive(Debug, Clone, clap::Args)]
pub struct Args {
    /// Runs in the batch, each on its own environment.
    #[arg(long, default_value_t = 100)]
    pub runs: usize,
    /// Runs measured one at a time on an idle server, before the batch.
    #[arg(long, default_value_t = 20)]
    pub single: usize,
    /// Requests in flight while submitting the batch.
    #[arg(long, default_value_t = 16)]
    pub concurrency: usize,
    /// Workloads in each environment's specification.
    #[arg(long, default_value_t = 5)]
    pub workloads: usize,
    #[arg(long, value_enum, default_value_t = Db::Sqlite)]
    pub db: Db,
    /// Also measure a baseline of this shape (see `BaselineRun`: `L` local, `R` regular, `U` a
    /// search attribute upsert, `A` started with the product's search attributes and fairness
    /// key, `S` with the search attributes only, `F` with the fairness key only), to tell what
    /// the product's shape costs Temporal from the product's own work; the product's today:
    /// `ALLRLLLLRULL`.
    #[arg(long)]
    pub shape: Option<String>,
    /// Measure only baselines of these shapes (comma-separated), alternating them `--rounds`
    /// times on the same server: what a change of shape costs, apart from the noise of one
    /// run against another.
    #[arg(long, value_delimiter = ',')]
    pub shapes: Vec<String>,
    /// Rounds of `--shapes` or of `--payload-encryption`.
    #[arg(long, default_value_t = 3)]
    pub rounds: usize,
    /// Measure only the product, with payload encryption off and on
    /// (`RUNTIME_CLOUD_PAYLOAD_KEY_FILES`), alternating them `--rounds` times on the same
    /// server: what encrypting every payload costs a run (target: at most 1.1 x the time per
    /// run).
    #[arg(long)]
    pub payload_encryption: bool,
}

/// What one side (product or baseline) measured.
struct Measured {
    single: Summary,
    batch: Summary,
    runs_per_sec: f64,
    elapsed: Duration,
    worker_peak_mib: f64,
    /// Temporal cost of the whole run (warm-up, single and batch runs, and what they started).
    tally: crate::actions::Tally,
    /// Runs the tally covers.
    total_runs: usize,
    /// CPU milliseconds a batch run cost the Temporal server, the worker and the API (0: the
    /// side has no API; the server's is 0 when `RC_BENCH_TEMPORAL_PID` is not set).
    cpu: [f64; 3],
}

pub async fn run(args: Args) -> anyhow::Result<()> {
    println!(
        "throughput: {} runs ({} concurrent requests), {} single runs, on {}",
        args.runs,
        args.concurrency,
        args.single,
        args.db.name()
    );
    if !args.shapes.is_empty() {
        return shapes(&args).await;
    }
    if args.payload_encryption {
        return payload_encryption(&args).await;
    }
    let product = product(&args, &[]).await.context("product")?;
    let regular = baseline(&args, REGULAR_RUN).await.context("baseline")?;
    let shaped = baseline(&args, PRODUCT_SHAPED_RUN)
        .await
        .context("product-shaped baseline")?;
    report(&args, &product, &regular, &shaped);
    if let Some(shape) = &args.shape {
        let shape: &'static str = Box::leak(shape.clone().into_boxed_str());
        let own = baseline(&args, shape)
            .await
            .context("baseline of the asked shape")?;
        report_shape(shape, &product, &own);
    }
    Ok(())
}

/// `--shapes`: each shape's baseline in turn, `--rounds` times, each rate next to the first
/// shape's in the same round.
async fn shapes(args: &Args) -> anyhow::Result<()> {
    let shapes: Vec<&'static str> = args
        .shapes
        .iter()
        .map(|s| &*Box::leak(s.clone().into_boxed_str()))
        .collect();
    println!(
        "| round | shape | runs/s | / `{}` | history events / run | actions / run | server CPU ms / run | worker CPU ms / run |",
        shapes[0]
    );
    println!("|---|---|---|---|---|---|---|---|");
    for round in 1..=args.rounds {
        let mut first = None;
        for shape in &shapes {
            let m = baseline(args, shape).await.context("baseline of a shape")?;
            let n = m.total_runs.max(1) as f64;
            let base = *first.get_or_insert(m.runs_per_sec);
            println!(
                "| {round} | `{shape}` | {:.1} | {:.2} | {:.1} | {:.2} | {:.1} | {:.1} |",
                m.runs_per_sec,
                m.runs_per_sec / base,
                m.tally.events as f64 / n,
                m.tally.actions / n,
                m.cpu[0],
                m.cpu[1]
            );
        }
    }
    Ok(())
}

/// The payload key of `--payload-encryption`: 32 bytes in base64, fixed, for the benchmark
/// only (what it measures is the work of encrypting, not the key).
const BENCH_PAYLOAD_KEY: &str = "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=";

/// The most time per run encryption may add: 1.1 x the time without it.
const ENCRYPTION_TARGET: f64 = 1.1;

/// `--payload-encryption`: the product with plain payloads and with every payload encrypted
/// (one key), side by side `--rounds` times on the same server, each round in the other order
/// so that a machine growing slower or faster weighs on both; each round's time per run with
/// encryption over without, and their median against the target.
async fn payload_encryption(args: &Args) -> anyhow::Result<()> {
    let keys = stack::work_dir()?;
    let key = keys.path().join("bench.key");
    std::fs::write(&key, format!("{BENCH_PAYLOAD_KEY}\n")).context("writing the key file")?;
    let encrypted_env = [(
        "RUNTIME_CLOUD_PAYLOAD_KEY_FILES".to_owned(),
        key.display().to_string(),
    )];
    let ms_per_run = |m: &Measured| 1000.0 / m.runs_per_sec;
    let mut t = Table::new(
        &format!(
            "Payload encryption: {} runs, {} requests in flight, {} ({} workloads each), {} rounds",
            args.runs,
            args.concurrency,
            args.db.name(),
            args.workloads,
            args.rounds
        ),
        &[
            "round",
            "payloads",
            "runs/s",
            "ms per run",
            "p50 ms",
            "p95 ms",
            "single-run p50 ms",
            "worker CPU ms / run",
            "API CPU ms / run",
        ],
    );
    let mut ratios = Vec::new();
    for round in 1..=args.rounds {
        let order = if round % 2 == 1 {
            [false, true]
        } else {
            [true, false]
        };
        let mut sides: [Option<Measured>; 2] = [None, None];
        for encrypted in order {
            let env: &[(String, String)] = if encrypted { &encrypted_env } else { &[] };
            let measured = product(args, env)
                .await
                .with_context(|| format!("round {round}, encrypted: {encrypted}"))?;
            sides[usize::from(encrypted)] = Some(measured);
        }
        let [Some(plain), Some(encrypted)] = sides else {
            bail!("round {round} measured one side only");
        };
        for (name, m) in [("plain", &plain), ("encrypted", &encrypted)] {
            t.row(vec![
                round.to_string(),
                name.to_owned(),
                format!("{:.1}", m.runs_per_sec),
                format!("{:.1}", ms_per_run(m)),
                ms(m.batch.p50),
                ms(m.batch.p95),
                ms(m.single.p50),
                format!("{:.1}", m.cpu[1]),
                format!("{:.1}", m.cpu[2]),
            ]);
        }
        let per_run = ratio(ms_per_run(&encrypted), ms_per_run(&plain));
        let r = |a: Duration, b: Duration| ratio_cell(ratio(a.as_secs_f64(), b.as_secs_f64()));
        t.row(vec![
            round.to_string(),
            "encrypted / plain".to_owned(),
            ratio_cell(ratio(encrypted.runs_per_sec, plain.runs_per_sec)),
            ratio_cell(per_run),
            r(encrypted.batch.p50, plain.batch.p50),
            r(encrypted.batch.p95, plain.batch.p95),
            r(encrypted.single.p50, plain.single.p50),
            ratio_cell(ratio(encrypted.cpu[1], plain.cpu[1])),
            ratio_cell(ratio(encrypted.cpu[2], plain.cpu[2])),
        ]);
        ratios.push(per_run);
    }
    t.print();
    let mut sorted = ratios.clone();
    sorted.sort_by(f64::total_cmp);
    let median = sorted.get(sorted.len() / 2).copied().unwrap_or(f64::NAN);
    let mut v = Table::new("Targets", &["target", "measured", "verdict"]);
    v.row(vec![
        format!("time per run encrypted <= {ENCRYPTION_TARGET} x plain (median of the rounds)"),
        format!(
            "{median:.2} x (rounds: {})",
            ratios
                .iter()
                .map(|r| format!("{r:.2}"))
                .collect::<Vec<_>>()
                .join(", ")
        ),
        verdict(median <= ENCRYPTION_TARGET),
    ]);
    v.print();
    Ok(())
}

/// The baseline of `--shape` next to the product: what is left of the ratio is the product's
/// own work (its database, files, observation), not its shape on Temporal.
fn report_shape(shape: &str, p: &Measured, b: &Measured) {
    let n = |m: &Measured| m.total_runs.max(1) as f64;
    let mut t = Table::new(
        &format!("Baseline of the shape `{shape}`"),
        &[
            "",
            "runs/s",
            "p95 ms",
            "history events / run",
            "actions / run (est.)",
        ],
    );
    for (name, m) in [("product", p), ("baseline", b)] {
        t.row(vec![
            name.to_owned(),
            format!("{:.1}", m.runs_per_sec),
            ms(m.batch.p95),
            format!("{:.1}", m.tally.events as f64 / n(m)),
            format!("{:.2}", m.tally.actions / n(m)),
        ]);
    }
    t.row(vec![
        "product / baseline".to_owned(),
        ratio_cell(ratio(p.runs_per_sec, b.runs_per_sec)),
        ratio_cell(ratio(p.batch.p95.as_secs_f64(), b.batch.p95.as_secs_f64())),
        ratio_cell(ratio(p.tally.events as f64, b.tally.events as f64)),
        ratio_cell(ratio(p.tally.actions, b.tally.actions)),
    ]);
    t.print();
}

fn since(sent: SystemTime, done: SystemTime) -> Duration {
    done.duration_since(sent).unwrap_or_default()
}

fn completed_at(run: &serde_json::Value) -> anyhow::Result<SystemTime> {
    let at = run["completedAt"].as_str().context("completedAt")?;
    Ok(chrono::DateTime::parse_from_rfc3339(at)?.to_utc().into())
}

/// The product's side, its processes started with `env` besides.
async fn product(args: &Args, env: &[(String, String)]) -> anyhow::Result<Measured> {
    // The engine's rate, not the API's pace of one tenant's submissions (20 a second by
    // default) …
    let unpaced = [
        "RUNTIME_CLOUD_RUN_SUBMISSIONS_PER_SECOND",
        "RUNTIME_CLOUD_RUN_SUBMISSION_BURST",
    ]
    .map(|k| (k.to_owned(), "1000000".to_owned()));
    let env = unpaced.into_iter().chain(env.iter().cloned()).collect();
    let stack = Stack::start_with(args.db, env).await?;
    // … nor the default quota's: every batch run may hold a lease at once, as
    // every baseline workflow runs at once.
    stack
        .allow_concurrent_runs("bench", args.runs.max(1) as u32 + 1)
        .await?;
    let api = stack.api();
    let wl = Arc::new(workloads(args.workloads));
    let single: Vec<String> = (0..args.single).map(|i| format!("single-{i:03}")).collect();
    let batch: Vec<String> = (0..args.runs).map(|i| format!("env-{i:05}")).collect();
    let all: Vec<String> = std::iter::once("warmup".to_owned())
        .chain(single.iter().cloned())
        .chain(batch.iter().cloned())
        .collect();
    for_each_concurrent(all, 16, |env| {
        let (api, wl) = (api.clone(), wl.clone());
        async move {
            api.environment(&env).await?;
            api.declare(&env, &wl).await
        }
    })
    .await
    .context("seeding environments")?;

    // Warm-up (connections, the first lock workflow), not counted.
    let (id, _) = api.plan_run("warmup").await?;
    wait_applied(&api, &id).await?;

    let mut single_lat = Vec::new();
    for env in &single {
        let (id, sent) = api.plan_run(env).await?;
        let run = wait_applied(&api, &id).await?;
        single_lat.push(since(sent, completed_at(&run)?));
    }

    let sent: Arc<Mutex<HashMap<String, SystemTime>>> = Default::default();
    let meter = crate::cpu::Meter::start([
        crate::cpu::server_pid(),
        Some(stack.worker_pid()),
        Some(stack.api_pid()),
    ]);
    let start = SystemTime::now();
    for_each_concurrent(batch.clone(), args.concurrency, |env| {
        let (api, sent) = (api.clone(), sent.clone());
        async move {
            let (id, at) = api.plan_run(&env).await?;
            sent.lock()
                .unwrap_or_else(|e| e.into_inner())
                .insert(id, at);
            Ok(())
        }
    })
    .await
    .context("requesting runs")?;
    // Count in the read DB (one indexed query) rather than paging the API while it works.
    let db = stack.db().await?;
    let want = (1 + args.single + args.runs) as u64;
    let tenant = stack.tenant.clone();
    poll(
        "every run Applied",
        Duration::from_millis(200),
        Duration::from_secs(1800),
        || {
            let (db, tenant) = (&db, &tenant);
            async move {
                let in_state = |s: &'static str| {
                    runs::Entity::find()
                        .filter(runs::Column::TenantId.eq(tenant.as_str()))
                        .filter(runs::Column::State.eq(s))
                        .count(db)
                };
                if in_state("Failed").await? > 0 {
                    bail!("a run failed; see the worker log");
                }
                Ok((in_state("Applied").await? >= want).then_some(()))
            }
        },
    )
    .await?;
    let worker_peak_mib = crate::rss::of(stack.worker_pid()).peak_mib;
    // Let the observations the runs started after their apply finish: the batch's CPU is
    // all of its runs' work.
    let client = runtime_cloud_temporal::connect(&stack::temporal_address()?, "default").await?;
    stack::wait_idle(&client, &stack.task_queue).await?;
    let cpu = meter.per_run(args.runs);
    // Read the receipts as a user would: the list, filtered by state.
    let applied = api.runs_in_state("Applied").await?;
    let sent = sent.lock().unwrap_or_else(|e| e.into_inner()).clone();
    let mut lat = Vec::new();
    let mut last = start;
    for run in &applied {
        let id = run["provisioningRunId"].as_str().unwrap_or_default();
        if let Some(at) = sent.get(id) {
            let done = completed_at(run)?;
            last = last.max(done);
            lat.push(since(*at, done));
        }
    }
    let tally =
        crate::actions::tally(&client, &crate::stack::product_workflows(&stack.task_queue)).await?;
    stack.stop().await;
    let elapsed = since(start, last);
    Ok(Measured {
        single: summarize(&single_lat),
        batch: summarize(&lat),
        runs_per_sec: rate(lat.len(), elapsed),
        elapsed,
        worker_peak_mib,
        tally,
        total_runs: want as usize,
        cpu,
    })
}

/// Polls a run until it is `Applied` (fails on any other end state).
async fn wait_applied(api: &Api, id: &str) -> anyhow::Result<serde_json::Value> {
    poll(
        "the run to apply",
        Duration::from_millis(10),
        Duration::from_secs(120),
        || async {
            let run = api.get(&format!("/factory/provisioning/runs/{id}")).await?;
            match run["state"].as_str() {
                Some("Applied") => Ok(Some(run)),
                Some(s @ ("Failed" | "Rejected" | "Cancelled")) => {
                    bail!("run {id} ended {s}: {run}")
                }
                _ => Ok(None),
            }
        },
    )
    .await
}

/// Runs the baseline whose runs have `shape` (see [`BaselineRun`]).
async fn baseline(args: &Args, shape: &'static str) -> anyhow::Result<Measured> {
    let dir = stack::work_dir()?;
    let tq = format!("baseline-{}", stack::suffix());
    let worker = baseline::spawn_worker(&tq, dir.path())?;
    let client = runtime_cloud_temporal::connect(&stack::temporal_address()?, "default").await?;
    let start_one = |client: Client, id: String, tq: String| async move {
        // As the API starts a run: its search attributes (`A` or `S`) and its tenant's
        // fairness key (`A` or `F`).
        let attributes = shape.contains(['A', 'S']).then(|| {
            SearchAttributes::new([
                TENANT_ID.value_set("bench".to_owned()),
                ENVIRONMENT_ID.value_set(id.clone()),
                RUN_KIND.value_set("baseline".to_owned()),
            ])
        });
        let priority = shape
            .contains(['A', 'F'])
            .then(|| runtime_cloud_workflows::fairness::of_run("bench", false));
        let opts = WorkflowStartOptions::new(tq, id)
            .maybe_search_attributes(attributes)
            .maybe_priority(priority)
            .build();
        client
            .start_workflow(BaselineRun::run, shape.to_owned(), opts)
            .await
    };

    let warm = start_one(client.clone(), format!("{tq}/warmup"), tq.clone()).await?;
    warm.get_result(Default::default()).await?;

    let mut sent: HashMap<String, SystemTime> = HashMap::new();
    let mut single_ids = Vec::new();
    for i in 0..args.single {
        let id = format!("{tq}/single-{i:03}");
        sent.insert(id.clone(), SystemTime::now());
        let handle = start_one(client.clone(), id.clone(), tq.clone()).await?;
        handle.get_result(Default::default()).await?;
        single_ids.push(id);
    }

    let batch_sent: Arc<Mutex<HashMap<String, SystemTime>>> = Default::default();
    let meter = crate::cpu::Meter::start([crate::cpu::server_pid(), Some(worker.pid()), None]);
    let start = SystemTime::now();
    let ids: Vec<String> = (0..args.runs).map(|i| format!("{tq}/run-{i:05}")).collect();
    for_each_concurrent(ids, args.concurrency, |id| {
        let (client, tq, batch_sent) = (client.clone(), tq.clone(), batch_sent.clone());
        async move {
            let at = SystemTime::now();
            start_one(client, id.clone(), tq).await?;
            batch_sent
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .insert(id, at);
            Ok(())
        }
    })
    .await?;
    let want = 1 + args.single + args.runs;
    let done_query = format!("TaskQueue='{tq}' AND ExecutionStatus='Completed'");
    poll(
        "every baseline run",
        Duration::from_millis(200),
        Duration::from_secs(1800),
        || {
            let (client, q) = (&client, &done_query);
            async move {
                let n = client
                    .count_workflows(q.as_str(), WorkflowCountOptions::default())
                    .await?;
                Ok((n.count() >= want).then_some(()))
            }
        },
    )
    .await?;
    let worker_peak_mib = crate::rss::of(worker.pid()).peak_mib;
    let cpu = meter.per_run(args.runs);

    // Close times as Temporal recorded them.
    use futures::StreamExt;
    let mut closed: HashMap<String, SystemTime> = HashMap::new();
    let mut list = client.list_workflows(done_query, WorkflowListOptions::default());
    while let Some(w) = list.next().await {
        let w = w?;
        if let Some(t) = w.close_time() {
            closed.insert(w.id().to_owned(), t);
        }
    }
    let latency = |sent: &HashMap<String, SystemTime>| -> Vec<Duration> {
        sent.iter()
            .filter_map(|(id, at)| closed.get(id).map(|c| since(*at, *c)))
            .collect()
    };
    let single_lat = latency(&sent);
    let batch_sent = batch_sent.lock().unwrap_or_else(|e| e.into_inner()).clone();
    let lat = latency(&batch_sent);
    let last = batch_sent
        .keys()
        .filter_map(|id| closed.get(id))
        .max()
        .copied()
        .unwrap_or(start);
    let tally = crate::actions::tally(&client, &format!("TaskQueue='{tq}'")).await?;
    drop(worker);
    let elapsed = since(start, last);
    Ok(Measured {
        single: summarize(&single_lat),
        batch: summarize(&lat),
        runs_per_sec: rate(lat.len(), elapsed),
        elapsed,
        worker_peak_mib,
        tally,
        total_runs: want,
        cpu,
    })
}

/// The sides in the order they are printed.
const REGULAR: &str = "baseline (6 activities)";
const SHAPED: &str = "baseline (product's split: 2 activities + 4 local)";

fn report(args: &Args, p: &Measured, b: &Measured, shaped: &Measured) {
    let sides = [("product", p), (REGULAR, b), (SHAPED, shaped)];
    let lat_row = |name: &str, s: &Summary| {
        vec![
            name.to_owned(),
            s.count.to_string(),
            ms(s.p50),
            ms(s.p95),
            ms(s.p99),
            ms(s.max),
        ]
    };
    let r = |a: Duration, b: Duration| ratio_cell(ratio(a.as_secs_f64(), b.as_secs_f64()));
    let mut t = Table::new(
        &format!(
            "Provisioning: {} runs, {} requests in flight, {} ({} workloads each)",
            args.runs,
            args.concurrency,
            args.db.name(),
            args.workloads
        ),
        &[
            "",
            "runs",
            "runs/s",
            "wall s",
            "p50 ms",
            "p95 ms",
            "p99 ms",
            "max ms",
            "worker peak RSS MiB",
        ],
    );
    for (name, m) in sides {
        let mut row = lat_row(name, &m.batch);
        row.insert(2, format!("{:.1}", m.runs_per_sec));
        row.insert(3, format!("{:.1}", m.elapsed.as_secs_f64()));
        row.push(format!("{:.0}", m.worker_peak_mib));
        t.row(row);
    }
    for (name, b) in [(REGULAR, b), (SHAPED, shaped)] {
        t.row(vec![
            format!("product / {name}"),
            String::new(),
            ratio_cell(ratio(p.runs_per_sec, b.runs_per_sec)),
            String::new(),
            r(p.batch.p50, b.batch.p50),
            r(p.batch.p95, b.batch.p95),
            r(p.batch.p99, b.batch.p99),
            r(p.batch.max, b.batch.max),
            ratio_cell(ratio(p.worker_peak_mib, b.worker_peak_mib)),
        ]);
    }
    t.print();

    let mut s = Table::new(
        &format!(
            "Single run on an idle server ({} runs one at a time)",
            args.single
        ),
        &["", "runs", "p50 ms", "p95 ms", "p99 ms", "max ms"],
    );
    for (name, m) in sides {
        s.row(lat_row(name, &m.single));
    }
    for (name, b) in [(REGULAR, b), (SHAPED, shaped)] {
        s.row(vec![
            format!("product / {name}"),
            String::new(),
            r(p.single.p50, b.single.p50),
            r(p.single.p95, b.single.p95),
            r(p.single.p99, b.single.p99),
            r(p.single.max, b.single.max),
        ]);
    }
    s.print();

    let mut c = Table::new(
        "Temporal cost per run (all runs of the benchmark, and the workflows they started)",
        &[
            "",
            "workflow runs",
            "history events / run",
            "actions / run (est.)",
        ],
    );
    let cost = |name: &str, m: &Measured| {
        let n = m.total_runs.max(1) as f64;
        vec![
            name.to_owned(),
            m.tally.runs.to_string(),
            format!("{:.1}", m.tally.events as f64 / n),
            format!("{:.2}", m.tally.actions / n),
        ]
    };
    for (name, m) in sides {
        c.row(cost(name, m));
    }
    for (name, b) in [(REGULAR, b), (SHAPED, shaped)] {
        c.row(vec![
            format!("product / {name}"),
            ratio_cell(ratio(p.tally.runs as f64, b.tally.runs as f64)),
            ratio_cell(ratio(p.tally.events as f64, b.tally.events as f64)),
            ratio_cell(ratio(p.tally.actions, b.tally.actions)),
        ]);
    }
    c.print();

    let mut u = Table::new(
        "CPU per batch run, process by process (ms; /proc/{pid}/stat over the batch and the \
         observations it started)",
        &["", "Temporal server", "worker", "API", "total"],
    );
    let total = |m: &Measured| m.cpu.iter().sum::<f64>();
    for (name, m) in sides {
        let mut row = vec![name.to_owned()];
        row.extend(
            m.cpu
                .iter()
                .chain([total(m)].iter())
                .map(|v| format!("{v:.1}")),
        );
        u.row(row);
    }
    for (name, b) in [(REGULAR, b), (SHAPED, shaped)] {
        // Inverted (baseline / product) like the rates: ≥ 0.8 is the CPU target 5 needs.
        let inv = |x: f64, y: f64| ratio_cell(ratio(y, x));
        u.row(vec![
            format!("{name} / product"),
            inv(p.cpu[0], b.cpu[0]),
            inv(p.cpu[1], b.cpu[1]),
            String::new(),
            inv(total(p), total(b)),
        ]);
    }
    u.print();

    // The target is against the baseline of regular activities.
    let rate_ratio = ratio(p.runs_per_sec, b.runs_per_sec);
    let mut v = Table::new("Targets", &["target", "measured", "verdict"]);
    v.row(vec![
        format!("rate >= 0.8 x {REGULAR}"),
        format!("{rate_ratio:.2} x"),
        verdict(rate_ratio >= 0.8),
    ]);
    v.row(vec![
        "single-run p95 < 1 s".into(),
        format!("{} ms", ms(p.single.p95)),
        verdict(p.single.p95 < Duration::from_secs(1)),
    ]);
    v.print();
}
