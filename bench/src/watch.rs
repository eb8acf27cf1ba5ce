//! Benchmark 10, drift in seconds: how long an out-of-band change on a watched Kubernetes
//! cluster takes to be observed, what the watches cost the API server and the worker, and
//! whether one tenant's storm of changes holds up another tenant's observations.
//!
//! Each environment observes a namespace of the cluster stand-in (`tests/common/
//! kube_stand_in.rs`, which speaks the watch protocol) holding `--workloads` workloads as
//! declared. Once the watches are open and have told every seeded namespace's change (each
//! environment observed after it), and every environment was observed (one sweep), the
//! steady state is measured: a second sweep over a cluster where nothing changed, counting the
//! list calls the stand-in served, and the worker's resident memory. Then `kubectl edit` scales
//! a namespace's first Deployment, `--rate` changes a second over the namespaces in turn, while
//! their detection is measured: a change is detected when the environment's recorded inventory
//! shows its replicas (the observation's record, findings included; read from the read DB every
//! 20 ms).
//!
//! **Baseline**: the same cluster and changes with the watches off
//! (`RUNTIME_CLOUD_KUBERNETES_WATCH=false`): the sweep finds them. Its schedule ticks every five
//! minutes, so a change waits for the next tick (half the period on the median, 95 % of it at
//! p95) and then for the sweep to reach it, which is measured here by triggering it once the
//! changes are made. Its steady-state sweep lists every kind in every namespace, and its worker
//! holds no watch: the memory the watches cost is the difference.
//!
//! `--tenant-a N` adds the fairness part ([`fairness`]): tenant A's N namespaces all change at
//! once, then tenant B's `--tenant-b`; B's changes must be observed within the staleness
//! window's 60 s while A's backlog drains.

use crate::api::Api;
use crate::fleet::{kubernetes_workloads, seed_namespaces, sweep_once};
use crate::stack::{self, Db, Stack, poll};
use crate::stand_ins::kube_stand_in::KubeStandIn;
use crate::stats::{Summary, summarize};
use crate::table::{Table, verdict};
use anyhow::Context;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};
use temporalio_client::schedules::ScheduleOverlapPolicy;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Watched namespaces on the one cluster, an environment each.
    #[arg(long, default_value_t = 1)]
    pub namespaces: usize,
    /// Workloads in each namespace (the first a Deployment, the one the changes scale).
    #[arg(long, default_value_t = 1)]
    pub workloads: usize,
    /// Changes made, to the namespaces in turn.
    #[arg(long, default_value_t = 50)]
    pub changes: usize,
    /// Changes a second.
    #[arg(long, default_value_t = 10.0)]
    pub rate: f64,
    /// Environments registered at once while seeding.
    #[arg(long, default_value_t = 16)]
    pub seed_concurrency: usize,
    #[arg(long, value_enum, default_value_t = Db::Sqlite)]
    pub db: Db,
    /// The fairness part: tenant A's namespaces, all changed at once (none: the part is left
    /// out).
    #[arg(long, default_value_t = 0)]
    pub tenant_a: usize,
    /// The fairness part: tenant B's namespaces, changed right after A's.
    #[arg(long, default_value_t = 50)]
    pub tenant_b: usize,
}

/// The sweep's schedule period.
const SWEEP_EVERY: Duration = Duration::from_secs(300);
/// The kinds a cluster is watched for, a watch connection each (posture is read: its
/// NetworkPolicies too).
const KINDS: usize = 6;

/// What one stack measured.
struct Measured {
    latency: Summary,
    /// List calls the stand-in served per environment during a sweep where nothing changed.
    lists_per_env: f64,
    /// Watches open in the steady state, and opened during that sweep.
    watches_open: usize,
    watches_opened: usize,
    /// The worker's resident memory in the steady state.
    worker_mib: f64,
}

pub async fn run(args: Args) -> anyhow::Result<()> {
    println!(
        "10. Drift in seconds: {} change(s) at {}/s over {} watched namespace(s) of {} \
         workload(s), {}",
        args.changes,
        args.rate,
        args.namespaces,
        args.workloads,
        args.db.name()
    );
    let watched = detect(&args, true).await.context("watched")?;
    let swept = detect(&args, false).await.context("the sweep alone")?;
    let at_tick = |wait: Duration, sweep: Duration| wait + sweep;
    let mut t = Table::new(
        "Detection latency: from `kubectl edit` to the recorded observation",
        &["how", "changes", "p50", "p95", "max"],
    );
    let secs = |d: Duration| format!("{:.2} s", d.as_secs_f64());
    let (w, s) = (&watched.latency, &swept.latency);
    t.row(vec![
        "watched".into(),
        w.count.to_string(),
        secs(w.p50),
        secs(w.p95),
        secs(w.max),
    ]);
    t.row(vec![
        "the sweep, triggered after the last change".into(),
        s.count.to_string(),
        secs(s.p50),
        secs(s.p95),
        secs(s.max),
    ]);
    t.row(vec![
        "the sweep on its schedule (baseline)".into(),
        s.count.to_string(),
        secs(at_tick(SWEEP_EVERY / 2, s.p50)),
        secs(at_tick(SWEEP_EVERY.mul_f64(0.95), s.p95)),
        secs(at_tick(SWEEP_EVERY, s.max)),
    ]);
    t.print();
    let mut c = Table::new(
        "API cost in the steady state: one sweep (every five minutes) where nothing changed",
        &[
            "how",
            "list calls / environment / 5 min",
            "watches open",
            "watches opened meanwhile",
        ],
    );
    for (how, m) in [("watched", &watched), ("unwatched (baseline)", &swept)] {
        c.row(vec![
            how.into(),
            format!("{:.2}", m.lists_per_env),
            m.watches_open.to_string(),
            m.watches_opened.to_string(),
        ]);
    }
    c.print();
    let objects = args.namespaces * args.workloads;
    let per_object = (watched.worker_mib - swept.worker_mib) * 1024.0 * 1024.0 / objects as f64;
    let mut m = Table::new(
        &format!(
            "Memory: the worker's resident set, {} namespaces × {} workloads ({objects} objects)",
            args.namespaces, args.workloads
        ),
        &["how", "worker RSS", "bytes per watched object (difference)"],
    );
    m.row(vec![
        "watched".into(),
        format!("{:.1} MiB", watched.worker_mib),
        format!("{per_object:.0}"),
    ]);
    m.row(vec![
        "unwatched (baseline)".into(),
        format!("{:.1} MiB", swept.worker_mib),
        "—".into(),
    ]);
    m.print();
    let mut v = Table::new("Targets", &["target", "measured", "verdict"]);
    v.row(vec![
        "watched p95 ≤ 5 s".into(),
        secs(w.p95),
        verdict(w.p95 <= Duration::from_secs(5)),
    ]);
    v.row(vec![
        "0 list calls per sweep when nothing changed".into(),
        format!("{:.2}", watched.lists_per_env),
        verdict(watched.lists_per_env == 0.0),
    ]);
    v.row(vec![
        "one watch connection per cluster and kind".into(),
        format!("{} for {KINDS} kinds", watched.watches_open),
        verdict(watched.watches_open == KINDS && watched.watches_opened == 0),
    ]);
    v.print();
    if args.tenant_a > 0 {
        fairness(&args).await.context("fairness")?;
    }
    Ok(())
}

/// A cluster stand-in and a stack observing it, the watches on or off.
async fn cluster_and_stack(
    db: Db,
    watch: bool,
) -> anyhow::Result<(Arc<KubeStandIn>, Stack, String)> {
    let cluster = Arc::new(KubeStandIn::start().await);
    let env = vec![
        (
            "RUNTIME_CLOUD_KUBERNETES_WATCH".to_owned(),
            watch.to_string(),
        ),
        // A finding raises a proposal an operator decides: no reconciliation run reads the
        // cluster between the changes.
        (
            "RuntimeCloud__Inventory__AutoAcceptNonDestructiveOutsideProduction".to_owned(),
            "false".to_owned(),
        ),
    ];
    let stack = Stack::start_with(db, env).await?;
    let kubeconfig = stack.dir.path().join("kubeconfig");
    std::fs::write(&kubeconfig, cluster.kubeconfig())?;
    let kubeconfig_ref = format!("file://{}", kubeconfig.display());
    Ok((cluster, stack, kubeconfig_ref))
}

/// The workloads of each namespace, the first a Deployment (the one the changes scale).
fn namespace_workloads(n: usize) -> Arc<Vec<runtime_cloud_models::Workload>> {
    let mut workloads = kubernetes_workloads(n.max(1));
    workloads[0].kind = "deployment".into();
    Arc::new(workloads)
}

/// Waits until the cluster's watches are open, one per kind.
async fn watches_open(cluster: &KubeStandIn) -> anyhow::Result<()> {
    poll(
        "the cluster's watches, one per kind",
        Duration::from_millis(50),
        Duration::from_secs(120),
        || {
            let open = cluster.watching() == KINDS;
            async move { Ok(open.then_some(())) }
        },
    )
    .await
}

/// Waits until no observation of the stack runs (those the seeding's changes started).
async fn observations_done(
    client: &temporalio_client::Client,
    stack: &Stack,
) -> anyhow::Result<()> {
    let query = format!(
        "TaskQueue='{}' AND WorkflowType='ObserveEnvironment'",
        stack.task_queue
    );
    stack::wait_none_running(client, &query).await
}

/// Waits until the watches told every change of `tenant`'s namespaces made before `quiet_since`
/// (the seeding's), each environment observed after its change. No observation running is not
/// enough: the watch tells a burst of changes a few dozen at a time, and on SQLite (one writer)
/// a thousand seeded namespaces are still being told after the first are done, each recording
/// its change when it is told — in the middle of the sweeps that follow. Every change is
/// recorded once it has waited its longest to be told ([`RELIST_SETTLE`] after it); the
/// namespaces seeded before the watch had listed them are not changes (the sweep observes
/// them).
async fn watches_caught_up(
    db: &sea_orm::DatabaseConnection,
    tenant: &str,
    quiet_since: Instant,
) -> anyhow::Result<()> {
    use runtime_cloud_activities::kubernetes::watch::RELIST_SETTLE;
    use runtime_cloud_store::entities::{runtime_inventories as inv, watched_changes as changes};
    use sea_orm::{ColumnTrait, EntityTrait, QueryFilter};
    poll(
        "every environment observed after its watched change",
        Duration::from_millis(200),
        Duration::from_secs(600),
        || async move {
            let told_all = quiet_since.elapsed() > RELIST_SETTLE;
            let changed: BTreeMap<String, chrono::DateTime<chrono::Utc>> = changes::Entity::find()
                .filter(changes::Column::TenantId.eq(tenant))
                .all(db)
                .await?
                .into_iter()
                .map(|c| (c.environment_id, c.changed_at))
                .collect();
            let observed = inv::Entity::find()
                .filter(inv::Column::TenantId.eq(tenant))
                .all(db)
                .await?
                .into_iter()
                .filter(|i| {
                    let changed_at = changed.get(&i.environment_id);
                    i.observed_at
                        .zip(changed_at)
                        .is_some_and(|(observed, changed)| observed > *changed)
                })
                .count();
            Ok((told_all && observed == changed.len()).then_some(()))
        },
    )
    .await
}

/// Scales the first workload of `env` to `replicas` as `kubectl edit` does.
fn kubectl_scale(cluster: &KubeStandIn, env: &str, name: &str, replicas: i64) {
    cluster.update(
        env,
        "deployments",
        name,
        ("kubectl-edit", None),
        serde_json::json!({ "f:spec": { "f:replicas": {} } }),
        |d| d["spec"]["replicas"] = serde_json::json!(replicas),
    );
}

/// Seeds a fresh stack and cluster, the watches on or off, measures the steady state, makes
/// the changes and measures each one's detection.
async fn detect(args: &Args, watch: bool) -> anyhow::Result<Measured> {
    let (cluster, stack, kubeconfig_ref) = cluster_and_stack(args.db, watch).await?;
    let api = stack.api();
    let workloads = namespace_workloads(args.workloads);
    let name = workloads[0].name.clone();
    let declared = i64::from(workloads[0].replicas);
    let envs: Vec<String> = (0..args.namespaces).map(|i| format!("w-{i:05}")).collect();
    let seeding = Instant::now();
    let concurrency = args.seed_concurrency;
    seed_namespaces(
        &api,
        &cluster,
        &kubeconfig_ref,
        envs.clone(),
        &workloads,
        concurrency,
    )
    .await?;
    let seeded = Instant::now();
    println!(
        "  seeded {} namespaces in {:.1} s",
        envs.len(),
        seeding.elapsed().as_secs_f64()
    );
    let db = stack.db().await?;
    let client = runtime_cloud_temporal::connect(&stack::temporal_address()?, "default").await?;
    if watch {
        watches_open(&cluster).await?;
        watches_caught_up(&db, &stack.tenant, seeded).await?;
    }
    observations_done(&client, &stack).await?;
    // Every environment observed (with the watches following, for the watched stack), then
    // the steady state: a sweep where nothing changed.
    let n = envs.len() as u64;
    sweep_once(n, &stack, &client, &db).await?;
    let before = cluster.requests().len();
    let steady = sweep_once(n, &stack, &client, &db).await?;
    let requests = cluster.requests();
    let during = &requests[before..];
    let watches_opened = during.iter().filter(|r| r.contains("watch=true")).count();
    let lists = during.len() - watches_opened;
    let worker_mib = crate::rss::of(stack.worker_pid()).now_mib;
    println!(
        "  steady-state sweep: {:.1} s, {lists} list call(s); worker RSS {worker_mib:.1} MiB",
        steady.as_secs_f64()
    );
    let watches_open = cluster.watching();
    // The changes, at the rate: (environment, replicas, when).
    // The changes are made at the rate while their detection is measured: (environment,
    // replicas, when) of each, as it is made.
    let (made_tx, mut made) = tokio::sync::mpsc::unbounded_channel::<(String, i64, Instant)>();
    let maker = {
        let (cluster, envs, name) = (cluster.clone(), envs.clone(), name.clone());
        let (changes, every) = (
            args.changes,
            Duration::from_secs_f64(1.0 / args.rate.max(0.001)),
        );
        tokio::spawn(async move {
            let started = tokio::time::Instant::now();
            for i in 0..changes {
                tokio::time::sleep_until(started + every.mul_f64(i as f64)).await;
                let env = &envs[i % envs.len()];
                let replicas = declared + 1 + i as i64;
                kubectl_scale(&cluster, env, &name, replicas);
                let _ = made_tx.send((env.clone(), replicas, Instant::now()));
            }
        })
    };
    if !watch {
        // The sweep alone: triggered once every change is made.
        maker.await?;
        client
            .get_schedule_handle(format!("{}/observation-sweep", stack.task_queue))
            .trigger(ScheduleOverlapPolicy::AllowAll, Default::default())
            .await
            .context("triggering the sweep")?;
    }
    let mut latencies = Vec::new();
    let mut waiting: Vec<(String, i64, Instant)> = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(600);
    while latencies.len() < args.changes {
        anyhow::ensure!(
            Instant::now() < deadline,
            "{} change(s) not observed within 10 minutes",
            args.changes - latencies.len()
        );
        while let Ok(change) = made.try_recv() {
            waiting.push(change);
        }
        let mut seen: BTreeMap<String, i64> = BTreeMap::new();
        let outstanding: std::collections::BTreeSet<&String> =
            waiting.iter().map(|(e, _, _)| e).collect();
        for env in outstanding {
            let inventory = runtime_cloud_store::inventory::find(&db, &stack.tenant, env).await?;
            let replicas = inventory
                .and_then(|i| i.workloads.into_iter().find(|w| w.name == name))
                .map_or(0, |w| i64::from(w.replicas_desired));
            seen.insert(env.clone(), replicas);
        }
        let now = Instant::now();
        waiting.retain(|(env, replicas, at)| {
            let observed = seen.get(env).is_some_and(|r| r >= replicas);
            if observed {
                latencies.push(now - *at);
            }
            !observed
        });
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    stack.stop().await;
    Ok(Measured {
        latency: summarize(&latencies),
        lists_per_env: lists as f64 / n as f64,
        watches_open,
        watches_opened,
        worker_mib,
    })
}

/// The fairness part: tenant A's namespaces all change at once, then tenant B's, on one
/// watched cluster. Each change's age when its observation was recorded
/// (`runtime_inventories.observed_at` minus the change's time) is its observation age at
/// that moment; B's p99 must stay within 60 s while A's backlog drains. The baseline is A's
/// drain: first come, first served, B's changes would wait behind all of it.
async fn fairness(args: &Args) -> anyhow::Result<()> {
    println!(
        "  fairness: tenant A {} namespaces, tenant B {}, all changed at once",
        args.tenant_a, args.tenant_b
    );
    let (cluster, stack, kubeconfig_ref) = cluster_and_stack(args.db, true).await?;
    let b_id = format!("{}-b", stack.tenant);
    let b_api = Api::new(
        &stack.base_url,
        &stack.mint(&b_id, &["Operator"], stack::SCOPES)?,
    );
    let workloads = namespace_workloads(1);
    let name = workloads[0].name.clone();
    let a_envs: Vec<String> = (0..args.tenant_a).map(|i| format!("a-{i:05}")).collect();
    let b_envs: Vec<String> = (0..args.tenant_b).map(|i| format!("b-{i:05}")).collect();
    let seeding = Instant::now();
    let concurrency = args.seed_concurrency;
    seed_namespaces(
        &stack.api(),
        &cluster,
        &kubeconfig_ref,
        a_envs.clone(),
        &workloads,
        concurrency,
    )
    .await?;
    seed_namespaces(
        &b_api,
        &cluster,
        &kubeconfig_ref,
        b_envs.clone(),
        &workloads,
        concurrency,
    )
    .await?;
    let seeded = Instant::now();
    println!(
        "  seeded {} namespaces in {:.1} s",
        a_envs.len() + b_envs.len(),
        seeding.elapsed().as_secs_f64()
    );
    let db = stack.db().await?;
    let client = runtime_cloud_temporal::connect(&stack::temporal_address()?, "default").await?;
    watches_open(&cluster).await?;
    watches_caught_up(&db, &stack.tenant, seeded).await?;
    watches_caught_up(&db, &b_id, seeded).await?;
    observations_done(&client, &stack).await?;
    let replicas = i64::from(workloads[0].replicas) + 1;
    let changed_at = chrono::Utc::now();
    for env in a_envs.iter().chain(&b_envs) {
        kubectl_scale(&cluster, env, &name, replicas);
    }
    let b_changed_at = chrono::Utc::now();
    // Each tenant's observations recorded since its changes, until all are.
    let ages = |tenant: String, since: chrono::DateTime<chrono::Utc>, want: usize| {
        let db = db.clone();
        async move {
            poll(
                "every change observed",
                Duration::from_millis(500),
                Duration::from_secs(1800),
                || {
                    let (db, tenant) = (&db, &tenant);
                    async move {
                        let times =
                            runtime_cloud_store::inventory::observed_times(db, Some(tenant))
                                .await?;
                        let ages: Vec<Duration> = times
                            .iter()
                            .filter(|(_, at)| *at >= since)
                            .map(|(_, at)| (*at - since).to_std().unwrap_or_default())
                            .collect();
                        Ok((ages.len() >= want).then_some(ages))
                    }
                },
            )
            .await
        }
    };
    let (a, b) = tokio::try_join!(
        ages(stack.tenant.clone(), changed_at, a_envs.len()),
        ages(b_id.clone(), b_changed_at, b_envs.len()),
    )?;
    let (a, b) = (summarize(&a), summarize(&b));
    stack.stop().await;
    let secs = |d: Duration| format!("{:.1} s", d.as_secs_f64());
    let mut t = Table::new(
        "Fairness: a change's age when its observation was recorded",
        &["tenant", "environments", "p50", "p99", "max"],
    );
    t.row(vec![
        "A (all changed at once)".into(),
        a.count.to_string(),
        secs(a.p50),
        secs(a.p99),
        secs(a.max),
    ]);
    t.row(vec![
        "B (changed right after A)".into(),
        b.count.to_string(),
        secs(b.p50),
        secs(b.p99),
        secs(b.max),
    ]);
    t.row(vec![
        "B first come, first served (baseline: after A's backlog)".into(),
        b.count.to_string(),
        secs(a.max),
        secs(a.max),
        secs(a.max),
    ]);
    t.print();
    let mut v = Table::new("Target", &["target", "measured", "verdict"]);
    v.row(vec![
        "B's p99 observation age ≤ 60 s while A's backlog drains".into(),
        secs(b.p99),
        verdict(b.p99 <= Duration::from_secs(60)),
    ]);
    v.print();
    Ok(())
}
