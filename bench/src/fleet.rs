//! Benchmark 2: one observation sweep over a fleet.
//!
//! Product: `envs` non-production environments are registered and declared over HTTP (each
//! with `workloads` workloads), and each one's sandbox target is written with exactly the
//! declared workloads through the product's own `Sandbox::store` (so the comparison finds no
//! drift: the steady state of a healthy fleet). Then the `{taskQueue}/observation-sweep`
//! schedule is triggered, and the wall time runs from the trigger to the newest
//! `runtime_inventories.observed_at` once every environment's is newer than the trigger. The
//! comparison runs in the same transaction that writes `observed_at`, so observed means compared.
//!
//! Baseline: [`crate::baseline::BaselineSweep`], the same pages and batches with no-op
//! activities, on the same Temporal server, from its start to its last run's close.
//!
//! Every fleet is swept twice: the first sweep records every inventory, the second is the
//! steady state (nothing new).
//!
//! `--drifting`: a drift storm. Every environment's target is empty (every declared workload
//! `missing`, what a cluster wiped out of band looks like) and its mode is `propose` (nothing
//! accepted on its own), so the first sweep raises a finding per workload, a proposal per
//! environment and their events, and starts each proposal's workflow; the second finds
//! nothing new. The sweep's time then runs to the close of its last workflow run (the proposals'
//! workflows are started inside it), and the rows written are counted. The second sweep starts
//! once the task queue's backlog is gone (the 10,000 proposal workflows dispatched), as the next
//! window's would, five minutes on; the wait is printed.
//!
//! `--target kubernetes` adds the Kubernetes observer: the same fleet again, each environment a
//! namespace of one cluster — the stand-in API server of the tests
//! (`tests/common/kube_stand_in.rs`, no real API server runs here) holding exactly the declared
//! Deployments and StatefulSets, each container requesting CPU and memory — swept the same way,
//! twice: without posture findings and cost (`RUNTIME_CLOUD_POSTURE_FINDINGS=false`, no price
//! table), then with both (the default, and a price table set before the sweep). The cluster's
//! watches are off (`RUNTIME_CLOUD_KUBERNETES_WATCH=false`), so the sweep reads every
//! namespace both times: with them on, the seeding's own changes start watched observations
//! that race the first sweep, and the second reads nothing the watches vouch for (the watch
//! benchmark measures them). It prints the API calls per environment the stand-in served
//! (target: at most 5 without posture, 6 with its NetworkPolicy list), the wall times next to
//! the sandbox's, and with / without: the second sweep's is the target (at most 1.2: the sweep
//! each window runs), the first sweep's is reported with what raising the fleet's posture once
//! costs a finding, next to what a workload row costs the sandbox's first sweep.

use crate::actions::{self, Tally};
use crate::api::{for_each_concurrent, workloads};
use crate::baseline::{self, BaselineSweep, SweepInput};
use crate::stack::{self, Db, Stack, poll};
use crate::stats::{rate, ratio};
use crate::table::{Table, ratio_cell, verdict};
use anyhow::Context;
use chrono::Utc;
use runtime_cloud_activities::ports::Target;
use runtime_cloud_activities::sandbox::{Sandbox, SandboxDocument};
use runtime_cloud_store::entities::{drift_findings as findings, runtime_inventories as inv};
use sea_orm::{ColumnTrait, EntityTrait, PaginatorTrait, QueryFilter};
use std::sync::Arc;
use std::time::{Duration, Instant};
use temporalio_client::schedules::ScheduleOverlapPolicy;
use temporalio_client::{WorkflowCountOptions, WorkflowListOptions, WorkflowStartOptions};

#[derive(Debug, Clone, clap::Args)]
pub struct Args {
    /// Environments in the fleet.
    #[arg(long, default_value_t = 1000)]
    pub envs: usize,
    /// Workloads per environment.
    #[arg(long, default_value_t = 20)]
    pub workloads: usize,
    /// Seeding requests in flight.
    #[arg(long, default_value_t = 32)]
    pub seed_concurrency: usize,
    #[arg(long, value_enum, default_value_t = Db::Sqlite)]
    pub db: Db,
    /// The observer: the sandbox only, or also Kubernetes namespaces on the stand-in server.
    #[arg(long, value_enum, default_value_t = Observer::Sandbox)]
    pub target: Observer,
    /// A drift storm: every target empty, every environment in `propose` mode.
    #[arg(long)]
    pub drifting: bool,
    /// Environments the baseline sweeps (default: `--envs`): a fleet of 100,000 is compared
    /// per environment with a smaller baseline run beside it.
    #[arg(long)]
    pub baseline_envs: Option<usize>,
}

impl Args {
    fn baseline_envs(&self) -> usize {
        self.baseline_envs.unwrap_or(self.envs)
    }
}

/// What observes the fleet.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Observer {
    Sandbox,
    /// The sandbox, then Kubernetes namespaces (the stand-in API server).
    Kubernetes,
}

struct Measured {
    wall: Duration,
    /// The second sweep of the same fleet (nothing new); none for the baseline.
    again: Option<Duration>,
    /// Rows the first sweep wrote: findings, proposals, outbox events.
    written: Option<Written>,
    tally: Tally,
    worker_idle_mib: f64,
    worker_peak_mib: f64,
}

/// What a sweep wrote.
#[derive(Debug, Clone, Copy)]
struct Written {
    findings: u64,
    proposals: u64,
    events: u64,
}

pub async fn run(args: Args) -> anyhow::Result<()> {
    println!(
        "fleet: {} environments x {} workloads on {}",
        args.envs,
        args.workloads,
        args.db.name()
    );
    let product = product(&args).await.context("product")?;
    let kubernetes = match args.target {
        Observer::Sandbox => None,
        Observer::Kubernetes => {
            let without = kubernetes(&args, false).await.context("kubernetes")?;
            let with = kubernetes(&args, true)
                .await
                .context("kubernetes, posture and cost")?;
            Some([without, with])
        }
    };
    let baseline = baseline(&args).await.context("baseline")?;
    report(&args, &product, &baseline);
    if let Some(k) = kubernetes {
        report_kubernetes(&args, &product, &k);
    }
    Ok(())
}

async fn product(args: &Args) -> anyhow::Result<Measured> {
    let stack = Stack::start(args.db).await?;
    let envs: Vec<String> = (0..args.envs).map(|i| format!("env-{i:05}")).collect();
    let seeding = Instant::now();
    let fleet = Fleet {
        workloads: workloads(args.workloads),
        drifting: args.drifting,
    };
    seed(&stack, envs, &fleet, args.seed_concurrency).await?;
    println!("  seeded in {:.1} s", seeding.elapsed().as_secs_f64());
    sweep(args, stack).await
}

/// What a seeded fleet declares, and whether its targets run it.
pub struct Fleet {
    pub workloads: Vec<runtime_cloud_models::Workload>,
    /// Every target empty and every environment in `propose` mode (a drift storm), instead
    /// of targets that run exactly what is declared.
    pub drifting: bool,
}

/// Registers and declares `envs` with the fleet's workloads over HTTP, `concurrency` requests
/// in flight, and writes each one's sandbox target through the product's own
/// `Sandbox::store`: with exactly those workloads (a healthy fleet, nothing drifted), or
/// empty (a drift storm).
pub async fn seed(
    stack: &Stack,
    envs: Vec<String>,
    fleet: &Fleet,
    concurrency: usize,
) -> anyhow::Result<()> {
    let api = stack.api();
    let wl = Arc::new(fleet.workloads.clone());
    let drifting = fleet.drifting;
    let sandbox = Arc::new(Sandbox::new(stack.dir.path()));
    let tenant = stack.tenant.clone();
    for_each_concurrent(envs, concurrency, |env| {
        let (api, wl, sandbox, tenant) = (api.clone(), wl.clone(), sandbox.clone(), tenant.clone());
        async move {
            if drifting {
                api.proposing_environment(&env).await?;
            } else {
                api.environment(&env).await?;
            }
            api.declare(&env, &wl).await?;
            let target = Target {
                tenant_id: tenant,
                environment_id: env,
                limits: None,
            };
            let doc = SandboxDocument {
                workloads: if drifting { Vec::new() } else { wl.to_vec() },
                ..Default::default()
            };
            sandbox.store(&target, &doc).await?;
            Ok(())
        }
    })
    .await
    .context("seeding the fleet")
}

/// The fleet again, each environment a namespace of the stand-in cluster holding exactly its
/// declared workloads, observed with posture findings and cost (`with`) or without; also
/// returns the list calls the cluster served per environment.
async fn kubernetes(args: &Args, with: bool) -> anyhow::Result<(Measured, f64)> {
    use crate::stand_ins::kube_stand_in::KubeStandIn;
    let cluster = Arc::new(KubeStandIn::start().await);
    let posture = (
        "RUNTIME_CLOUD_POSTURE_FINDINGS".to_owned(),
        with.to_string(),
    );
    // The sweep reads every namespace: no watched observation of the seeding's changes races
    // it, and none is vouched for.
    let unwatched = (
        "RUNTIME_CLOUD_KUBERNETES_WATCH".to_owned(),
        "false".to_owned(),
    );
    let stack = Stack::start_with(args.db, vec![posture, unwatched]).await?;
    let kubeconfig = stack.dir.path().join("kubeconfig");
    std::fs::write(&kubeconfig, cluster.kubeconfig())?;
    let kubeconfig_ref = format!("file://{}", kubeconfig.display());
    let api = stack.api();
    let wl = Arc::new(kubernetes_workloads(args.workloads));
    let envs: Vec<String> = (0..args.envs).map(|i| format!("env-{i:05}")).collect();
    let seeding = Instant::now();
    seed_namespaces(
        &api,
        &cluster,
        &kubeconfig_ref,
        envs,
        &wl,
        args.seed_concurrency,
    )
    .await?;
    println!(
        "  seeded {} namespaces in {:.1} s",
        args.envs,
        seeding.elapsed().as_secs_f64()
    );
    if with {
        let prices =
            serde_json::json!({ "currency": "EUR", "cpuHour": 0.04, "memoryGbHour": 0.005 });
        api.put("/factory/prices", prices, 200).await?;
    }
    let before = cluster.requests().len();
    let measured = sweep(args, stack).await?;
    // Two sweeps, each reading every namespace.
    let calls = (cluster.requests().len() - before) as f64 / (2 * args.envs) as f64;
    Ok((measured, calls))
}

/// Registers an environment observing each of `envs` (a namespace of `cluster`), declares
/// `workloads` and creates them in the namespace as declared, `concurrency` at once.
pub(crate) async fn seed_namespaces(
    api: &crate::api::Api,
    cluster: &Arc<crate::stand_ins::kube_stand_in::KubeStandIn>,
    kubeconfig_ref: &str,
    envs: Vec<String>,
    workloads: &Arc<Vec<runtime_cloud_models::Workload>>,
    concurrency: usize,
) -> anyhow::Result<()> {
    for_each_concurrent(envs, concurrency, |env| {
        let (api, wl, cluster) = (api.clone(), workloads.clone(), cluster.clone());
        let kubeconfig_ref = kubeconfig_ref.to_owned();
        async move {
            let target = serde_json::json!({ "observer": {
                "kind": "kubernetes", "kubeconfigRef": kubeconfig_ref, "namespace": env } });
            let body = serde_json::json!({ "environmentId": env, "projectId": "bench",
                                           "class": "non-production", "target": target });
            api.post("/factory/environments", body, 201).await?;
            api.declare(&env, &wl).await?;
            for w in wl.iter() {
                cluster.create(
                    &env,
                    kubernetes_object(w),
                    runtime_cloud_models::observation::FIELD_MANAGER,
                );
            }
            Ok(())
        }
    })
    .await
    .context("seeding the namespaces")
}

/// [`workloads`] with bindings a pod template can name: a ConfigMap key and a Secret key.
pub(crate) fn kubernetes_workloads(n: usize) -> Vec<runtime_cloud_models::Workload> {
    workloads(n)
        .into_iter()
        .map(|mut w| {
            w.config_refs = [(
                "SETTINGS".to_owned(),
                format!("configmap://{}-config#settings", w.name),
            )]
            .into();
            w.secret_refs = [(
                "DB_PASSWORD".to_owned(),
                format!("secret://{}-db#password", w.name),
            )]
            .into();
            w
        })
        .collect()
}

/// The Deployment or StatefulSet that runs `w` as declared, rolled out.
pub(crate) fn kubernetes_object(w: &runtime_cloud_models::Workload) -> serde_json::Value {
    let kind = if w.kind == "statefulset" {
        "StatefulSet"
    } else {
        "Deployment"
    };
    let n = w.replicas;
    serde_json::json!({
        "apiVersion": "apps/v1", "kind": kind,
        "metadata": { "name": w.name, "generation": 1, "labels": { "app": w.name } },
        "spec": {
            "replicas": n,
            "selector": { "matchLabels": { "app": w.name } },
            "template": {
                "metadata": { "labels": { "app": w.name } },
                "spec": { "containers": [{
                    "name": w.name, "image": format!("registry.example.com/bench/{}:{}", w.name, w.version),
                    "resources": { "requests": { "cpu": "100m", "memory": "128Mi" } },
                    "env": [
                        { "name": "SETTINGS", "valueFrom": { "configMapKeyRef": { "name": format!("{}-config", w.name), "key": "settings" } } },
                        { "name": "DB_PASSWORD", "valueFrom": { "secretKeyRef": { "name": format!("{}-db", w.name), "key": "password" } } }
                    ] }] }
            }
        },
        "status": { "observedGeneration": 1, "replicas": n, "updatedReplicas": n, "readyReplicas": n,
                    "availableReplicas": n, "currentRevision": "r1", "updateRevision": "r1" }
    })
}

/// Sweeps the stack's fleet twice and measures both; stops the stack.
async fn sweep(args: &Args, stack: Stack) -> anyhow::Result<Measured> {
    let client = runtime_cloud_temporal::connect(&stack::temporal_address()?, "default").await?;
    let worker_idle_mib = crate::rss::of(stack.worker_pid()).now_mib;
    let db = stack.db().await?;
    // The seeding wrote events of its own (environments registered, specifications
    // declared): counted out.
    let seeded = written_by(&stack, &db).await?;
    let wall = sweep_once(args.envs as u64, &stack, &client, &db).await?;
    let first = written_by(&stack, &db).await?;
    let written = first - seeded;
    println!(
        "  first sweep: {:.1} s; findings {}, proposals {}, outbox events {}",
        wall.as_secs_f64(),
        written.findings,
        written.proposals,
        written.events
    );
    if args.drifting {
        // The next window's sweep finds the storm's proposal workflows dispatched (five
        // minutes later); this one waits until the task queue's backlog is gone too.
        let settled = Instant::now();
        let queue = stack.task_queue.clone();
        poll(
            "the storm's proposal workflows dispatched",
            Duration::from_secs(1),
            Duration::from_secs(600),
            || {
                let (client, queue) = (&client, &queue);
                async move {
                    let b = crate::fairness::backlog(client, queue).await?;
                    Ok((b.workflow + b.activity == 0).then_some(()))
                }
            },
        )
        .await?;
        println!(
            "  the task queue's backlog was gone {:.1} s after the first sweep",
            settled.elapsed().as_secs_f64()
        );
    }
    let again = sweep_once(args.envs as u64, &stack, &client, &db).await?;
    let second = written_by(&stack, &db).await? - first;
    println!(
        "  second sweep: {:.1} s; rows written by it: {} findings, {} proposals, {} events",
        again.as_secs_f64(),
        second.findings,
        second.proposals,
        second.events
    );
    let worker_peak_mib = crate::rss::of(stack.worker_pid()).peak_mib;
    // `runtime-cloud dev` runs the worker and the API in one process; here they are two.
    let api_peak_mib = crate::rss::of(stack.api_pid()).peak_mib;
    println!(
        "  peak RSS: worker {worker_peak_mib:.0} MiB, API {api_peak_mib:.0} MiB \
         (at most {:.0} MiB for both, as `dev` runs them in one process)",
        worker_peak_mib + api_peak_mib
    );
    // Both sweeps' actions (and the proposals' workflows they started), per sweep.
    let tally =
        actions::tally(&client, &crate::stack::product_workflows(&stack.task_queue)).await?;
    stack.stop().await;
    Ok(Measured {
        wall,
        again: Some(again),
        written: Some(written),
        // Two triggers, two sweeps: halved, one trigger each.
        tally: Tally {
            actions: tally.actions / 2.0 + 1.0,
            events: tally.events / 2,
            runs: tally.runs / 2,
            ..tally
        },
        worker_idle_mib,
        worker_peak_mib,
    })
}

/// Triggers the sweep and measures it: from the trigger until every environment is observed
/// again and the sweep's last workflow run has closed (a drift storm's proposals are started
/// inside it). `want`: the environments of the stack's tenant.
pub(crate) async fn sweep_once(
    want: u64,
    stack: &Stack,
    client: &temporalio_client::Client,
    db: &sea_orm::DatabaseConnection,
) -> anyhow::Result<Duration> {
    let tenant = stack.tenant.clone();
    let schedule = client.get_schedule_handle(format!("{}/observation-sweep", stack.task_queue));
    let t0 = Utc::now();
    schedule
        .trigger(ScheduleOverlapPolicy::AllowAll, Default::default())
        .await
        .context("triggering the sweep")?;
    let last_report = std::sync::Mutex::new(Instant::now());
    poll(
        "every environment observed",
        Duration::from_millis(500),
        Duration::from_secs(3600),
        || {
            let (tenant, last_report) = (&tenant, &last_report);
            async move {
                let n = inv::Entity::find()
                    .filter(inv::Column::TenantId.eq(tenant.as_str()))
                    .filter(inv::Column::ObservedAt.gte(t0))
                    .count(db)
                    .await?;
                let mut last = last_report.lock().unwrap_or_else(|e| e.into_inner());
                if last.elapsed() > Duration::from_secs(15) {
                    println!(
                        "  {n}/{want} observed after {:.0} s",
                        (Utc::now() - t0).as_seconds_f64()
                    );
                    *last = Instant::now();
                }
                Ok((n >= want).then_some(()))
            }
        },
    )
    .await?;
    let sweeps = format!(
        "TaskQueue='{}' AND WorkflowType='ObservationSweep'",
        stack.task_queue
    );
    stack::wait_none_running(client, &sweeps).await?;
    use futures::StreamExt;
    let mut closed = t0;
    let mut list = client.list_workflows(sweeps, WorkflowListOptions::default());
    while let Some(w) = list.next().await {
        if let Some(t) = w?.close_time() {
            closed = closed.max(t.into());
        }
    }
    Ok((closed - t0).to_std().unwrap_or_default())
}

/// Rows the fleet's observations wrote so far.
async fn written_by(stack: &Stack, db: &sea_orm::DatabaseConnection) -> anyhow::Result<Written> {
    use runtime_cloud_store::entities::{outbox_events, reconciliation_proposals as proposals};
    let tenant = stack.tenant.as_str();
    Ok(Written {
        findings: findings::Entity::find()
            .filter(findings::Column::TenantId.eq(tenant))
            .count(db)
            .await?,
        proposals: proposals::Entity::find()
            .filter(proposals::Column::TenantId.eq(tenant))
            .count(db)
            .await?,
        events: outbox_events::Entity::find()
            .filter(outbox_events::Column::TenantId.eq(tenant))
            .count(db)
            .await?,
    })
}

impl std::ops::Sub for Written {
    type Output = Written;
    fn sub(self, before: Written) -> Written {
        Written {
            findings: self.findings - before.findings,
            proposals: self.proposals - before.proposals,
            events: self.events - before.events,
        }
    }
}

async fn baseline(args: &Args) -> anyhow::Result<Measured> {
    let dir = stack::work_dir()?;
    let tq = format!("baseline-{}", stack::suffix());
    let worker = baseline::spawn_worker(&tq, dir.path())?;
    let client = runtime_cloud_temporal::connect(&stack::temporal_address()?, "default").await?;
    // Let the worker connect and poll before the clock starts, as the product's has.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let worker_idle_mib = crate::rss::of(worker.pid()).now_mib;
    let input = SweepInput {
        prefix: format!("{tq}/observe"),
        total: args.baseline_envs() as u64,
        after: 0,
    };
    let t0 = std::time::SystemTime::now();
    let opts = WorkflowStartOptions::new(tq.clone(), format!("{tq}/sweep")).build();
    client
        .start_workflow(BaselineSweep::run, input, opts)
        .await?;
    // The last run of the sweep completes; the others continued as new.
    let done = format!(
        "TaskQueue='{tq}' AND WorkflowType='BaselineSweep' AND ExecutionStatus='Completed'"
    );
    poll(
        "the baseline sweep",
        Duration::from_millis(200),
        Duration::from_secs(3600),
        || async {
            let n = client
                .count_workflows(done.as_str(), WorkflowCountOptions::default())
                .await?;
            Ok((n.count() >= 1).then_some(()))
        },
    )
    .await?;
    stack::wait_idle(&client, &tq).await?;
    let worker_peak_mib = crate::rss::of(worker.pid()).peak_mib;
    use futures::StreamExt;
    let mut newest = t0;
    let mut list = client.list_workflows(done, WorkflowListOptions::default());
    while let Some(w) = list.next().await {
        if let Some(t) = w?.close_time() {
            newest = newest.max(t);
        }
    }
    let tally = actions::tally(&client, &format!("TaskQueue='{tq}'")).await?;
    drop(worker);
    Ok(Measured {
        wall: newest.duration_since(t0).unwrap_or_default(),
        again: None,
        written: None,
        tally,
        worker_idle_mib,
        worker_peak_mib,
    })
}

fn report(args: &Args, p: &Measured, b: &Measured) {
    let n = args.envs as f64;
    let mut t = Table::new(
        &format!(
            "Observation sweep: {} environments x {} workloads, {}",
            args.envs,
            args.workloads,
            args.db.name()
        ),
        &[
            "",
            "wall s",
            "envs/s",
            "workflow runs",
            "history events / env",
            "actions / env (est.)",
            "worker RSS before MiB",
            "worker peak RSS MiB",
        ],
    );
    let (envs, bn) = (args.envs, args.baseline_envs() as f64);
    let row = |name: &str, m: &Measured, envs: usize| {
        vec![
            name.to_owned(),
            format!("{:.1}", m.wall.as_secs_f64()),
            format!("{:.1}", rate(envs, m.wall)),
            m.tally.runs.to_string(),
            format!("{:.1}", m.tally.events as f64 / envs as f64),
            format!("{:.4}", m.tally.actions / envs as f64),
            format!("{:.0}", m.worker_idle_mib),
            format!("{:.0}", m.worker_peak_mib),
        ]
    };
    t.row(row("product (first sweep)", p, envs));
    if let Some(again) = p.again {
        let second = Measured {
            wall: again,
            again: None,
            written: None,
            tally: p.tally.clone(),
            ..*p
        };
        t.row(row("product (second sweep)", &second, envs));
    }
    let baseline = if args.baseline_envs() == envs {
        "baseline (pages of 200, batches of 25)".to_owned()
    } else {
        format!(
            "baseline (pages of 200, batches of 25), {} environments",
            args.baseline_envs()
        )
    };
    t.row(row(&baseline, b, args.baseline_envs()));
    // Per environment, so that a baseline of another size compares.
    let r = |a: f64, b: f64| ratio_cell(ratio(a, b));
    t.row(vec![
        "product / baseline (per environment)".into(),
        r(p.wall.as_secs_f64() / n, b.wall.as_secs_f64() / bn),
        r(rate(envs, p.wall), rate(args.baseline_envs(), b.wall)),
        String::new(),
        r(p.tally.events as f64 / n, b.tally.events as f64 / bn),
        r(p.tally.actions / n, b.tally.actions / bn),
        r(p.worker_idle_mib, b.worker_idle_mib),
        r(p.worker_peak_mib, b.worker_peak_mib),
    ]);
    t.print();

    let mut v = Table::new("Target", &["target", "measured", "verdict"]);
    let scaled = |wall: Duration| wall.as_secs_f64() * 10_000.0 / n;
    let label = |secs: f64| {
        if args.envs >= 10_000 {
            format!("{secs:.1} s")
        } else {
            // A linear extrapolation from a smaller fleet, not a measurement.
            format!("EXTRAPOLATED (linear from {}): {secs:.0} s", args.envs)
        }
    };
    let judged = |met: bool| {
        if args.envs >= 10_000 {
            verdict(met)
        } else {
            format!(
                "not measured ({})",
                if met { "on track" } else { "would miss" }
            )
        }
    };
    let first = scaled(p.wall);
    let second = p.again.map_or(f64::NAN, scaled);
    if let (true, Some(w)) = (args.drifting, p.written) {
        v.row(vec![
            format!(
                "drift storm ({} workloads each): 10,000 environments in one 5-minute window",
                args.workloads
            ),
            format!(
                "{}; {} findings, {} proposals, {} events",
                label(first),
                w.findings,
                w.proposals,
                w.events
            ),
            judged(first <= 300.0),
        ]);
        v.row(vec![
            "the storm's second sweep (nothing new) as fast as a healthy one (<= 15 s for 10,000)"
                .into(),
            label(second),
            judged(second <= 15.0),
        ]);
    } else {
        v.row(vec![
            "10,000 environments in one 5-minute window".into(),
            label(first),
            judged(first <= 300.0),
        ]);
        if args.envs >= 100_000 {
            let (first, second) = (
                p.wall.as_secs_f64(),
                p.again.map_or(f64::NAN, |a| a.as_secs_f64()),
            );
            v.row(vec![
                format!(
                    "{} environments in one 5-minute window (first sweep / second sweep)",
                    args.envs
                ),
                format!("{first:.1} s / {second:.1} s"),
                verdict(first <= 300.0 && second <= 300.0),
            ]);
        }
        v.row(vec![
            "10,000 x 20 swept in <= 15 s (first sweep / second sweep)".into(),
            format!("{} / {}", label(first), label(second)),
            judged(first <= 15.0 && second <= 15.0),
        ]);
    }
    v.print();
}

fn report_kubernetes(args: &Args, sandbox: &Measured, [without, with]: &[(Measured, f64); 2]) {
    let mut t = Table::new(
        &format!(
            "Kubernetes observer: {} namespaces x {} workloads on the stand-in API server, {}",
            args.envs,
            args.workloads,
            args.db.name()
        ),
        &[
            "",
            "wall s",
            "envs/s",
            "API calls / env a sweep",
            "worker peak RSS MiB",
        ],
    );
    for (name, (k, calls)) in [
        ("kubernetes, posture and cost", with),
        ("kubernetes, without them", without),
    ] {
        t.row(vec![
            name.into(),
            format!("{:.1}", k.wall.as_secs_f64()),
            format!("{:.1}", rate(args.envs, k.wall)),
            format!("{calls:.2}"),
            format!("{:.0}", k.worker_peak_mib),
        ]);
    }
    t.row(vec![
        "sandbox".into(),
        format!("{:.1}", sandbox.wall.as_secs_f64()),
        format!("{:.1}", rate(args.envs, sandbox.wall)),
        "-".into(),
        format!("{:.0}", sandbox.worker_peak_mib),
    ]);
    let (with, with_calls) = (&with.0, with.1);
    let (without, without_calls) = (&without.0, without.1);
    let overhead = ratio(with.wall.as_secs_f64(), without.wall.as_secs_f64());
    t.row(vec![
        "with / without".into(),
        ratio_cell(overhead),
        ratio_cell(ratio(
            rate(args.envs, with.wall),
            rate(args.envs, without.wall),
        )),
        String::new(),
        ratio_cell(ratio(with.worker_peak_mib, without.worker_peak_mib)),
    ]);
    t.row(vec![
        "kubernetes (without) / sandbox".into(),
        ratio_cell(ratio(
            without.wall.as_secs_f64(),
            sandbox.wall.as_secs_f64(),
        )),
        ratio_cell(ratio(
            rate(args.envs, without.wall),
            rate(args.envs, sandbox.wall),
        )),
        String::new(),
        ratio_cell(ratio(without.worker_peak_mib, sandbox.worker_peak_mib)),
    ]);
    t.print();
    let mut v = Table::new("Target", &["target", "measured", "verdict"]);
    v.row(vec![
        "at most 5 API calls per environment (posture off)".into(),
        format!("{without_calls:.2}"),
        verdict(without_calls <= 5.0),
    ]);
    v.row(vec![
        "at most 6 with posture (its NetworkPolicy list)".into(),
        format!("{with_calls:.2}"),
        verdict(with_calls <= 6.0),
    ]);
    // The target is the sweep every window runs: the second, nothing new to raise.
    if let (Some(with_again), Some(without_again)) = (with.again, without.again) {
        let steady = ratio(with_again.as_secs_f64(), without_again.as_secs_f64());
        v.row(vec![
            format!(
                "a sweep with posture and cost at most 1.2 x without (the second sweep: {:.1} s / {:.1} s)",
                with_again.as_secs_f64(),
                without_again.as_secs_f64()
            ),
            format!("{} x", ratio_cell(steady)),
            verdict(steady <= 1.2),
        ]);
    }
    v.print();
    // The first sweep with posture raises a finding per rule the fleet's objects break, each
    // with its event, once: rows the sweep without it never writes. What each costs, next to
    // what each workload row of the sandbox's first sweep costs (its writes: the second sweep
    // reads the same and writes none of them).
    let raised = with.written.map_or(0, |w| w.findings);
    let mut r = Table::new(
        "Reported: the first sweep, raising the fleet's posture once",
        &["", "measured"],
    );
    r.row(vec![
        format!("first sweep with posture and cost / without ({raised} findings raised)"),
        format!(
            "{} x ({:.1} s / {:.1} s)",
            ratio_cell(overhead),
            with.wall.as_secs_f64(),
            without.wall.as_secs_f64()
        ),
    ]);
    let per_row_us = |extra: Option<f64>, rows: u64| match extra {
        Some(extra) if rows > 0 => format!("{:.1}", extra * 1e6 / rows as f64),
        _ => "n/a".into(),
    };
    let raising = with.wall.as_secs_f64() - without.wall.as_secs_f64();
    r.row(vec![
        "µs a finding with its event (first sweep with minus without, over findings raised)".into(),
        per_row_us(Some(raising), raised),
    ]);
    let writing = sandbox
        .again
        .map(|again| sandbox.wall.as_secs_f64() - again.as_secs_f64());
    r.row(vec![
        "baseline: µs a workload row of the sandbox's first sweep (first minus second, over workload rows)".into(),
        per_row_us(writing, (args.envs * args.workloads) as u64),
    ]);
    r.print();
}
