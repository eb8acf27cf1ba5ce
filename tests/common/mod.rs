//! The test harness: a real Temporal dev server, the real `runtime-cloud` binary as separate
//! worker and API processes, a real read DB (SQLite file or a fresh PostgreSQL database), and
//! an HTTP client that drives the API the way an operator would.
//!
//! The Temporal dev server is started once by `scripts/test` and named in
//! `RC_TEST_TEMPORAL_ADDRESS`; every test gets its own task queue, data dir and database, so
//! tests never see each other's workflows or rows.

#![allow(dead_code)] // Each test module uses a different part of the harness.

pub mod dev;
pub mod git_http;
pub mod invariants;
pub mod kube_stand_in;
pub mod loopback;
pub mod nats;
pub mod oidc_provider_stand_in;
pub mod opa_stand_in;
pub mod pki;
pub mod ports;
pub mod postgres_tls;
pub mod prometheus_stand_in;
pub mod proxy;
pub mod run_control_stand_in;
pub mod s3;
pub mod secret_broker_stand_in;
pub mod temporal;
pub mod tls_proxy;

use reqwest::{Method, StatusCode};
use runtime_cloud_api::auth::JwtKeys;
use serde_json::{Value, json};
use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The HS256 key the spawned processes and the tests share.
const JWT_SECRET: &str = "test-secret-not-for-production";

/// Which read DB a test runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Db {
    Sqlite,
    Postgres,
}

/// The Temporal frontend the tests use.
pub fn temporal_address() -> String {
    std::env::var("RC_TEST_TEMPORAL_ADDRESS").unwrap_or_else(|_| {
        panic!("RC_TEST_TEMPORAL_ADDRESS is not set: run the tests with ./scripts/test, which starts a Temporal dev server")
    })
}

/// A spawned process, killed when the test ends (even when it fails).
pub struct Proc {
    pub child: Child,
    pub name: &'static str,
}

impl Proc {
    /// SIGKILL, as a crashed host would.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        self.kill();
    }
}

/// One test's product: migrated DB, a worker and an API on loopback.
pub struct Stack {
    pub data_dir: tempfile::TempDir,
    pub task_queue: String,
    pub database_url: String,
    pub base_url: String,
    pub worker: Option<Proc>,
    pub api: Option<Proc>,
    pub extra_env: Vec<(String, String)>,
    pub postgres_via: Option<String>,
    /// The Temporal frontend of the processes, the CLI and the client: the suite's shared
    /// server unless the test runs its own ([`temporal::OwnTemporal`]).
    pub temporal: String,
    /// Makes this test's tenant names unique on the shared Temporal server, where workflow
    /// ids such as `environment/{tenant}/{env}` would otherwise collide between tests.
    pub suffix: String,
    /// The processes run in `data_dir` with the default, relative data dir.
    default_data_dir: bool,
    http: reqwest::Client,
    keys: JwtKeys,
}

/// A failing test prints the end of its processes' logs: the data directory that holds them
/// is removed with the stack, and a failure seen only in CI is otherwise left unexplained.
impl Drop for Stack {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            return;
        }
        for name in ["worker", "api"] {
            eprintln!("{}", self.tail(name));
        }
        // A process that exited on its own is the likeliest reason nothing moved.
        for proc in [&mut self.worker, &mut self.api].into_iter().flatten() {
            if let Ok(Some(status)) = proc.child.try_wait() {
                eprintln!("--- the {} process had exited: {status} ---", proc.name);
            }
        }
    }
}
/// An operator's scopes: everything but capacity management.
pub const OPERATOR_SCOPES: &[&str] = &[
    "factory.provisioning.read",
    "factory.provisioning.apply",
    "factory.runtime.read",
    "factory.runtime.operate",
    "factory.meta.read",
    "factory.health.read",
    "factory.fleet.operate",
];

/// Options of a stack.
#[derive(Default)]
pub struct StackOptions {
    pub db: Option<Db>,
    /// Extra environment for the processes (`RuntimeCloud__Provisioning__…`).
    pub env: Vec<(String, String)>,
    /// The processes reach PostgreSQL through this address (a [`proxy::Proxy`]) instead of
    /// `127.0.0.1:5432`; the test's own queries go direct.
    pub postgres_via: Option<String>,
    /// A Temporal frontend of the test's own instead of the suite's shared server.
    pub temporal: Option<String>,
    /// The processes run in the stack's directory on the defaults a user gets there: the
    /// relative data dir `.data` and the SQLite read DB inside it (`Stack::data_path`).
    pub default_data_dir: bool,
    /// The tenants' suffix ([`Stack::tenant`]), when the test needs it before the processes
    /// start (a file they read names tenants); random otherwise.
    pub suffix: Option<String>,
    /// A read DB of the test's own (a PostgreSQL that takes only TLS), instead of `db`'s.
    pub database_url: Option<String>,
    /// Kubernetes observations raise posture findings, as they do on the product's default.
    /// Off otherwise: the other tests count findings, events and list calls exactly, and their
    /// plain fixtures (images by tag, no limits) break a posture rule or three each.
    pub posture_findings: bool,
}

impl StackOptions {
    /// The defaults plus one environment variable for the processes.
    pub fn with_env(key: &str, value: impl Into<String>) -> Self {
        StackOptions {
            env: vec![(key.into(), value.into())],
            ..Default::default()
        }
    }

    /// Runs waiting for a semaphore (a lock, capacity) ask again every 1.2 s and check that its
    /// holders still exist (`LockHolderCheckMinutes` 0.02), so a test sees a terminated holder
    /// dropped quickly.
    pub fn holder_checks_every_second() -> Self {
        StackOptions::with_env("RuntimeCloud__Provisioning__LockHolderCheckMinutes", "0.02")
    }

    /// Proposals are never auto-accepted: a test sees exactly what an observation raised.
    pub fn proposals_wait_for_a_decision() -> Self {
        StackOptions::with_env(
            "RuntimeCloud__Inventory__AutoAcceptNonDestructiveOutsideProduction",
            "false",
        )
    }
}

fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_runtime-cloud")
}

async fn fresh_postgres() -> String {
    use sea_orm::{ConnectionTrait, Database};
    let admin = std::env::var("RC_TEST_POSTGRES_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".into());
    let name = format!("rc_test_{}", uuid::Uuid::new_v4().simple());
    let db = Database::connect(&admin)
        .await
        .expect("PostgreSQL at RC_TEST_POSTGRES_URL");
    db.execute_unprepared(&format!("CREATE DATABASE {name}"))
        .await
        .expect("create test database");
    let base = admin
        .rsplit_once('/')
        .map(|(b, _)| b.to_owned())
        .unwrap_or(admin);
    format!("{base}/{name}")
}

impl Stack {
    /// A stack on SQLite.
    pub async fn start() -> Stack {
        Self::with(StackOptions::default()).await
    }

    /// A stack on `db`.
    pub async fn on(db: Db) -> Stack {
        Self::with(StackOptions {
            db: Some(db),
            ..Default::default()
        })
        .await
    }

    /// A stack with options.
    pub async fn with(opts: StackOptions) -> Stack {
        let data_dir = tempfile::tempdir().expect("temp dir");
        let database_url = match (opts.database_url, opts.db.unwrap_or(Db::Sqlite)) {
            (Some(url), _) => url,
            (None, db) => match db {
                Db::Sqlite if opts.default_data_dir => format!(
                    "sqlite://{}?mode=rwc",
                    data_dir.path().join(".data/runtime-cloud.db").display()
                ),
                Db::Sqlite => format!(
                    "sqlite://{}?mode=rwc",
                    data_dir.path().join("read.db").display()
                ),
                Db::Postgres => fresh_postgres().await,
            },
        };
        let mut stack = Stack {
            task_queue: format!("test-{}", uuid::Uuid::new_v4().simple()),
            database_url,
            base_url: String::new(),
            worker: None,
            api: None,
            extra_env: match opts.posture_findings {
                true => opts.env,
                false => [("RUNTIME_CLOUD_POSTURE_FINDINGS".into(), "false".into())]
                    .into_iter()
                    .chain(opts.env)
                    .collect(),
            },
            postgres_via: opts.postgres_via,
            temporal: opts.temporal.unwrap_or_else(temporal_address),
            suffix: opts
                .suffix
                .unwrap_or_else(|| uuid::Uuid::new_v4().simple().to_string()[..8].to_owned()),
            default_data_dir: opts.default_data_dir,
            http: reqwest::Client::new(),
            keys: JwtKeys::from_secret(JWT_SECRET.as_bytes()),
            data_dir,
        };
        // Its log goes to a file: a failing test's output then shows the worker's and the API's
        // last lines (printed on drop), not every migration.
        let status = stack
            .command("migrate")
            .stderr(stack.log_file("migrate"))
            .status()
            .expect("run migrate");
        assert!(
            status.success(),
            "migrate failed: {}",
            stack.tail("migrate")
        );
        stack.start_worker();
        stack.start_api();
        stack
    }

    fn command(&self, sub: &str) -> Command {
        let mut cmd = Command::new(bin());
        cmd.arg(sub);
        if self.default_data_dir {
            cmd.current_dir(self.data_dir.path())
                .env_remove("RUNTIME_CLOUD_DATA_DIR");
            if self.database_url.starts_with("sqlite:") {
                cmd.env_remove("DATABASE_URL");
            } else {
                cmd.env("DATABASE_URL", self.process_database_url());
            }
        } else {
            cmd.env("RUNTIME_CLOUD_DATA_DIR", self.data_dir.path())
                .env("DATABASE_URL", self.process_database_url());
        }
        cmd.env("TEMPORAL_ADDRESS", &self.temporal)
            .env("RUNTIME_CLOUD_TASK_QUEUE", &self.task_queue)
            .env("RUNTIME_CLOUD_JWT_SECRET", JWT_SECRET)
            .env("RUNTIME_CLOUD_LISTEN", "127.0.0.1:0")
            // Schedules tick only when a test triggers them, so a real tick never races a test.
            .env("RUNTIME_CLOUD_SCHEDULES_PAUSED", "true")
            .env("RUST_LOG", "info")
            .stdin(Stdio::null());
        for (k, v) in &self.extra_env {
            cmd.env(k, v);
        }
        cmd
    }

    /// The read DB URL the processes use.
    pub fn process_database_url(&self) -> String {
        match &self.postgres_via {
            Some(addr) => self.database_url.replacen("127.0.0.1:5432", addr, 1),
            None => self.database_url.clone(),
        }
    }

    /// The last 60 lines of process `name`'s log, headed by its path.
    fn tail(&self, name: &str) -> String {
        let path = self.data_dir.path().join(format!("{name}.log"));
        let log = std::fs::read_to_string(&path).unwrap_or_default();
        let lines: Vec<&str> = log.lines().collect();
        let tail = lines[lines.len().saturating_sub(60)..].join("\n");
        format!(
            "--- last lines of the {name} log ({}) ---\n{tail}",
            path.display()
        )
    }

    fn log_file(&self, name: &str) -> std::fs::File {
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.data_dir.path().join(format!("{name}.log")))
            .expect("log file")
    }

    /// Starts (or restarts) the worker process.
    pub fn start_worker(&mut self) {
        self.worker = Some(self.spawn_worker());
    }

    /// Kills the worker with SIGKILL.
    pub fn kill_worker(&mut self) {
        if let Some(mut w) = self.worker.take() {
            w.kill();
        }
    }

    /// Starts the API process and waits until it prints its address.
    pub fn start_api(&mut self) {
        let (proc, url) = self.spawn_api();
        self.base_url = url;
        self.api = Some(proc);
    }

    /// Another worker process on the same task queue, DB and data dir.
    pub fn spawn_worker(&self) -> Proc {
        let child = self
            .command("worker")
            .stdout(self.log_file("worker"))
            .stderr(self.log_file("worker"))
            .spawn()
            .expect("spawn worker");
        Proc {
            child,
            name: "worker",
        }
    }

    /// A worker of pool `pool_id` (`runtime-cloud worker --pool`), on the same DB and data dir.
    pub fn spawn_pool_worker(&self, pool_id: &str) -> Proc {
        let name = format!("pool-{pool_id}");
        let child = self
            .command("worker")
            .args(["--pool", pool_id])
            .stdout(self.log_file(&name))
            .stderr(self.log_file(&name))
            .spawn()
            .expect("spawn pool worker");
        Proc {
            child,
            name: "pool worker",
        }
    }

    /// Another API process; returns it and its base URL.
    pub fn spawn_api(&self) -> (Proc, String) {
        let mut child = self
            .command("api")
            .stdout(Stdio::piped())
            .stderr(self.log_file("api"))
            .spawn()
            .expect("spawn api");
        let stdout = child.stdout.take().expect("api stdout");
        let mut lines = BufReader::new(stdout).lines();
        let line = lines.next().and_then(Result::ok).unwrap_or_default();
        let url = line
            .split_whitespace()
            .find(|w| w.starts_with("http://"))
            .unwrap_or_else(|| {
                panic!(
                    "api did not print its address: {line:?}; it logged:\n{}",
                    std::fs::read_to_string(self.data_dir.path().join("api.log"))
                        .unwrap_or_default()
                )
            })
            .to_owned();
        let mut log = self.log_file("api");
        std::thread::spawn(move || {
            for line in lines.map_while(Result::ok) {
                use std::io::Write;
                let _ = writeln!(log, "{line}");
            }
        });
        (Proc { child, name: "api" }, url)
    }

    /// The last `n` bytes the processes logged.
    pub fn log_tail(&self, n: usize) -> String {
        let logs = self.logs();
        let start = logs.len().saturating_sub(n);
        logs.get(start..).unwrap_or(&logs).to_owned()
    }

    /// Everything the processes logged.
    pub fn logs(&self) -> String {
        ["worker", "api"]
            .iter()
            .map(|n| {
                std::fs::read_to_string(self.data_dir.path().join(format!("{n}.log")))
                    .unwrap_or_default()
            })
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// This test's name for tenant `name`.
    pub fn tenant(&self, name: &str) -> String {
        format!("{name}-{}", self.suffix)
    }

    /// The sandbox document of an environment.
    pub fn sandbox(&self, tenant: &str, env: &str) -> Value {
        let path = self
            .data_path()
            .join("sandbox")
            .join(self.tenant(tenant))
            .join(format!("{env}.json"));
        std::fs::read(&path)
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok())
            .unwrap_or(Value::Null)
    }

    /// Runs `runtime-cloud sandbox …` for an environment.
    pub fn sandbox_cli(&self, tenant: &str, env: &str, args: &[&str]) {
        // The tests ask for each observation they count (`POST …/observe`, the sweep):
        // `sandbox_change_observed` is the command as a user gets it.
        let status = self
            .command("sandbox")
            .env("RUNTIME_CLOUD_SANDBOX_OBSERVE_CHANGES", "false")
            .args(["--tenant", &self.tenant(tenant), "--env", env])
            .args(args)
            .status()
            .expect("run sandbox cli");
        assert!(status.success(), "sandbox {args:?} failed");
    }

    /// `runtime-cloud sandbox` as a user gets it: a change to what runs is observed at once.
    pub fn sandbox_change_observed(&self, tenant: &str, env: &str, args: &[&str]) {
        let status = self
            .command("sandbox")
            .args(["--tenant", &self.tenant(tenant), "--env", env])
            .args(args)
            .status()
            .expect("run sandbox cli");
        assert!(status.success(), "sandbox {args:?} failed");
    }

    /// The processes' data dir.
    pub fn data_path(&self) -> PathBuf {
        match self.default_data_dir {
            true => self.data_dir.path().join(".data"),
            false => self.data_dir.path().to_owned(),
        }
    }

    /// A token for `tenant` with `scopes`.
    pub fn token(&self, tenant: &str, scopes: &[&str]) -> String {
        let scopes: Vec<String> = scopes.iter().map(|s| s.to_string()).collect();
        self.keys
            .mint(
                "tester",
                &self.tenant(tenant),
                &scopes,
                &["Operator".into()],
                3600,
            )
            .expect("mint token")
    }

    /// A client acting as an operator of `tenant` with [`OPERATOR_SCOPES`].
    pub fn operator(&self, tenant: &str) -> Api {
        self.client(tenant, OPERATOR_SCOPES)
    }

    /// A client acting in `tenant` with `scopes` and no role.
    pub fn without_roles(&self, tenant: &str, scopes: &[&str]) -> Api {
        self.with_roles("intern", tenant, scopes, &[])
    }

    /// A client acting as the PlatformAdmin `admin` of `tenant`, with the capacity scopes.
    pub fn platform_admin(&self, tenant: &str) -> Api {
        self.with_roles(
            "admin",
            tenant,
            &["factory.capacity.read", "factory.capacity.manage"],
            &["PlatformAdmin"],
        )
    }

    /// `GET /metrics` as a scraper does on the API's listener: with a `PlatformAdmin`'s token
    /// (the metrics name every tenant).
    pub async fn scrape(&self) -> String {
        let token = self
            .keys
            .mint(
                "prometheus",
                "platform",
                &["factory.meta.read".to_owned()],
                &["PlatformAdmin".to_owned()],
                3600,
            )
            .expect("mint token");
        let res = self
            .http
            .get(format!("{}/metrics", self.base_url))
            .bearer_auth(token)
            .send()
            .await
            .expect("scrape");
        assert_eq!(res.status(), 200, "GET /metrics");
        res.text().await.expect("metrics text")
    }

    /// A client acting as `subject` in `tenant` with `scopes` and `roles`.
    pub fn with_roles(&self, subject: &str, tenant: &str, scopes: &[&str], roles: &[&str]) -> Api {
        let scopes: Vec<String> = scopes.iter().map(|s| s.to_string()).collect();
        let roles: Vec<String> = roles.iter().map(|s| s.to_string()).collect();
        let token = self
            .keys
            .mint(subject, &self.tenant(tenant), &scopes, &roles, 3600)
            .expect("mint token");
        Api {
            base: self.base_url.clone(),
            http: self.http.clone(),
            token: Some(token),
            tenant: self.tenant(tenant),
        }
    }

    /// A client acting in `tenant` with `scopes`.
    pub fn client(&self, tenant: &str, scopes: &[&str]) -> Api {
        Api {
            base: self.base_url.clone(),
            http: self.http.clone(),
            token: Some(self.token(tenant, scopes)),
            tenant: self.tenant(tenant),
        }
    }

    /// A client without a token.
    pub fn anonymous(&self) -> Api {
        Api {
            base: self.base_url.clone(),
            http: self.http.clone(),
            token: None,
            tenant: String::new(),
        }
    }

    /// The bytes of the SQLite read DB file and its write-ahead log (with WAL the newest pages
    /// may still be in the log), for tests that check a value reached no table.
    pub fn read_db_bytes(&self) -> Vec<u8> {
        let file = self
            .database_url
            .trim_start_matches("sqlite://")
            .split('?')
            .next()
            .unwrap_or_default();
        let mut bytes = std::fs::read(file).expect("read db");
        bytes.extend(std::fs::read(format!("{file}-wal")).unwrap_or_default());
        bytes
    }

    /// Every payload of a workflow's history, decoded and joined (`temporal workflow show`).
    pub fn history_payloads(&self, workflow_id: &str) -> String {
        let out = self.temporal_ok(&[
            "workflow",
            "show",
            "--workflow-id",
            workflow_id,
            "-o",
            "json",
        ]);
        decoded_payloads(&serde_json::from_slice(&out.stdout).expect("history JSON"))
    }

    /// Reads the read DB directly, connected as the product connects.
    pub async fn db(&self) -> sea_orm::DatabaseConnection {
        runtime_cloud_store::connect::open(&self.database_url)
            .await
            .expect("connect read DB")
    }

    /// Drops the test's PostgreSQL database (its processes must be gone), for a test whose
    /// database is large enough to be worth removing before the suite's cleanup does.
    pub async fn drop_postgres_database(&self) {
        use sea_orm::{ConnectionTrait, Database};
        let Some((base, name)) = self.database_url.rsplit_once('/') else {
            return;
        };
        if !name.starts_with("rc_test_") {
            return;
        }
        let admin = Database::connect(format!("{base}/postgres"))
            .await
            .expect("PostgreSQL");
        admin
            .execute_unprepared(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
            .await
            .expect("drop the test database");
    }

    /// Counts rows of a table.
    pub async fn count(&self, table: &str) -> i64 {
        use sea_orm::{ConnectionTrait, Statement};
        let db = self.db().await;
        let row = db
            .query_one(Statement::from_string(
                db.get_database_backend(),
                format!("SELECT COUNT(*) AS n FROM {table}"),
            ))
            .await
            .expect("count")
            .expect("one row");
        row.try_get::<i64>("", "n").expect("n")
    }

    /// Counts rows of a table matching a SQL condition.
    pub async fn count_where(&self, table: &str, condition: &str) -> i64 {
        self.count(&format!("{table} WHERE {condition}")).await
    }

    /// Runs a statement on the read DB.
    pub async fn execute(&self, sql: &str) {
        use sea_orm::ConnectionTrait;
        self.db()
            .await
            .execute_unprepared(sql)
            .await
            .expect("execute");
    }

    /// The outbox events of a type, oldest first.
    pub async fn events(&self, event_type: &str) -> Vec<Value> {
        use runtime_cloud_store::entities::outbox_events as ev;
        use sea_orm::{ColumnTrait, EntityTrait, QueryFilter, QueryOrder};
        ev::Entity::find()
            .filter(ev::Column::EventType.eq(event_type))
            .order_by_asc(ev::Column::Seq)
            .all(&self.db().await)
            .await
            .expect("outbox")
            .into_iter()
            .map(|e| json!({ "topic": e.topic, "eventId": e.event_id, "payload": e.payload }))
            .collect()
    }

    /// Approves a run the way an operator does without the API: `temporal workflow signal`
    /// with the `approval` payload for the plan `run` shows.
    pub fn approve_with_cli(
        &self,
        run: &Value,
        approver: &str,
        reason: &str,
        approval_id: Option<&str>,
    ) {
        let id = run["provisioningRunId"].as_str().expect("run id");
        let payload = json!({ "decision": "approve", "approver": approver, "reason": reason,
                              "inputsHash": run["planReceipt"]["inputsHash"],
                              "approvalId": approval_id })
        .to_string();
        self.temporal_ok(&[
            "workflow",
            "signal",
            "--workflow-id",
            &format!("provisioning-run/{id}"),
            "--name",
            "approval",
            "--input",
            &payload,
        ]);
    }

    /// A production run approved with `temporal workflow signal` before any worker has seen
    /// its plan: a rejected first run shows the inputs hash the next plan of the same target
    /// will have, then the second run is requested and approved while no worker runs, and a
    /// worker is started. Returns the operator, the second run's id and the approved hash.
    pub async fn run_approved_before_its_plan(&mut self) -> (Api, String, Value) {
        let api = self.operator("acme");
        api.environment("prod", "production").await;
        api.declare("prod", &[("api", "1.0.0", 2)]).await;
        let first = api.plan_run("prod", "baseline").await;
        let hash =
            api.wait_state(&first, "AwaitingApproval").await["planReceipt"]["inputsHash"].clone();
        api.decide(&first, "reject").await.expect(202);
        api.wait_state(&first, "Rejected").await;

        let recorded = api.record_approval("prod", hash.as_str()).await;
        self.kill_worker();
        let id = api.plan_run("prod", "baseline").await;
        let early = json!({ "provisioningRunId": id, "planReceipt": { "inputsHash": hash } });
        let approval = recorded["approvalId"].as_str();
        self.approve_with_cli(
            &early,
            "ops-lead",
            "approved from the change board",
            approval,
        );
        self.start_worker();
        (api, id, hash)
    }

    /// A run whose environment lock already names it as the holder before it has taken any
    /// step: what a take whose answer never came back leaves behind (the local activity wrote
    /// the slot, the worker died before the answer was recorded). The slot is written while no
    /// worker runs, then the worker starts. Returns the caller, the run id and the lock's id.
    pub async fn run_whose_lock_take_answer_was_lost(&mut self) -> (Api, String, String) {
        let api = self.operator("acme");
        api.environment("dev", "non-production").await;
        api.declare("dev", &[("api", "1.0.0", 1)]).await;
        self.kill_worker();
        let id = api.plan_run("dev", "baseline").await;
        let lock = format!("environment/{}/dev", api.tenant);
        let holder = format!("provisioning-run/{id}");
        let ask = runtime_cloud_store::semaphores::Ask {
            semaphore_id: &lock,
            tenant_id: &api.tenant,
            holder_id: &holder,
            slots: 1,
            leases: false,
        };
        let taken = runtime_cloud_store::semaphores::take(&self.db().await, ask)
            .await
            .expect("take the lock");
        assert!(taken.holds, "a free lock");
        self.start_worker();
        (api, id, lock)
    }

    /// Triggers this stack's schedule `{task_queue}/{name}` now, as
    /// `temporal schedule trigger` does.
    pub fn trigger_schedule(&self, name: &str) {
        let id = format!("{}/{name}", self.task_queue);
        self.temporal_ok(&["schedule", "trigger", "--schedule-id", &id]);
    }

    /// Runs the Temporal CLI and fails the test, with its stderr, when the command fails.
    pub fn temporal_ok(&self, args: &[&str]) -> std::process::Output {
        let out = self.temporal_cli(args);
        assert!(
            out.status.success(),
            "temporal {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr)
        );
        out
    }

    /// Runs the Temporal CLI against the test server.
    pub fn temporal_cli(&self, args: &[&str]) -> std::process::Output {
        Command::new(std::env::var("TEMPORAL_CLI").unwrap_or_else(|_| "temporal".into()))
            .args(args)
            .args(["--address", &self.temporal])
            .output()
            .expect("run temporal CLI")
    }

    /// `temporal workflow describe` of `workflow_id`, if it exists.
    pub fn describe(&self, workflow_id: &str) -> Option<Value> {
        let out = self.temporal_cli(&[
            "workflow",
            "describe",
            "--workflow-id",
            workflow_id,
            "-o",
            "json",
        ]);
        if !out.status.success() {
            return None;
        }
        serde_json::from_slice(&out.stdout).ok()
    }

    /// [`Stack::describe`], once the workflow exists: read rows are written before the
    /// workflows they hand work to are started.
    pub async fn described_workflow(&self, workflow_id: &str) -> Value {
        eventually(60, &format!("workflow {workflow_id} to exist"), || {
            let described = self.describe(workflow_id);
            async move { described }
        })
        .await
    }
}

/// An HTTP client of the API acting as one caller.
#[derive(Clone)]
pub struct Api {
    base: String,
    http: reqwest::Client,
    token: Option<String>,
    pub tenant: String,
}

/// A response: status, headers and JSON body (Null when empty), and the body as sent.
#[derive(Debug)]
pub struct Res {
    pub status: StatusCode,
    pub content_type: String,
    pub headers: reqwest::header::HeaderMap,
    pub body: Value,
    pub bytes: Vec<u8>,
}

impl Res {
    /// Asserts the status and returns the body.
    #[track_caller]
    pub fn expect(self, status: u16) -> Value {
        assert_eq!(
            self.status.as_u16(),
            status,
            "unexpected status; body: {}",
            self.body
        );
        self.body
    }

    /// Asserts an RFC 7807 problem with this status.
    #[track_caller]
    pub fn expect_problem(self, status: u16) -> Value {
        assert_eq!(
            self.status.as_u16(),
            status,
            "unexpected status; body: {}",
            self.body
        );
        assert_eq!(
            self.content_type, "application/problem+json",
            "not problem JSON: {}",
            self.body
        );
        assert_eq!(self.body["status"], status, "problem status: {}", self.body);
        assert!(
            self.body["title"].is_string() && self.body["detail"].is_string(),
            "problem fields: {}",
            self.body
        );
        self.body
    }
}

impl Api {
    /// A client of the API at `base` with a ready-made token.
    pub fn with_token(base: &str, token: &str) -> Api {
        Api {
            base: base.to_owned(),
            http: reqwest::Client::new(),
            token: Some(token.to_owned()),
            tenant: String::new(),
        }
    }

    /// The same caller on another API process (at `base`).
    pub fn at(&self, base: &str) -> Api {
        Api {
            base: base.to_owned(),
            ..self.clone()
        }
    }

    pub async fn send(
        &self,
        method: Method,
        path: &str,
        body: Option<Value>,
        headers: &[(&str, &str)],
    ) -> Res {
        self.try_send(method, path, body, headers)
            .await
            .expect("request")
    }

    /// [`Api::send`], answering a connection that failed (the API process is down) as an
    /// error instead of failing the test.
    pub async fn try_send(
        &self,
        method: Method,
        path: &str,
        body: Option<Value>,
        headers: &[(&str, &str)],
    ) -> Result<Res, reqwest::Error> {
        let mut req = self.http.request(method, format!("{}{}", self.base, path));
        if let Some(t) = &self.token {
            req = req.bearer_auth(t);
        }
        for (k, v) in headers {
            req = req.header(*k, *v);
        }
        if let Some(b) = body {
            req = req.json(&b);
        }
        Self::try_finish(req).await
    }

    /// Sends a raw body with a content type.
    pub async fn send_raw(
        &self,
        method: Method,
        path: &str,
        body: Vec<u8>,
        content_type: &str,
    ) -> Res {
        let mut req = self
            .http
            .request(method, format!("{}{}", self.base, path))
            .header("content-type", content_type)
            .body(body);
        if let Some(t) = &self.token {
            req = req.bearer_auth(t);
        }
        Self::try_finish(req).await.expect("request")
    }

    async fn try_finish(req: reqwest::RequestBuilder) -> Result<Res, reqwest::Error> {
        let res = req.send().await?;
        let status = res.status();
        let headers = res.headers().clone();
        let content_type = res
            .headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_owned();
        let bytes = res.bytes().await?;
        let body = if bytes.is_empty() {
            Value::Null
        } else {
            serde_json::from_slice(&bytes)
                .unwrap_or(Value::String(String::from_utf8_lossy(&bytes).into()))
        };
        Ok(Res {
            status,
            content_type,
            headers,
            body,
            bytes: bytes.to_vec(),
        })
    }

    pub async fn get(&self, path: &str) -> Res {
        self.send(Method::GET, path, None, &[]).await
    }

    pub async fn post(&self, path: &str, body: Value) -> Res {
        self.send(Method::POST, path, Some(body), &[]).await
    }

    pub async fn put(&self, path: &str, body: Value) -> Res {
        self.send(Method::PUT, path, Some(body), &[]).await
    }

    /// Registers an environment.
    pub async fn environment(&self, id: &str, class: &str) -> Value {
        self.post(
            "/factory/environments",
            json!({ "environmentId": id, "projectId": "shop", "class": class }),
        )
        .await
        .expect(201)
    }

    /// Declares a specification with `workloads` (name, version, replicas).
    pub async fn declare(&self, env: &str, workloads: &[(&str, &str, u32)]) -> Value {
        let workloads: Vec<Value> = workloads
            .iter()
            .map(|(name, version, replicas)| {
                json!({ "name": name, "kind": "deployment", "version": version, "replicas": replicas,
                        "configRefs": { "settings": format!("config://shop/{name}") },
                        "secretRefs": { "db": format!("secretbroker://shop/{name}/db") } })
            })
            .collect();
        self.post(
            "/factory/provisioning/specifications",
            json!({ "environmentId": env, "kind": "environment", "programRef": "git://infra//shop",
                    "programVersion": "a1b2c3d4e5", "configRefs": {}, "secretRefs": {}, "workloads": workloads }),
        )
        .await
        .expect(201)
    }

    /// Requests a run; returns its id.
    pub async fn plan_run(&self, env: &str, kind: &str) -> String {
        let run = self
            .post(
                "/factory/provisioning/runs",
                json!({ "environmentId": env, "kind": kind }),
            )
            .await
            .expect(202);
        run["provisioningRunId"]
            .as_str()
            .expect("run id")
            .to_owned()
    }

    /// Reads a run.
    pub async fn run(&self, id: &str) -> Value {
        self.get(&format!("/factory/provisioning/runs/{id}"))
            .await
            .expect(200)
    }

    /// Waits until the run reaches `state` (and fails fast if it ends in another).
    pub async fn wait_state(&self, id: &str, state: &str) -> Value {
        // Generous: four tests share two cores, each with its own worker and API, and a test
        // that restarts its worker waits for the server to hand the task on.
        let deadline = Instant::now() + Duration::from_secs(120);
        loop {
            let run = self.run(id).await;
            let now = run["state"].as_str().unwrap_or_default().to_owned();
            if now == state {
                return run;
            }
            let terminal = ["Applied", "Failed", "Rejected", "Cancelled"].contains(&now.as_str());
            assert!(!terminal, "run {id} ended {now}, expected {state}: {run}");
            assert!(
                Instant::now() < deadline,
                "run {id} did not reach {state} in 120 s: {run}"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Lists runs with `query` and checks that every listed run is exactly what its GET shows
    /// (the list and GET are built differently on SQLite); returns the page. A run in flight
    /// can move on between the list and its GET: the two are read again until they agree, for
    /// up to 10 s.
    pub async fn list_runs(&self, query: &str) -> Value {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let page = self
                .get(&format!("/factory/provisioning/runs{query}"))
                .await
                .expect(200);
            let mut differs = None;
            for item in page["items"].as_array().expect("items") {
                let id = item["provisioningRunId"].as_str().expect("run id");
                let got = self.run(id).await;
                if item != &got {
                    differs = Some((item.clone(), got));
                    break;
                }
            }
            let Some((listed, got)) = differs else {
                return page;
            };
            if Instant::now() >= deadline {
                assert_eq!(listed, got, "listed with {query}");
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Asks for an observation now and waits until it has been recorded.
    pub async fn observe(&self, stack: &Stack, env: &str) -> Value {
        let started = self
            .post(&format!("/factory/environments/{env}/observe"), json!({}))
            .await
            .expect(202);
        let id = started["workflowId"]
            .as_str()
            .expect("workflow id")
            .to_owned();
        let client = stack.temporal_client().await;
        let handle = client.get_workflow_handle::<runtime_cloud_workflows::ObserveEnvironment>(id);
        let outcome = tokio::time::timeout(
            Duration::from_secs(60),
            handle.get_result(Default::default()),
        )
        .await
        .unwrap_or_else(|_| {
            panic!(
                "the observation did not finish in 60 s; logs:\n{}",
                stack.log_tail(4000)
            )
        })
        .expect("observation result");
        serde_json::to_value(outcome).expect("outcome JSON")
    }

    /// Registers a non-production environment with `workloads`, applies it with a baseline
    /// run and waits for the observation after it; returns the run's id.
    pub async fn applied(
        &self,
        stack: &Stack,
        env: &str,
        workloads: &[(&str, &str, u32)],
    ) -> String {
        self.environment(env, "non-production").await;
        self.declare(env, workloads).await;
        let run = self.plan_run(env, "baseline").await;
        self.wait_state(&run, "Applied").await;
        self.wait_observed_after(stack, &run).await;
        run
    }

    /// Waits until the observation a run makes after its apply (or failure) has finished, so
    /// it cannot race what the test does next: the run's workflow ends after it.
    pub async fn wait_observed_after(&self, stack: &Stack, run_id: &str) {
        let client = stack.temporal_client().await;
        let handle = client.get_workflow_handle::<runtime_cloud_workflows::ProvisioningRun>(
            runtime_cloud_workflows::ids::run_workflow_id(run_id),
        );
        eventually(30, "the observation after the run", || {
            let handle = &handle;
            async move {
                let result = handle.get_result(Default::default());
                let done = tokio::time::timeout(Duration::from_secs(5), result).await;
                done.ok()?.ok().map(|_| ())
            }
        })
        .await;
    }

    /// The environment's findings (`open`, `resolved` or all).
    pub async fn drift(&self, env: &str, state: Option<&str>) -> Vec<Value> {
        let q = state.map(|s| format!("?state={s}")).unwrap_or_default();
        let body = self
            .get(&format!("/factory/environments/{env}/drift{q}"))
            .await
            .expect(200);
        body["items"].as_array().cloned().unwrap_or_default()
    }

    /// The environment's proposals, newest first.
    pub async fn proposals(&self, env: &str) -> Vec<Value> {
        let body = self
            .get(&format!(
                "/factory/reconciliation/proposals?environmentId={env}"
            ))
            .await
            .expect(200);
        body["items"].as_array().cloned().unwrap_or_default()
    }

    /// Waits until the proposal reaches `state`.
    pub async fn wait_proposal(&self, env: &str, proposal_id: &str, state: &str) -> Value {
        eventually(
            60,
            &format!("proposal {proposal_id} to be {state}"),
            || async move {
                self.proposals(env)
                    .await
                    .into_iter()
                    .find(|p| p["proposalId"] == proposal_id && p["state"] == state)
            },
        )
        .await
    }

    /// Registers the production environment `env` with one workload `api` 1.0.0 of
    /// `replicas`, plans a baseline run and waits until it awaits approval; returns the run's
    /// id and view.
    pub async fn awaiting_approval(&self, env: &str, replicas: u32) -> (String, Value) {
        self.environment(env, "production").await;
        self.declare(env, &[("api", "1.0.0", replicas)]).await;
        let id = self.plan_run(env, "baseline").await;
        let run = self.wait_state(&id, "AwaitingApproval").await;
        (id, run)
    }

    /// Records an approval of `env` by this caller (`POST /factory/approvals`), for the plan
    /// with `inputs_hash` when given; returns it.
    pub async fn record_approval(&self, env: &str, inputs_hash: Option<&str>) -> Value {
        self.post(
            "/factory/approvals",
            json!({ "environmentId": env, "decision": "approve", "reason": "CAB-11",
                    "inputsHash": inputs_hash }),
        )
        .await
        .expect(201)
    }

    /// The id of a new approval of `env` for any plan, for a run request to name.
    pub async fn approval_id(&self, env: &str) -> String {
        text(&self.record_approval(env, None).await["approvalId"])
    }

    /// Approves (or rejects) the run's recorded plan.
    pub async fn decide(&self, id: &str, decision: &str) -> Res {
        let run = self.run(id).await;
        let hash = run["planReceipt"]["inputsHash"]
            .as_str()
            .expect("plan hash")
            .to_owned();
        self.post(
            &format!("/factory/provisioning/runs/{id}/approval"),
            json!({ "decision": decision, "reason": "change ticket CAB-7", "inputsHash": hash }),
        )
        .await
    }
}

/// A JSON string field as a `String` (empty when absent), for ids read from responses.
pub fn text(v: &Value) -> String {
    v.as_str().unwrap_or_default().to_owned()
}

/// Polls `check` until it returns Some, for at most `secs`.
/// A production run of tenant `acme`: an environment registered and declared, the run planned,
/// approved by an Operator and applied.
pub async fn production_run(stack: &Stack) {
    let api = stack.operator("acme");
    api.environment("prod", "production").await;
    api.declare("prod", &[("api", "1.0.0", 2)]).await;
    let run = api.plan_run("prod", "baseline").await;
    api.wait_state(&run, "AwaitingApproval").await;
    api.decide(&run, "approve").await.expect(202);
    let applied = api.wait_state(&run, "Applied").await;
    assert_eq!(applied["applyReceipt"]["result"], "succeeded", "{applied}");
}

pub async fn eventually<T, F, Fut>(secs: u64, what: &str, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = Instant::now() + Duration::from_secs(secs);
    loop {
        if let Some(v) = check().await {
            return v;
        }
        assert!(
            Instant::now() < deadline,
            "timed out after {secs} s waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The data dir path of a stack, for tests that read files.
pub fn path_of(stack: &Stack, rel: &str) -> PathBuf {
    stack.data_path().join(rel)
}

impl Stack {
    /// A Temporal client on the test server.
    pub async fn temporal_client(&self) -> temporalio_client::Client {
        runtime_cloud_temporal::connect(&self.temporal, "default")
            .await
            .expect("connect to Temporal")
    }

    /// The id of the first workflow on this stack's task queue of `workflow_type` whose
    /// visibility record matches `filter` (`ExecutionStatus='Completed'`, or empty for any).
    pub async fn first_workflow(&self, workflow_type: &str, filter: &str) -> Option<String> {
        use futures::StreamExt;
        let mut query = format!(
            "TaskQueue='{}' AND WorkflowType='{workflow_type}'",
            self.task_queue
        );
        if !filter.is_empty() {
            query = format!("{query} AND {filter}");
        }
        let client = self.temporal_client().await;
        let mut list = client.list_workflows(query.as_str(), Default::default());
        let first = list.next().await?.ok()?;
        Some(first.id().to_owned())
    }
}

/// Every payload in a history (`data` fields are base64), decoded and joined.
pub fn decoded_payloads(v: &serde_json::Value) -> String {
    use base64::Engine;
    match v {
        serde_json::Value::Object(o) => o
            .iter()
            .map(|(k, v)| match (k.as_str(), v.as_str()) {
                ("data", Some(b64)) => base64::engine::general_purpose::STANDARD
                    .decode(b64)
                    .map(|b| String::from_utf8_lossy(&b).into_owned())
                    .unwrap_or_default(),
                _ => decoded_payloads(v),
            })
            .collect::<Vec<_>>()
            .join("\n"),
        serde_json::Value::Array(a) => a
            .iter()
            .map(decoded_payloads)
            .collect::<Vec<_>>()
            .join("\n"),
        serde_json::Value::String(s) => s.clone(),
        _ => String::new(),
    }
}
