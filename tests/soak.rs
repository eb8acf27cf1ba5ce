//! The chaos soak: for `RC_SOAK_MINUTES` (3 in the suite, 20 from
//! `scripts/soak`) runs flow on 100 environments, targets drift out of band, sweeps and
//! operators' observations raise findings and proposals, operators approve runs and decide
//! proposals, and the outbox relay publishes to NATS JetStream — while a fault loop SIGKILLs
//! workers, API processes and the Temporal dev server, and cuts PostgreSQL and NATS through
//! loopback proxies, and restarts or restores each. Then every fault is healed, the soak waits
//! until the product has finished what it was doing (every running workflow legitimately
//! waiting, the outbox published), sweeps once more, and the invariant checker
//! (`common::invariants`) gives its verdicts. The report prints every fault injected and every
//! verdict; any broken invariant fails the test.
//!
//! The random choices (which fault, how long, which load action on which environment) come from
//! one seed, printed first; `RC_SOAK_SEED` replays the same choices (their timing against the
//! product's is not replayed).

use crate::common::invariants::{Facts, Verdict};
use crate::common::nats::Nats;
use crate::common::proxy::Proxy;
use crate::common::temporal::OwnTemporal;
use crate::common::{Api, Db, Proc, Res, Stack, StackOptions};
use reqwest::Method;
use runtime_cloud_activities::ports::Target;
use runtime_cloud_activities::sandbox::Sandbox;
use runtime_cloud_models::Workload;
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Environments under load: `e00`…`e99`, the last [`PRODUCTION`] of class production.
const ENVS: usize = 100;
const PRODUCTION: usize = 10;
/// How long the soak waits for the product to settle once the faults are healed.
const SETTLE: Duration = Duration::from_secs(600);

/// SplitMix64: a small seeded random source, so a printed seed replays the soak's choices.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }

    /// Milliseconds between `lo` and `hi` seconds.
    fn secs(&mut self, lo: f64, hi: f64) -> Duration {
        let (lo, hi) = ((lo * 1000.0) as u64, (hi * 1000.0) as u64);
        Duration::from_millis(lo + self.below(hi - lo + 1))
    }

    fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }

    fn env(&mut self) -> String {
        env_name(self.below(ENVS as u64) as usize)
    }
}

fn env_name(i: usize) -> String {
    format!("e{i:02}")
}

fn production(env: &str) -> bool {
    env[1..]
        .parse::<usize>()
        .is_ok_and(|i| i >= ENVS - PRODUCTION)
}

/// Seconds since the soak started, for the report's timeline.
fn at(start: Instant) -> String {
    format!("[{:>7.1}s]", start.elapsed().as_secs_f64())
}

/// The API processes' URLs, `None` while one is down: the load picks a live one.
type Urls = Arc<Mutex<Vec<Option<String>>>>;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Fault {
    KillWorker,
    KillApi,
    KillTemporal,
    CutPostgres,
    CutNats,
}

impl Fault {
    fn pick(rng: &mut Rng) -> Fault {
        match rng.below(100) {
            0..25 => Fault::KillWorker,
            25..45 => Fault::KillApi,
            45..60 => Fault::KillTemporal,
            60..80 => Fault::CutPostgres,
            _ => Fault::CutNats,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Fault::KillWorker => "SIGKILL a worker, restart it",
            Fault::KillApi => "SIGKILL an API process, restart it",
            Fault::KillTemporal => "SIGKILL the Temporal dev server, restart it on its store",
            Fault::CutPostgres => "cut PostgreSQL (proxy), restore it",
            Fault::CutNats => "cut NATS (proxy), restore it",
        }
    }
}

/// Everything the fault loop can break, and how to mend it.
struct Chaos {
    stack: Arc<Stack>,
    temporal: OwnTemporal,
    postgres: Proxy,
    nats: Proxy,
    workers: Vec<Option<Proc>>,
    apis: Vec<Option<Proc>>,
    urls: Urls,
    rng: Rng,
    start: Instant,
    injected: BTreeMap<Fault, Vec<Duration>>,
    /// Product processes found dead that the soak had not killed.
    exited_on_their_own: Vec<String>,
}

impl Chaos {
    fn restart_worker(&mut self, i: usize) {
        self.workers[i] = Some(self.stack.spawn_worker());
    }

    fn restart_api(&mut self, i: usize) {
        let stack = self.stack.clone();
        let (proc, url) = tokio::task::block_in_place(|| stack.spawn_api());
        self.apis[i] = Some(proc);
        self.urls.lock().expect("API URLs")[i] = Some(url);
    }

    /// One fault: inject, hold, heal.
    async fn inject(&mut self, fault: Fault) {
        let hold = match fault {
            Fault::KillWorker => self.rng.secs(1.0, 6.0),
            Fault::KillApi => self.rng.secs(0.5, 3.0),
            Fault::KillTemporal => self.rng.secs(1.0, 5.0),
            Fault::CutPostgres => self.rng.secs(2.0, 10.0),
            Fault::CutNats => self.rng.secs(2.0, 15.0),
        };
        let which = self.rng.below(2) as usize;
        let what = match fault {
            Fault::KillWorker | Fault::KillApi => format!("{} #{which}", fault.name()),
            _ => fault.name().to_owned(),
        };
        println!(
            "{} fault: {what}, healed after {:.1} s",
            at(self.start),
            hold.as_secs_f64()
        );
        match fault {
            Fault::KillWorker => {
                if let Some(mut w) = self.workers[which].take() {
                    w.kill();
                }
                tokio::time::sleep(hold).await;
                self.restart_worker(which);
            }
            Fault::KillApi => {
                self.urls.lock().expect("API URLs")[which] = None;
                if let Some(mut a) = self.apis[which].take() {
                    a.kill();
                }
                tokio::time::sleep(hold).await;
                self.restart_api(which);
            }
            Fault::KillTemporal => {
                self.temporal.kill().await;
                tokio::time::sleep(hold).await;
                self.temporal.spawn();
                self.temporal.wait_up().await;
            }
            Fault::CutPostgres => {
                self.postgres.cut();
                tokio::time::sleep(hold).await;
                self.postgres.restore();
            }
            Fault::CutNats => {
                self.nats.cut();
                tokio::time::sleep(hold).await;
                self.nats.restore();
            }
        }
        self.injected.entry(fault).or_default().push(hold);
    }

    /// Restarts any product process that died without being killed (and notes it).
    fn revive(&mut self) {
        for i in 0..self.workers.len() {
            if let Some(w) = &mut self.workers[i]
                && let Ok(Some(status)) = w.child.try_wait()
            {
                let note = format!("worker #{i} exited on its own ({status})");
                println!("{} {note}", at(self.start));
                self.exited_on_their_own.push(note);
                self.restart_worker(i);
            }
        }
        for i in 0..self.apis.len() {
            if let Some(a) = &mut self.apis[i]
                && let Ok(Some(status)) = a.child.try_wait()
            {
                let note = format!("API #{i} exited on its own ({status})");
                println!("{} {note}", at(self.start));
                self.exited_on_their_own.push(note);
                self.urls.lock().expect("API URLs")[i] = None;
                self.restart_api(i);
            }
        }
    }

    /// Faults one after another until `stop`, with a pause of a few seconds between them.
    async fn run(mut self, stop: Arc<AtomicBool>) -> Chaos {
        while !stop.load(Ordering::Relaxed) {
            let pause = self.rng.secs(2.0, 6.0);
            tokio::time::sleep(pause).await;
            if stop.load(Ordering::Relaxed) {
                break;
            }
            self.revive();
            let fault = Fault::pick(&mut self.rng);
            self.inject(fault).await;
        }
        self.revive();
        self
    }
}

/// The load's tallies: what it did, and what it was refused while faults were in.
#[derive(Default)]
struct Tally {
    done: BTreeMap<&'static str, usize>,
    refused: BTreeMap<String, usize>,
}

/// Runs, drift, sweeps, observations and operators' decisions, at a few actions a second.
struct Load {
    stack: Arc<Stack>,
    operator: Api,
    urls: Urls,
    sandbox: Sandbox,
    rng: Rng,
    /// Run requests not answered yet, by Idempotency-Key: retried with the same key.
    pending: BTreeMap<String, Value>,
    keys: usize,
    versions: usize,
    last_sweep: Option<Instant>,
    tally: Tally,
}

impl Load {
    /// The operator on a live API process, if one is up.
    fn api(&mut self) -> Option<Api> {
        let live: Vec<String> = self
            .urls
            .lock()
            .expect("API URLs")
            .iter()
            .flatten()
            .cloned()
            .collect();
        if live.is_empty() {
            return None;
        }
        let i = self.rng.below(live.len() as u64) as usize;
        Some(self.operator.at(&live[i]))
    }

    /// Sends a request to a live API; a refusal (no API up, connection lost, 5xx) is tallied
    /// and answered as None.
    async fn send(
        &mut self,
        method: Method,
        path: &str,
        body: Option<Value>,
        headers: &[(&str, &str)],
    ) -> Option<Res> {
        let route = format!("{method} {}", route(path));
        let Some(api) = self.api() else {
            *self
                .tally
                .refused
                .entry("no API process up".into())
                .or_default() += 1;
            return None;
        };
        match api.try_send(method, path, body, headers).await {
            Err(_) => {
                *self
                    .tally
                    .refused
                    .entry(format!("connection failed: {route}"))
                    .or_default() += 1;
                None
            }
            Ok(res) if res.status.is_server_error() => {
                let why = format!("HTTP {}: {route}", res.status.as_u16());
                *self.tally.refused.entry(why).or_default() += 1;
                None
            }
            Ok(res) => Some(res),
        }
    }

    fn count(&mut self, what: &'static str) {
        *self.tally.done.entry(what).or_default() += 1;
    }

    fn target(&self, env: &str) -> Target {
        Target {
            tenant_id: self.operator.tenant.clone(),
            environment_id: env.to_owned(),
            limits: None,
        }
    }

    /// Registers every environment with a specification of two workloads; applies take
    /// 200 ms, so kills land mid-apply.
    async fn setup(&mut self) {
        for i in 0..ENVS {
            let env = env_name(i);
            let (class, project) = if production(&env) {
                ("production", "payments")
            } else {
                ("non-production", "shop")
            };
            self.operator
                .post(
                    "/factory/environments",
                    json!({ "environmentId": env, "projectId": project, "class": class }),
                )
                .await
                .expect(201);
            self.operator
                .post(
                    "/factory/provisioning/specifications",
                    spec(&env, "1.0.0", 1),
                )
                .await
                .expect(201);
            self.sandbox
                .modify(&self.target(&env), |d| d.apply_delay_ms = 200)
                .await
                .expect("sandbox");
        }
    }

    async fn tick(&mut self) {
        match self.rng.below(100) {
            0..35 => self.request_run().await,
            35..55 => self.drift().await,
            55..63 => self.observe().await,
            63..75 => self.approve().await,
            75..83 => self.decide_proposal().await,
            83..90 => self.sweep().await,
            _ => self.retry_pending().await,
        }
    }

    /// A run on a random environment, after declaring a new version half of the time.
    async fn request_run(&mut self) {
        let env = self.rng.env();
        if self.rng.chance(50) {
            self.versions += 1;
            let version = format!("1.{}.0", self.versions);
            let replicas = 1 + self.rng.below(3) as u32;
            let res = self
                .send(
                    Method::POST,
                    "/factory/provisioning/specifications",
                    Some(spec(&env, &version, replicas)),
                    &[],
                )
                .await;
            if res.is_some_and(|r| r.status.as_u16() == 201) {
                self.count("specifications declared");
            }
        }
        self.keys += 1;
        let key = format!("soak-{}", self.keys);
        let body = json!({ "environmentId": env, "kind": "baseline" });
        self.pending.insert(key.clone(), body);
        self.send_run(&key).await;
    }

    /// Sends the pending request `key`; answered, it is no longer pending.
    async fn send_run(&mut self, key: &str) -> bool {
        let body = self.pending[key].clone();
        let Some(res) = self
            .send(
                Method::POST,
                "/factory/provisioning/runs",
                Some(body),
                &[("Idempotency-Key", key)],
            )
            .await
        else {
            return false;
        };
        match res.status.as_u16() {
            202 => self.count("runs started"),
            200 => self.count("runs answered again by key"),
            // Its first attempt may still be starting the run: asked again later.
            409 if res.body.to_string().contains("still starting") => {
                self.count("run requests still in flight");
                return false;
            }
            other => {
                *self
                    .tally
                    .refused
                    .entry(format!("run request HTTP {other}"))
                    .or_default() += 1;
            }
        }
        self.pending.remove(key);
        true
    }

    async fn retry_pending(&mut self) {
        if let Some(key) = self.pending.keys().next().cloned()
            && self.send_run(&key).await
        {
            self.count("run requests retried");
        }
    }

    /// Someone with cluster access changes a target: scales, sets a version, deletes a
    /// workload or starts one nobody declared.
    async fn drift(&mut self) {
        let env = self.rng.env();
        let how = self.rng.below(4);
        let replicas = 2 + self.rng.below(3) as u32;
        let changed = self
            .sandbox
            .modify(&self.target(&env), |d| match how {
                0 => d
                    .workloads
                    .first_mut()
                    .map(|w| w.replicas = replicas)
                    .is_some(),
                1 => d
                    .workloads
                    .last_mut()
                    .map(|w| w.version = "0.9.0".into())
                    .is_some(),
                2 => d.workloads.pop().is_some(),
                _ if d.workloads.iter().any(|w| w.name == "sidecar") => false,
                _ => {
                    d.workloads.push(Workload {
                        name: "sidecar".into(),
                        kind: "deployment".into(),
                        version: "0.0.1".into(),
                        replicas: 1,
                        config_refs: Default::default(),
                        secret_refs: Default::default(),
                    });
                    true
                }
            })
            .await
            .expect("sandbox");
        if changed {
            self.count("targets drifted out of band");
        }
    }

    async fn observe(&mut self) {
        let env = self.rng.env();
        let path = format!("/factory/environments/{env}/observe");
        if self
            .send(Method::POST, &path, Some(json!({})), &[])
            .await
            .is_some_and(|r| r.status.as_u16() == 202)
        {
            self.count("observations asked for");
        }
    }

    /// One item, at random, of the first page a list answers; None when it is empty or
    /// refused.
    async fn any_of(&mut self, list: &str) -> Option<Value> {
        let page = self.send(Method::GET, list, None, &[]).await?;
        let items = page.body["items"].as_array().cloned().unwrap_or_default();
        if items.is_empty() {
            return None;
        }
        Some(items[self.rng.below(items.len() as u64) as usize].clone())
    }

    /// An operator approves a production run awaiting approval (the plan it shows).
    async fn approve(&mut self) {
        let Some(run) = self
            .any_of("/factory/provisioning/runs?state=AwaitingApproval&limit=50")
            .await
        else {
            return;
        };
        let path = format!(
            "/factory/provisioning/runs/{}/approval",
            run["provisioningRunId"].as_str().unwrap_or_default()
        );
        let body = json!({ "decision": "approve", "reason": "soak CAB-1",
                           "inputsHash": run["planReceipt"]["inputsHash"] });
        if self
            .send(Method::POST, &path, Some(body), &[])
            .await
            .is_some_and(|r| r.status.as_u16() == 202)
        {
            self.count("runs approved");
        }
    }

    /// An operator accepts (mostly) or rejects a proposal waiting for a decision.
    async fn decide_proposal(&mut self) {
        let Some(proposal) = self
            .any_of("/factory/reconciliation/proposals?state=Proposed&limit=50")
            .await
        else {
            return;
        };
        let decision = if self.rng.chance(70) {
            "accept"
        } else {
            "reject"
        };
        let path = format!(
            "/factory/reconciliation/proposals/{}/decide",
            proposal["proposalId"].as_str().unwrap_or_default()
        );
        if self
            .send(
                Method::POST,
                &path,
                Some(json!({ "decision": decision })),
                &[],
            )
            .await
            .is_some_and(|r| r.status.as_u16() == 202)
        {
            self.count("proposals decided");
        }
    }

    /// Triggers the observation sweep's schedule, at most every 20 s.
    async fn sweep(&mut self) {
        if self
            .last_sweep
            .is_some_and(|t| t.elapsed() < Duration::from_secs(20))
        {
            return;
        }
        self.last_sweep = Some(Instant::now());
        if trigger_sweep(&self.stack) {
            self.count("sweeps triggered");
        } else {
            *self
                .tally
                .refused
                .entry("sweep trigger (Temporal down)".into())
                .or_default() += 1;
        }
    }

    async fn run(mut self, stop: Arc<AtomicBool>) -> Load {
        while !stop.load(Ordering::Relaxed) {
            self.tick().await;
            // Pacing of the load generator, not a wait for a condition.
            let pause = self.rng.secs(0.2, 0.6);
            tokio::time::sleep(pause).await;
        }
        self
    }
}

/// A request's route for the tally: the path without its query, ids as `{id}`.
fn route(path: &str) -> String {
    let path = path.split('?').next().unwrap_or_default();
    path.split('/')
        .map(|seg| {
            if seg.chars().any(|c| c.is_ascii_digit()) {
                "{id}"
            } else {
                seg
            }
        })
        .collect::<Vec<_>>()
        .join("/")
}

/// A specification of two workloads, `api` at `version` with `replicas`, and `worker`.
fn spec(env: &str, version: &str, replicas: u32) -> Value {
    let workload = |name: &str, version: &str, replicas: u32| {
        json!({ "name": name, "kind": "deployment", "version": version, "replicas": replicas,
                "configRefs": { "settings": format!("config://shop/{name}") },
                "secretRefs": { "db": format!("secretbroker://shop/{name}/db") } })
    };
    json!({ "environmentId": env, "kind": "environment", "programRef": "git://infra//shop",
            "programVersion": "a1b2c3d4e5", "configRefs": {}, "secretRefs": {},
            "workloads": [workload("api", version, replicas), workload("worker", "1.0.0", 1)] })
}

/// `temporal schedule trigger` of the stack's sweep; false when Temporal refused it.
fn trigger_sweep(stack: &Stack) -> bool {
    let id = format!("{}/observation-sweep", stack.task_queue);
    tokio::task::block_in_place(|| {
        stack
            .temporal_cli(&["schedule", "trigger", "--schedule-id", &id])
            .status
            .success()
    })
}

/// Waits until the product has settled (every running workflow legitimately waiting, every
/// run written started, the outbox published), reading the facts every 2 s; returns how long
/// it took, or None when it did not settle within [`SETTLE`].
async fn settle(stack: &Stack, tenant: &str) -> Option<Duration> {
    let started = Instant::now();
    let mut told = Instant::now();
    while started.elapsed() < SETTLE {
        let facts = Facts::progress(stack, tenant).await;
        if facts.settled() {
            return Some(started.elapsed());
        }
        // What it is still waiting for, every 30 s: a slow settle names its cause.
        if told.elapsed() > Duration::from_secs(30) {
            told = Instant::now();
            println!(
                "    settling for {:.0} s, still at work: {}",
                started.elapsed().as_secs_f64(),
                facts.at_work()
            );
        }
        tokio::time::sleep(Duration::from_secs(2)).await;
    }
    None
}

/// Completed sweeps so far.
async fn sweeps_completed(stack: &Stack) -> u64 {
    let client = stack.temporal_client().await;
    client
        .count_workflows(
            "WorkflowType='ObservationSweep' AND ExecutionStatus='Completed'",
            Default::default(),
        )
        .await
        .map(|c| c.count() as u64)
        .unwrap_or(0)
}

fn minutes() -> f64 {
    std::env::var("RC_SOAK_MINUTES")
        .ok()
        .and_then(|m| m.parse().ok())
        .unwrap_or(3.0)
}

fn seed() -> u64 {
    std::env::var("RC_SOAK_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(1, |d| d.as_nanos() as u64)
        })
}

/// The soak. Multi-threaded: the proxies keep forwarding while the harness blocks on a
/// process.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn chaos_soak() {
    let minutes = minutes();
    let seed = seed();
    let start = Instant::now();
    println!(
        "chaos soak: {minutes} min of load and faults on {ENVS} environments ({} non-production, {PRODUCTION} production), seed {seed} (RC_SOAK_SEED={seed} replays the choices)",
        ENVS - PRODUCTION
    );

    // The soak's own Temporal server (on disk), NATS and proxies in front of PostgreSQL and
    // NATS, so each can be broken without touching other tests.
    let dir = tempfile::tempdir().expect("temp dir");
    let temporal = OwnTemporal::start(dir.path());
    temporal.wait_up().await;
    let nats = Nats::start();
    let nats_proxy = Proxy::start(&nats.addr()).await;
    let postgres = Proxy::start("127.0.0.1:5432").await;
    let mut stack = Stack::with(StackOptions {
        db: Some(Db::Postgres),
        postgres_via: Some(postgres.addr.clone()),
        temporal: Some(temporal.address()),
        env: vec![("NATS_URL".into(), format!("nats://{}", nats_proxy.addr))],
        ..Default::default()
    })
    .await;
    let first_worker = stack.worker.take();
    let first_api = stack.api.take();
    let first_url = stack.base_url.clone();
    let stack = Arc::new(stack);
    let (second_api, second_url) = tokio::task::block_in_place(|| stack.spawn_api());
    let urls: Urls = Arc::new(Mutex::new(vec![Some(first_url), Some(second_url)]));
    let operator = stack.operator("soak");
    let tenant = operator.tenant.clone();

    let mut load = Load {
        stack: stack.clone(),
        operator: operator.clone(),
        urls: urls.clone(),
        sandbox: Sandbox::new(&stack.data_path()),
        rng: Rng(seed ^ 0x5EED),
        pending: BTreeMap::new(),
        keys: 0,
        versions: 0,
        last_sweep: None,
        tally: Tally::default(),
    };
    load.setup().await;
    println!(
        "{} {ENVS} environments registered and declared; load and faults begin",
        at(start)
    );

    let chaos = Chaos {
        stack: stack.clone(),
        temporal,
        postgres,
        nats: nats_proxy,
        workers: vec![first_worker, Some(stack.spawn_worker())],
        apis: vec![first_api, Some(second_api)],
        urls: urls.clone(),
        rng: Rng(seed),
        start,
        injected: BTreeMap::new(),
        exited_on_their_own: Vec::new(),
    };
    let stop = Arc::new(AtomicBool::new(false));
    let faults = tokio::spawn(chaos.run(stop.clone()));
    let loading = tokio::spawn(load.run(stop.clone()));
    tokio::time::sleep(Duration::from_secs_f64(minutes * 60.0)).await;
    stop.store(true, Ordering::Relaxed);
    let mut chaos = faults.await.expect("fault loop");
    let mut load = loading.await.expect("load loop");
    println!(
        "{} faults over, everything healed; the quiet phase begins",
        at(start)
    );

    // Every run request answered (the same key again: at most one run per request).
    let deadline = Instant::now() + Duration::from_secs(120);
    while let Some(key) = load.pending.keys().next().cloned() {
        assert!(
            Instant::now() < deadline,
            "run requests still refused 120 s after the faults: {:?}",
            load.pending
        );
        if !load.send_run(&key).await {
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }
    let settled = settle(&stack, &tenant).await;
    println!("{} settled: {settled:?}; the last sweep", at(start));
    let before = sweeps_completed(&stack).await;
    crate::common::eventually(120, "the last sweep to be triggered", || async {
        trigger_sweep(&stack).then_some(())
    })
    .await;
    crate::common::eventually(300, "the last sweep to complete", || async {
        (sweeps_completed(&stack).await > before).then_some(())
    })
    .await;
    let settled_again = settle(&stack, &tenant).await;
    chaos.revive();
    println!(
        "{} settled after the last sweep: {settled_again:?}; checking",
        at(start)
    );

    let facts = Facts::gather(&stack, &tenant, Some(&nats)).await;
    let mut verdicts = facts.verdicts();
    verdicts.push(Verdict::of(
        "no product process exited on its own",
        "2 workers and 2 API processes up throughout, but for the kills".into(),
        chaos.exited_on_their_own.clone(),
    ));
    let report = report(minutes, seed, start, &chaos, &load.tally, &verdicts);
    println!("{report}");
    let broken: Vec<&str> = verdicts
        .iter()
        .filter(|v| !v.held)
        .map(|v| v.name)
        .collect();
    let kept = if broken.is_empty() {
        String::new()
    } else {
        keep_logs(&stack.data_path(), seed)
    };
    assert!(
        broken.is_empty(),
        "broken invariants: {broken:?} (seed {seed}){kept}"
    );
    // Passed: the soak's PostgreSQL database goes; a failed soak's stays for a look.
    drop(chaos);
    stack.drop_postgres_database().await;
}

/// Copies the product's logs (a panic's message among them) out of the stack's temporary
/// directory, which goes with the test; says where.
fn keep_logs(data: &std::path::Path, seed: u64) -> String {
    let kept = std::env::temp_dir().join(format!("rc-soak-{seed}"));
    if std::fs::create_dir_all(&kept).is_err() {
        return String::new();
    }
    let logs = std::fs::read_dir(data).into_iter().flatten().flatten();
    for entry in logs {
        let path = entry.path();
        if path.extension().and_then(|e| e.to_str()) == Some("log")
            && let Some(name) = path.file_name()
        {
            let _ = std::fs::copy(&path, kept.join(name));
        }
    }
    format!("; the product's logs are kept in {}", kept.display())
}

fn report(
    minutes: f64,
    seed: u64,
    start: Instant,
    chaos: &Chaos,
    tally: &Tally,
    verdicts: &[Verdict],
) -> String {
    let mut out = String::new();
    let total: usize = chaos.injected.values().map(Vec::len).sum();
    out.push_str(&format!(
        "\n==== chaos soak report: {minutes} min of faults, seed {seed}, {:.0} s in all ====\n",
        start.elapsed().as_secs_f64()
    ));
    out.push_str(&format!("faults injected: {total}\n"));
    for (fault, holds) in &chaos.injected {
        let longest = holds.iter().max().copied().unwrap_or_default();
        out.push_str(&format!(
            "  {:>3} × {} (held up to {:.1} s)\n",
            holds.len(),
            fault.name(),
            longest.as_secs_f64()
        ));
    }
    out.push_str("load:\n");
    for (what, n) in &tally.done {
        out.push_str(&format!("  {n:>5} {what}\n"));
    }
    out.push_str(
        "requests refused while faults were in (retried or given up, as a client would):\n",
    );
    for (why, n) in &tally.refused {
        out.push_str(&format!("  {n:>5} {why}\n"));
    }
    out.push_str("invariants:\n");
    for v in verdicts {
        out.push_str(&format!(
            "  {} {}: {}\n",
            if v.held { "HELD  " } else { "BROKEN" },
            v.name,
            v.detail
        ));
    }
    out
}
