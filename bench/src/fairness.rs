//! Benchmark 8: fairness between tenants (execution capacity).
//!
//! One stack, two tenants (each its own token): tenant A floods it, tenant B asks for a few
//! runs, and B's latency is printed next to B's latency on the same stack when idle.
//!
//! - **Seeding**: A gets `flood_runs` non-production environments, one run each (runs on one
//!   environment are serialized by its lock, so a run per environment makes every one of A's
//!   runs contend for A's *capacity* — the quota's `concurrentRuns`, 10 by default — and for
//!   the task queues, which is what fairness is about). B gets `runs` environments for the
//!   idle burst and `runs` more for the burst under flood, so both bursts start from the same
//!   state (each environment's first run).
//! - **Idle**: B requests its `runs` runs at once on the otherwise idle stack.
//! - **Under flood**: A submits its `flood_runs` runs as fast as the API takes them
//!   (`concurrency` requests in flight). Once `b_after` of them are accepted (default: half),
//!   B requests its `runs` runs at once, *while A's submissions go on*: B's requests compete
//!   with A's at the API, and B's runs with A's at the worker and on the task queues — the
//!   harder case than starting B after A's last submission, when the API is quiet again.
//!   The API paces each tenant's submissions (20 a second after a burst of 40 by default,
//!   `api::pacing`), so A's `b_after`th is accepted some 23 s in, when A's runs are in full
//!   swing: B meets A's quota's worth of runs at work, not only A's requests.
//!
//! A run's latency is from the moment the client sent its `POST /factory/provisioning/runs`
//! to the moment a `GET` of it first showed `Applied` (polled every 100 ms), and, beside it, to
//! the `completedAt` the product recorded (which leaves out the polling). A's runs are counted
//! in the read DB; A's progress is printed when B's last run has applied, and A's wall time
//! runs from its first request to its last `completedAt`.
//!
//! To show where B's time goes, every B run's workflow history is split into: the API's start
//! (request → workflow started), workflow tasks waiting in the task queue (scheduled →
//! started), workflow tasks in the worker (started → completed: the code and its local
//! activities — locks, leases, projections), activity tasks waiting (scheduled → started),
//! activities running, and the rest (the run waiting for a signal: a lock's or the capacity's
//! grant).

use crate::api::{Api, for_each_concurrent, workloads};
use crate::stack::{self, Db, Stack, poll, wait_idle};
use crate::stats::{Summary, ratio, summarize};
use crate::table::{Table, ratio_cell, verdict};
use anyhow::{Context, bail};
use runtime_cloud_store::entities::provisioning_runs as runs;
use sea_orm::{ColumnTrait, DatabaseConnection, EntityTrait, PaginatorTrait, QueryFilter};
use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant, SystemTime};
use temporalio_client::Client;
use temporalio_common::protos::temporal::api::enums::v1::{
    EventType, TaskQueueKind, TaskQueueType,
};
use temporalio_common::protos::temporal::api::history::v1::HistoryEvent;
use temporalio_common::protos::temporal::api::history::v1::history_event::Attributes;

#[derive(Debug, Clone, clap::Args)]
pub struct Args {
    /// Runs tenant A floods the stack with, each on its own environment.
    #[arg(long, default_value_t = 1000)]
    pub flood_runs: usize,
    /// Runs tenant B starts at once, idle and under the flood.
    #[arg(long, default_value_t = 10)]
    pub runs: usize,
    /// B starts once this many of A's runs are accepted (default: half of them).
    #[arg(long)]
    pub b_after: Option<usize>,
    /// A's requests in flight while it floods (and while seeding).
    #[arg(long, default_value_t = 32)]
    pub concurrency: usize,
    /// Workloads in each environment's specification.
    #[arg(long, default_value_t = 5)]
    pub workloads: usize,
    #[arg(long, value_enum, default_value_t = Db::Sqlite)]
    pub db: Db,
}

impl Args {
    fn b_after(&self) -> usize {
        self.b_after
            .unwrap_or(self.flood_runs / 2)
            .min(self.flood_runs)
    }
}

/// How often a B run is polled, and how long one may take.
const POLL_EVERY: Duration = Duration::from_millis(100);
const RUN_LIMIT: Duration = Duration::from_secs(1800);

/// One of B's runs: when it was requested, first seen `Applied`, and recorded completed.
#[derive(Debug, Clone)]
struct Sample {
    run_id: String,
    sent: SystemTime,
    seen: SystemTime,
    completed: SystemTime,
}

impl Sample {
    fn seen_latency(&self) -> Duration {
        since(self.sent, self.seen)
    }
    fn recorded_latency(&self) -> Duration {
        since(self.sent, self.completed)
    }
}

/// A burst of B's runs, summarised both ways.
struct Burst {
    samples: Vec<Sample>,
    seen: Summary,
    recorded: Summary,
}

impl Burst {
    fn of(samples: Vec<Sample>) -> Self {
        let seen = summarize(&samples.iter().map(Sample::seen_latency).collect::<Vec<_>>());
        let recorded = summarize(
            &samples
                .iter()
                .map(Sample::recorded_latency)
                .collect::<Vec<_>>(),
        );
        Self {
            samples,
            seen,
            recorded,
        }
    }
}

/// Where tenant A stood at a moment of the flood.
#[derive(Debug, Clone, Copy, Default)]
struct Progress {
    /// Since A's first request.
    at: Duration,
    accepted: usize,
    applied: u64,
    waiting_for_capacity: u64,
}

/// Tasks waiting on the stack's task queue (Temporal's approximate backlog).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Backlog {
    pub(crate) workflow: i64,
    pub(crate) activity: i64,
}

/// What the flood measured.
struct Flood {
    b: Burst,
    /// When B started: A's progress and the task queue's backlog.
    at_b_start: (Progress, Backlog),
    /// When B's last run had applied.
    at_b_done: Progress,
    /// Once all of A's had.
    at_a_done: Progress,
    /// A's first request to A's last `completedAt`.
    a_wall: Duration,
    /// A's first request to its last accepted one.
    a_submit: Duration,
}

/// The stack's two tenants, as API clients.
struct Tenants {
    a: Api,
    b: Api,
    a_id: String,
    b_id: String,
}

/// Environment names: A's flood, B's idle burst, B's burst under flood, and warm-ups.
struct Envs {
    a: Vec<String>,
    b_idle: Vec<String>,
    b_flood: Vec<String>,
}

impl Envs {
    fn new(args: &Args) -> Self {
        let names = |prefix: &str, n: usize| -> Vec<String> {
            (0..n).map(|i| format!("{prefix}-{i:05}")).collect()
        };
        Self {
            a: names("a", args.flood_runs),
            b_idle: names("b-idle", args.runs),
            b_flood: names("b-flood", args.runs),
        }
    }
}

const A_WARMUP: &str = "a-warmup";
const B_WARMUP: &str = "b-warmup";

pub async fn run(args: Args) -> anyhow::Result<()> {
    println!(
        "fairness: tenant A floods {} runs ({} requests in flight), tenant B starts {} runs \
         idle and once {} of A's are accepted, on {}",
        args.flood_runs,
        args.concurrency,
        args.runs,
        args.b_after(),
        args.db.name()
    );
    let stack = Stack::start(args.db).await?;
    let tenants = tenants(&stack)?;
    println!("  tenant A: {}, tenant B: {}", tenants.a_id, tenants.b_id);
    let envs = Envs::new(&args);
    let client = runtime_cloud_temporal::connect(&stack::temporal_address()?, "default").await?;
    let db = stack.db().await?;

    seed(&tenants, &envs, &args).await?;
    warm_up(&tenants, &client, &stack.task_queue).await?;

    let idle = Burst::of(
        burst(&tenants.b, &envs.b_idle)
            .await
            .context("idle burst")?,
    );
    println!("  idle: B's p95 {:.2} s", secs(idle.seen.p95));
    // B's after-apply observations end before the flood starts.
    wait_idle(&client, &stack.task_queue).await?;

    let flood = flood(&tenants, &envs, &args, &db, &client, &stack.task_queue)
        .await
        .context("flood")?;
    let idle_parts = mean_parts(&client, &idle.samples).await?;
    let flood_parts = mean_parts(&client, &flood.b.samples).await?;
    report(&args, &idle, &flood, &idle_parts, &flood_parts);
    stack.stop().await;
    Ok(())
}

/// A is the stack's own tenant; B gets a token of its own, minted the same way.
fn tenants(stack: &Stack) -> anyhow::Result<Tenants> {
    let b_id = format!("{}-b", stack.tenant);
    let b_token = stack.mint(&b_id, &["Operator"], stack::SCOPES)?;
    Ok(Tenants {
        a: stack.api(),
        b: Api::new(&stack.base_url, &b_token),
        a_id: stack.tenant.clone(),
        b_id,
    })
}

/// Registers and declares every environment over HTTP, each tenant with its own token.
async fn seed(t: &Tenants, envs: &Envs, args: &Args) -> anyhow::Result<()> {
    let started = Instant::now();
    let wl = Arc::new(workloads(args.workloads));
    let a = envs.a.iter().cloned().chain([A_WARMUP.to_owned()]);
    let b = envs.b_idle.iter().chain(&envs.b_flood).cloned();
    let b = b.chain([B_WARMUP.to_owned()]);
    let all: Vec<(Api, String)> = a
        .map(|e| (t.a.clone(), e))
        .chain(b.map(|e| (t.b.clone(), e)))
        .collect();
    let n = all.len();
    for_each_concurrent(all, args.concurrency, |(api, env)| {
        let wl = wl.clone();
        async move {
            api.environment(&env).await?;
            api.declare(&env, &wl).await
        }
    })
    .await
    .context("seeding environments")?;
    println!(
        "  seeded {n} environments in {:.1} s",
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

/// One run per tenant first (connections, each tenant's first capacity semaphore), not
/// counted; then waits until every workflow they started has ended.
async fn warm_up(t: &Tenants, client: &Client, task_queue: &str) -> anyhow::Result<()> {
    tokio::try_join!(run_one(&t.a, A_WARMUP), run_one(&t.b, B_WARMUP))?;
    wait_idle(client, task_queue).await
}

/// Requests a run on `env` and polls it until the API shows it `Applied`.
async fn run_one(api: &Api, env: &str) -> anyhow::Result<Sample> {
    let (run_id, sent) = api.plan_run(env).await?;
    let path = format!("/factory/provisioning/runs/{run_id}");
    let (seen, run) = poll("the run to apply", POLL_EVERY, RUN_LIMIT, || async {
        let run = api.get(&path).await?;
        match run["state"].as_str() {
            Some("Applied") => Ok(Some((SystemTime::now(), run))),
            Some(s @ ("Failed" | "Rejected" | "Cancelled")) => {
                bail!("run {run_id} on {env} ended {s}: {run}")
            }
            _ => Ok(None),
        }
    })
    .await?;
    Ok(Sample {
        completed: completed_at(&run)?,
        run_id,
        sent,
        seen,
    })
}

/// Requests a run on every one of `envs` at once, and waits for all of them to apply.
async fn burst(api: &Api, envs: &[String]) -> anyhow::Result<Vec<Sample>> {
    futures::future::try_join_all(envs.iter().map(|env| run_one(api, env))).await
}

/// A floods; B's burst starts once `b_after` of A's runs are accepted, while A goes on.
async fn flood(
    t: &Tenants,
    envs: &Envs,
    args: &Args,
    db: &DatabaseConnection,
    client: &Client,
    task_queue: &str,
) -> anyhow::Result<Flood> {
    let accepted = Arc::new(AtomicUsize::new(0));
    let t0 = SystemTime::now();
    let submitting = tokio::spawn(submit(
        t.a.clone(),
        envs.a.clone(),
        args.concurrency,
        accepted.clone(),
    ));
    let b_after = args.b_after();
    poll(
        "A's runs to be accepted",
        Duration::from_millis(5),
        RUN_LIMIT,
        || async { Ok((accepted.load(Ordering::Relaxed) >= b_after).then_some(())) },
    )
    .await?;
    let at_b_start = (
        progress(db, &t.a_id, &accepted, t0).await?,
        backlog(client, task_queue).await?,
    );
    println!(
        "  B starts: A {} accepted, {} applied, {} waiting for capacity; backlog: {} workflow \
         tasks, {} activity tasks",
        at_b_start.0.accepted,
        at_b_start.0.applied,
        at_b_start.0.waiting_for_capacity,
        at_b_start.1.workflow,
        at_b_start.1.activity
    );
    let b = Burst::of(burst(&t.b, &envs.b_flood).await.context("B under flood")?);
    let at_b_done = progress(db, &t.a_id, &accepted, t0).await?;
    println!(
        "  B done (p95 {:.2} s): A {} accepted, {} applied, {} waiting for capacity",
        secs(b.seen.p95),
        at_b_done.accepted,
        at_b_done.applied,
        at_b_done.waiting_for_capacity
    );
    let a_submit = submitting.await??.duration_since(t0).unwrap_or_default();
    println!(
        "  A's {} runs accepted in {:.1} s",
        args.flood_runs,
        secs(a_submit)
    );
    wait_all_applied(db, &t.a_id, args.flood_runs + 1, t0).await?;
    let at_a_done = progress(db, &t.a_id, &accepted, t0).await?;
    let a_last = last_completed(db, &t.a_id).await?;
    Ok(Flood {
        b,
        at_b_start,
        at_b_done,
        at_a_done,
        a_wall: since(t0, a_last),
        a_submit,
    })
}

/// Requests a run on every one of `envs`, `concurrency` in flight, counting the accepted ones;
/// returns when the last was accepted.
async fn submit(
    api: Api,
    envs: Vec<String>,
    concurrency: usize,
    accepted: Arc<AtomicUsize>,
) -> anyhow::Result<SystemTime> {
    for_each_concurrent(envs, concurrency, |env| {
        let (api, accepted) = (api.clone(), accepted.clone());
        async move {
            api.plan_run(&env).await?;
            accepted.fetch_add(1, Ordering::Relaxed);
            Ok(())
        }
    })
    .await
    .context("flooding")?;
    Ok(SystemTime::now())
}

/// A's runs in the read DB: applied, and waiting for capacity.
async fn progress(
    db: &DatabaseConnection,
    tenant: &str,
    accepted: &AtomicUsize,
    t0: SystemTime,
) -> anyhow::Result<Progress> {
    let at = since(t0, SystemTime::now());
    let of_tenant = || runs::Entity::find().filter(runs::Column::TenantId.eq(tenant));
    let applied = of_tenant()
        .filter(runs::Column::State.eq("Applied"))
        .count(db)
        .await?;
    let waiting = of_tenant()
        .filter(runs::Column::WaitingForCapacity.is_not_null())
        .count(db)
        .await?;
    Ok(Progress {
        at,
        // The warm-up run is A's too.
        applied: applied.saturating_sub(1),
        accepted: accepted.load(Ordering::Relaxed),
        waiting_for_capacity: waiting,
    })
}

/// Waits until `want` of the tenant's runs are `Applied` (none failed), saying how far it got
/// every 15 s.
async fn wait_all_applied(
    db: &DatabaseConnection,
    tenant: &str,
    want: usize,
    t0: SystemTime,
) -> anyhow::Result<()> {
    let last_said = std::sync::Mutex::new(Instant::now());
    poll(
        "every run of A applied",
        Duration::from_millis(500),
        Duration::from_secs(3600),
        || {
            let last_said = &last_said;
            async move {
                let in_state = |s: &'static str| {
                    runs::Entity::find()
                        .filter(runs::Column::TenantId.eq(tenant))
                        .filter(runs::Column::State.eq(s))
                        .count(db)
                };
                if in_state("Failed").await? > 0 {
                    bail!("a run of A failed; see the worker log");
                }
                let applied = in_state("Applied").await? as usize;
                let mut last = last_said.lock().unwrap_or_else(|e| e.into_inner());
                if last.elapsed() > Duration::from_secs(15) {
                    let after = secs(SystemTime::now().duration_since(t0).unwrap_or_default());
                    println!("  A: {applied}/{want} applied after {after:.0} s");
                    *last = Instant::now();
                }
                Ok((applied >= want).then_some(()))
            }
        },
    )
    .await
}

/// The newest `completedAt` of the tenant's runs.
async fn last_completed(db: &DatabaseConnection, tenant: &str) -> anyhow::Result<SystemTime> {
    use sea_orm::QueryOrder;
    let newest = runs::Entity::find()
        .filter(runs::Column::TenantId.eq(tenant))
        .filter(runs::Column::CompletedAt.is_not_null())
        .order_by_desc(runs::Column::CompletedAt)
        .one(db)
        .await?
        .and_then(|r| r.completed_at)
        .context("a completed run")?;
    Ok(newest.into())
}

/// The approximate backlog of the stack's workflow and activity task queues.
pub(crate) async fn backlog(client: &Client, task_queue: &str) -> anyhow::Result<Backlog> {
    Ok(Backlog {
        workflow: backlog_of(client, task_queue, TaskQueueType::Workflow).await?,
        activity: backlog_of(client, task_queue, TaskQueueType::Activity).await?,
    })
}

async fn backlog_of(client: &Client, task_queue: &str, kind: TaskQueueType) -> anyhow::Result<i64> {
    use temporalio_client::NamespacedClient;
    use temporalio_common::protos::temporal::api::taskqueue::v1::TaskQueue;
    use temporalio_common::protos::temporal::api::workflowservice::v1::DescribeTaskQueueRequest;
    let request = DescribeTaskQueueRequest {
        namespace: client.namespace(),
        task_queue: Some(TaskQueue {
            name: task_queue.to_owned(),
            ..Default::default()
        }),
        task_queue_type: kind as i32,
        report_stats: true,
        ..Default::default()
    };
    let answer = client
        .connection()
        .workflow_service()
        .describe_task_queue(temporalio_client::tonic::Request::new(request))
        .await
        .context("describe the task queue")?
        .into_inner();
    Ok(answer.stats.map_or(0, |s| s.approximate_backlog_count))
}

/// Where one run's time went between its request and its `completedAt`, in seconds.
#[derive(Debug, Clone, Copy, Default)]
struct Parts {
    /// Request sent → workflow started (the API).
    api_start: f64,
    /// Workflow tasks scheduled → picked up by the worker.
    workflow_task_wait: f64,
    /// Workflow tasks picked up → completed (workflow code and its local activities).
    workflow_task_work: f64,
    /// Activity tasks scheduled → picked up.
    activity_wait: f64,
    /// Activity tasks picked up → completed.
    activity_work: f64,
    /// The rest: waiting for a signal (a lock's or the capacity's grant).
    signal_wait: f64,
    total: f64,
    /// Workflow tasks, and those of them scheduled on the task queue every worker polls
    /// rather than on the worker's sticky queue: a run's first, and any after its workflow
    /// was evicted from the worker's cache (which replays its whole history).
    workflow_tasks: f64,
    unsticky_tasks: f64,
}

impl Parts {
    fn add(&mut self, o: &Parts) {
        self.api_start += o.api_start;
        self.workflow_task_wait += o.workflow_task_wait;
        self.workflow_task_work += o.workflow_task_work;
        self.activity_wait += o.activity_wait;
        self.activity_work += o.activity_work;
        self.signal_wait += o.signal_wait;
        self.total += o.total;
        self.workflow_tasks += o.workflow_tasks;
        self.unsticky_tasks += o.unsticky_tasks;
    }

    fn scaled(mut self, by: f64) -> Parts {
        for v in [
            &mut self.api_start,
            &mut self.workflow_task_wait,
            &mut self.workflow_task_work,
            &mut self.activity_wait,
            &mut self.activity_work,
            &mut self.signal_wait,
            &mut self.total,
            &mut self.workflow_tasks,
            &mut self.unsticky_tasks,
        ] {
            *v *= by;
        }
        self
    }
}

/// The mean [`Parts`] of the samples' runs.
async fn mean_parts(client: &Client, samples: &[Sample]) -> anyhow::Result<Parts> {
    let mut sum = Parts::default();
    for s in samples {
        let events = history(client, &format!("provisioning-run/{}", s.run_id)).await?;
        sum.add(&parts_of(s, &events));
    }
    Ok(sum.scaled(1.0 / samples.len().max(1) as f64))
}

async fn history(client: &Client, workflow_id: &str) -> anyhow::Result<Vec<HistoryEvent>> {
    use futures::StreamExt;
    let info = temporalio_client::WorkflowExecutionInfo::builder()
        .namespace("default")
        .workflow_id(workflow_id)
        .build();
    let mut stream = info
        .bind_untyped(client.clone())
        .fetch_history(Default::default());
    let mut events = Vec::new();
    while let Some(e) = stream.next().await {
        events.push(e?);
    }
    Ok(events)
}

/// Splits the run's time from request to `completedAt` by what its history shows it waiting
/// on. Intervals are cut at `completedAt` (its projection ran inside a workflow task).
fn parts_of(s: &Sample, events: &[HistoryEvent]) -> Parts {
    let end = s.completed;
    let span = |from: SystemTime, to: SystemTime| secs(since(from.min(end), to.min(end)));
    let mut scheduled: HashMap<i64, SystemTime> = HashMap::new();
    let mut started: HashMap<i64, SystemTime> = HashMap::new();
    let mut p = Parts::default();
    let Some(first) = events.first().map(event_time) else {
        return p;
    };
    for e in events {
        let at = event_time(e);
        if let Some(Attributes::WorkflowTaskScheduledEventAttributes(a)) = &e.attributes {
            p.workflow_tasks += 1.0;
            let kind = a.task_queue.as_ref().map(|q| q.kind());
            if kind != Some(TaskQueueKind::Sticky) {
                p.unsticky_tasks += 1.0;
            }
        }
        match (e.event_type(), &e.attributes) {
            (EventType::WorkflowTaskScheduled | EventType::ActivityTaskScheduled, _) => {
                scheduled.insert(e.event_id, at);
            }
            (_, Some(Attributes::WorkflowTaskStartedEventAttributes(a))) => {
                started.insert(a.scheduled_event_id, at);
                if let Some(&from) = scheduled.get(&a.scheduled_event_id) {
                    p.workflow_task_wait += span(from, at);
                }
            }
            (_, Some(Attributes::WorkflowTaskCompletedEventAttributes(a))) => {
                if let Some(&from) = started.get(&a.scheduled_event_id) {
                    p.workflow_task_work += span(from, at);
                }
            }
            (_, Some(Attributes::ActivityTaskStartedEventAttributes(a))) => {
                // Recorded when the activity ends, with the time it started.
                started.insert(a.scheduled_event_id, at);
                if let Some(&from) = scheduled.get(&a.scheduled_event_id) {
                    p.activity_wait += span(from, at);
                }
            }
            (_, Some(Attributes::ActivityTaskCompletedEventAttributes(a))) => {
                if let Some(&from) = started.get(&a.scheduled_event_id) {
                    p.activity_work += span(from, at);
                }
            }
            _ => {}
        }
    }
    p.api_start = secs(since(s.sent, first));
    p.total = secs(s.recorded_latency());
    let accounted = p.api_start
        + p.workflow_task_wait
        + p.workflow_task_work
        + p.activity_wait
        + p.activity_work;
    p.signal_wait = (p.total - accounted).max(0.0);
    p
}

fn event_time(e: &HistoryEvent) -> SystemTime {
    e.event_time.as_ref().map_or(SystemTime::UNIX_EPOCH, |t| {
        SystemTime::UNIX_EPOCH
            + Duration::new(
                u64::try_from(t.seconds).unwrap_or(0),
                u32::try_from(t.nanos).unwrap_or(0),
            )
    })
}

fn since(from: SystemTime, to: SystemTime) -> Duration {
    to.duration_since(from).unwrap_or_default()
}

fn secs(d: Duration) -> f64 {
    d.as_secs_f64()
}

fn completed_at(run: &serde_json::Value) -> anyhow::Result<SystemTime> {
    let at = run["completedAt"].as_str().context("completedAt")?;
    Ok(chrono::DateTime::parse_from_rfc3339(at)?.to_utc().into())
}

fn s3(d: Duration) -> String {
    format!("{:.3}", secs(d))
}

fn report(args: &Args, idle: &Burst, flood: &Flood, idle_parts: &Parts, flood_parts: &Parts) {
    let mut t = Table::new(
        &format!(
            "Fairness: tenant B's {} runs, idle and while tenant A floods {} runs \
             (`scripts/bench fairness --flood-runs {} --runs {}`, B starts at A's {}th \
             accepted run, {})",
            args.runs,
            args.flood_runs,
            args.flood_runs,
            args.runs,
            args.b_after(),
            args.db.name()
        ),
        &[
            "tenant B",
            "runs",
            "p50 s",
            "p95 s",
            "max s",
            "p95 s (to completedAt)",
        ],
    );
    let row = |name: &str, b: &Burst| {
        vec![
            name.to_owned(),
            b.seen.count.to_string(),
            s3(b.seen.p50),
            s3(b.seen.p95),
            s3(b.seen.max),
            s3(b.recorded.p95),
        ]
    };
    let r = |a: Duration, b: Duration| ratio_cell(ratio(secs(a), secs(b)));
    t.row(row("idle", idle));
    t.row(row("under flood", &flood.b));
    t.row(vec![
        "under flood / idle".into(),
        String::new(),
        r(flood.b.seen.p50, idle.seen.p50),
        r(flood.b.seen.p95, idle.seen.p95),
        r(flood.b.seen.max, idle.seen.max),
        r(flood.b.recorded.p95, idle.recorded.p95),
    ]);
    t.print();

    let mut a = Table::new(
        &format!("Tenant A's flood of {} runs", args.flood_runs),
        &[
            "",
            "accepted",
            "applied",
            "waiting for capacity",
            "s since A's first request",
        ],
    );
    let at = |name: &str, p: &Progress| {
        vec![
            name.to_owned(),
            p.accepted.to_string(),
            p.applied.to_string(),
            p.waiting_for_capacity.to_string(),
            format!("{:.1}", secs(p.at)),
        ]
    };
    a.row(at("when B started", &flood.at_b_start.0));
    a.row(at("when B's last run applied", &flood.at_b_done));
    a.row(vec![
        "all accepted".into(),
        args.flood_runs.to_string(),
        String::new(),
        String::new(),
        format!("{:.1}", secs(flood.a_submit)),
    ]);
    let mut all_applied = at(
        &format!(
            "all applied ({:.1} runs/s; at the last completedAt)",
            args.flood_runs as f64 / secs(flood.a_wall).max(f64::MIN_POSITIVE)
        ),
        &flood.at_a_done,
    );
    all_applied[4] = format!("{:.1}", secs(flood.a_wall));
    a.row(all_applied);
    a.print();
    println!(
        "Task queue backlog when B started: {} workflow tasks, {} activity tasks.",
        flood.at_b_start.1.workflow, flood.at_b_start.1.activity
    );

    let mut w = Table::new(
        "Where B's time goes (mean per run, s, from its workflow history; to completedAt)",
        &[
            "tenant B",
            "API start",
            "workflow tasks queued",
            "workflow tasks in worker",
            "activities queued",
            "activities running",
            "waiting for a grant",
            "total",
            "workflow tasks",
            "of them not sticky",
        ],
    );
    let parts_row = |name: &str, p: &Parts| {
        vec![
            name.to_owned(),
            format!("{:.3}", p.api_start),
            format!("{:.3}", p.workflow_task_wait),
            format!("{:.3}", p.workflow_task_work),
            format!("{:.3}", p.activity_wait),
            format!("{:.3}", p.activity_work),
            format!("{:.3}", p.signal_wait),
            format!("{:.3}", p.total),
            format!("{:.1}", p.workflow_tasks),
            format!("{:.1}", p.unsticky_tasks),
        ]
    };
    w.row(parts_row("idle", idle_parts));
    w.row(parts_row("under flood", flood_parts));
    w.print();

    let p95_ratio = ratio(secs(flood.b.seen.p95), secs(idle.seen.p95));
    let mut v = Table::new("Target", &["target", "measured", "verdict"]);
    v.row(vec![
        "B's p95 under flood <= 2 x idle".into(),
        format!("{p95_ratio:.2} x"),
        verdict(p95_ratio <= 2.0),
    ]);
    v.print();
}
