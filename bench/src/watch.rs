//! Benchmark 10, drift in seconds: how long an out-of-band change on a watched Kubernetes
//! cluster takes to be observed, next to the sweep that found it before the watches.
//!
//! Each environment observes a namespace of the cluster stand-in (`tests/common/
//! kube_stand_in.rs`, which speaks the watch protocol) holding one Deployment as declared.
//! `kubectl edit` scales a namespace's Deployment, `--rate` changes a second over the namespaces
//! in turn; a change is detected when the environment's recorded inventory shows its replicas
//! (the observation's record, findings included; read from the read DB every 20 ms).
//!
//! **Baseline**: the same cluster and changes with the watches off
//! (`RUNTIME_CLOUD_KUBERNETES_WATCH=false`): the sweep finds them. Its schedule ticks every five
//! minutes, so a change waits for the next tick (half the period on the median, 95 % of it at
//! p95) and then for the sweep to reach it, which is measured here by triggering it once the
//! changes are made.

use crate::api::{Api, for_each_concurrent};
use crate::fleet::{kubernetes_object, kubernetes_workloads};
use crate::stack::{Db, Stack, poll};
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
}

/// The sweep's schedule period.
const SWEEP_EVERY: Duration = Duration::from_secs(300);

pub async fn run(args: Args) -> anyhow::Result<()> {
    println!(
        "10. Drift in seconds: {} change(s) at {}/s over {} watched namespace(s), {}",
        args.changes,
        args.rate,
        args.namespaces,
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
    t.row(vec![
        "watched".into(),
        watched.count.to_string(),
        secs(watched.p50),
        secs(watched.p95),
        secs(watched.max),
    ]);
    t.row(vec![
        "the sweep, triggered after the last change".into(),
        swept.count.to_string(),
        secs(swept.p50),
        secs(swept.p95),
        secs(swept.max),
    ]);
    t.row(vec![
        "the sweep on its schedule (baseline)".into(),
        swept.count.to_string(),
        secs(at_tick(SWEEP_EVERY / 2, swept.p50)),
        secs(at_tick(SWEEP_EVERY.mul_f64(0.95), swept.p95)),
        secs(at_tick(SWEEP_EVERY, swept.max)),
    ]);
    t.print();
    let mut v = Table::new("Target", &["target", "measured", "verdict"]);
    v.row(vec![
        "watched p95 ≤ 5 s".into(),
        secs(watched.p95),
        verdict(watched.p95 <= Duration::from_secs(5)),
    ]);
    v.print();
    Ok(())
}

/// Makes the changes on a fresh stack and cluster, the watches on or off, and measures each
/// one's detection.
async fn detect(args: &Args, watch: bool) -> anyhow::Result<Summary> {
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
    let stack = Stack::start_with(args.db, env).await?;
    let kubeconfig = stack.dir.path().join("kubeconfig");
    std::fs::write(&kubeconfig, cluster.kubeconfig())?;
    let kubeconfig_ref = format!("file://{}", kubeconfig.display());
    let api = stack.api();
    let mut one = kubernetes_workloads(1);
    one[0].kind = "deployment".into();
    let workloads = Arc::new(one);
    let name = workloads[0].name.clone();
    let declared = i64::from(workloads[0].replicas);
    let envs: Vec<String> = (0..args.namespaces).map(|i| format!("w-{i:05}")).collect();
    seed(args, &api, &cluster, &kubeconfig_ref, &workloads, &envs).await?;
    let db = stack.db().await?;
    if watch {
        poll(
            "the cluster's five watches",
            Duration::from_millis(50),
            Duration::from_secs(120),
            || {
                let open = cluster.watching() == 5;
                async move { Ok(open.then_some(())) }
            },
        )
        .await?;
    }
    // The changes, at the rate: (environment, replicas, when).
    let every = Duration::from_secs_f64(1.0 / args.rate.max(0.001));
    let started = tokio::time::Instant::now();
    let mut made: Vec<(String, i64, Instant)> = Vec::new();
    for i in 0..args.changes {
        tokio::time::sleep_until(started + every.mul_f64(i as f64)).await;
        let env = &envs[i % envs.len()];
        let replicas = declared + 1 + i as i64;
        cluster.update(
            env,
            "deployments",
            &name,
            ("kubectl-edit", None),
            serde_json::json!({ "f:spec": { "f:replicas": {} } }),
            |d| d["spec"]["replicas"] = serde_json::json!(replicas),
        );
        made.push((env.clone(), replicas, Instant::now()));
    }
    if !watch {
        let client =
            runtime_cloud_temporal::connect(&crate::stack::temporal_address()?, "default").await?;
        client
            .get_schedule_handle(format!("{}/observation-sweep", stack.task_queue))
            .trigger(ScheduleOverlapPolicy::AllowAll, Default::default())
            .await
            .context("triggering the sweep")?;
    }
    let mut latencies = Vec::new();
    let mut waiting = made;
    let deadline = Instant::now() + Duration::from_secs(600);
    while !waiting.is_empty() {
        anyhow::ensure!(
            Instant::now() < deadline,
            "{} change(s) not observed within 10 minutes",
            waiting.len()
        );
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
    Ok(summarize(&latencies))
}

/// Registers an environment per namespace, declares its one workload, and creates it on the
/// cluster as declared.
async fn seed(
    args: &Args,
    api: &Api,
    cluster: &Arc<KubeStandIn>,
    kubeconfig_ref: &str,
    workloads: &Arc<Vec<runtime_cloud_models::Workload>>,
    envs: &[String],
) -> anyhow::Result<()> {
    for_each_concurrent(envs.to_vec(), args.seed_concurrency, |env| {
        let (api, wl, cluster) = (api.clone(), workloads.clone(), cluster.clone());
        let kubeconfig_ref = kubeconfig_ref.to_owned();
        async move {
            for w in wl.iter() {
                cluster.create(
                    &env,
                    kubernetes_object(w),
                    runtime_cloud_models::observation::FIELD_MANAGER,
                );
            }
            let target = serde_json::json!({ "observer": {
                "kind": "kubernetes", "kubeconfigRef": kubeconfig_ref, "namespace": env } });
            let body = serde_json::json!({ "environmentId": env, "projectId": "bench",
                                           "class": "non-production", "target": target });
            api.post("/factory/environments", body, 201).await?;
            api.declare(&env, &wl).await?;
            Ok(())
        }
    })
    .await
    .context("seeding the namespaces")
}
