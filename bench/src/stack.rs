//! The product under test: the real `runtime-cloud` binary as separate `migrate`, `worker` and
//! `api` processes (as production runs it), on a fresh read DB, against the Temporal dev server
//! that `scripts/bench` started. The same shape as the end-to-end harness in `tests/common`.
//!
//! Read from the environment:
//! - `RC_BENCH_TEMPORAL_ADDRESS` (required): the Temporal frontend.
//! - `RC_BENCH_BIN`: the `runtime-cloud` binary (default: next to this executable).
//! - `RC_BENCH_POSTGRES_URL`: an admin URL; each stack creates and drops its own database
//!   (default `postgres://postgres@127.0.0.1:5432/test`).
//! - `RC_BENCH_WORK`: where data dirs go (default: the system temp dir).

use anyhow::{Context, bail};
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// The HS256 key the spawned processes and the benchmarks share.
pub const JWT_SECRET: &str = "bench-secret-not-for-production";

/// Every scope, for the benchmark's operator token.
pub const SCOPES: &[&str] = &[
    "factory.provisioning.read",
    "factory.provisioning.apply",
    "factory.runtime.read",
    "factory.runtime.operate",
    "factory.meta.read",
    "factory.fleet.operate",
];

/// Which read DB a stack runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Db {
    Sqlite,
    Postgres,
}

impl Db {
    pub fn name(self) -> &'static str {
        match self {
            Db::Sqlite => "SQLite",
            Db::Postgres => "PostgreSQL",
        }
    }
}

/// The Temporal frontend the benchmarks use.
pub fn temporal_address() -> anyhow::Result<String> {
    std::env::var("RC_BENCH_TEMPORAL_ADDRESS")
        .context("RC_BENCH_TEMPORAL_ADDRESS is not set: run the benchmarks with scripts/bench")
}

/// The `runtime-cloud` binary.
pub fn product_bin() -> PathBuf {
    if let Ok(p) = std::env::var("RC_BENCH_BIN") {
        return p.into();
    }
    std::env::current_exe()
        .ok()
        .and_then(|e| e.parent().map(|d| d.join("runtime-cloud")))
        .unwrap_or_else(|| "runtime-cloud".into())
}

/// A directory for one stack's files.
pub fn work_dir() -> anyhow::Result<tempfile::TempDir> {
    let mut builder = tempfile::Builder::new();
    builder.prefix("rc-bench-");
    Ok(match std::env::var("RC_BENCH_WORK") {
        Ok(dir) => builder.tempdir_in(dir)?,
        Err(_) => builder.tempdir()?,
    })
}

/// A short random suffix, so ids never collide on the shared Temporal server.
pub fn suffix() -> String {
    uuid::Uuid::new_v4().simple().to_string()[..8].to_owned()
}

/// A child process, killed when dropped.
pub struct Proc {
    pub child: Child,
}

impl Proc {
    pub fn pid(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Appends a process's output to `{dir}/{name}.log`.
pub fn log_file(dir: &Path, name: &str) -> anyhow::Result<std::fs::File> {
    Ok(std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(dir.join(format!("{name}.log")))?)
}

/// One product deployment: migrated read DB, a worker and an API process, one tenant.
pub struct Stack {
    pub dir: tempfile::TempDir,
    pub db_kind: Db,
    pub task_queue: String,
    pub database_url: String,
    pub base_url: String,
    /// The tenant this stack's benchmark acts in.
    pub tenant: String,
    /// An operator token of that tenant, minted by `runtime-cloud token`.
    pub token: String,
    pub worker: Option<Proc>,
    pub api: Option<Proc>,
    /// The PostgreSQL database to drop at the end, with the admin URL to drop it from.
    postgres: Option<(String, String)>,
    /// More environment for the product's processes.
    env: Vec<(String, String)>,
}

impl Stack {
    /// Migrates a fresh read DB and starts the worker and the API.
    pub async fn start(db_kind: Db) -> anyhow::Result<Stack> {
        Self::start_with(db_kind, Vec::new()).await
    }

    /// [`Stack::start`] with more environment for the processes.
    pub async fn start_with(db_kind: Db, env: Vec<(String, String)>) -> anyhow::Result<Stack> {
        let dir = work_dir()?;
        let (database_url, postgres) = fresh_db(db_kind, dir.path()).await?;
        let sfx = suffix();
        let mut stack = Stack {
            dir,
            db_kind,
            task_queue: format!("bench-{sfx}"),
            database_url,
            base_url: String::new(),
            tenant: format!("bench-{sfx}"),
            token: String::new(),
            worker: None,
            api: None,
            postgres,
            env,
        };
        let log = log_file(stack.dir.path(), "migrate")?;
        let status = stack
            .command("migrate")?
            .stdout(log.try_clone()?)
            .stderr(log)
            .status()
            .context("run migrate")?;
        if !status.success() {
            bail!("runtime-cloud migrate failed");
        }
        stack.token = stack.mint_token()?;
        stack.start_worker()?;
        stack.start_api()?;
        Ok(stack)
    }

    /// `runtime-cloud SUB` with this stack's configuration.
    pub fn command(&self, sub: &str) -> anyhow::Result<Command> {
        let mut cmd = Command::new(product_bin());
        cmd.arg(sub)
            .env("RUNTIME_CLOUD_DATA_DIR", self.dir.path())
            .env("DATABASE_URL", &self.database_url)
            .env("TEMPORAL_ADDRESS", temporal_address()?)
            .env("RUNTIME_CLOUD_TASK_QUEUE", &self.task_queue)
            .env("RUNTIME_CLOUD_JWT_SECRET", JWT_SECRET)
            .env("RUNTIME_CLOUD_LISTEN", "127.0.0.1:0")
            // The sweep runs when a benchmark triggers it, never on its own clock.
            .env("RUNTIME_CLOUD_SCHEDULES_PAUSED", "true")
            // The product's own default log filter, as an operator would run it.
            .env_remove("RUST_LOG")
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null());
        Ok(cmd)
    }

    fn mint_token(&self) -> anyhow::Result<String> {
        self.mint(&self.tenant, &["Operator"], SCOPES)
    }

    /// A day-long token of `tenant` with `roles` and `scopes`, from `runtime-cloud token`.
    pub fn mint(&self, tenant: &str, roles: &[&str], scopes: &[&str]) -> anyhow::Result<String> {
        let mut cmd = self.command("token")?;
        cmd.args(["--tenant", tenant, "--ttl", "86400"]);
        for r in roles {
            cmd.args(["--role", r]);
        }
        for s in scopes {
            cmd.args(["--scope", s]);
        }
        let out = cmd.output().context("run runtime-cloud token")?;
        if !out.status.success() {
            bail!("token: {}", String::from_utf8_lossy(&out.stderr));
        }
        Ok(String::from_utf8(out.stdout)?.trim().to_owned())
    }

    /// Lets `project` of the stack's tenant run `concurrent_runs` runs at once (its quota, set
    /// by a PlatformAdmin): for benchmarks that measure the engine, not the default quota of 10.
    pub async fn allow_concurrent_runs(
        &self,
        project: &str,
        concurrent_runs: u32,
    ) -> anyhow::Result<()> {
        let admin = self.mint(
            &self.tenant,
            &["PlatformAdmin"],
            &["factory.capacity.read", "factory.capacity.manage"],
        )?;
        let body = serde_json::json!({ "concurrentRuns": concurrent_runs,
            "concurrentSandboxes": concurrent_runs, "cpuPerAttempt": 2, "memoryGbPerAttempt": 4,
            "executionMinutesPerDay": 1_000_000, "source": "benchmark" });
        crate::api::Api::new(&self.base_url, &admin)
            .put(&format!("/factory/capacity/quotas/{project}"), body, 200)
            .await?;
        Ok(())
    }

    /// Starts the worker process.
    pub fn start_worker(&mut self) -> anyhow::Result<()> {
        let log = log_file(self.dir.path(), "worker")?;
        let child = self
            .command("worker")?
            .stdout(log.try_clone()?)
            .stderr(log)
            .spawn()
            .context("spawn worker")?;
        self.worker = Some(Proc { child });
        Ok(())
    }

    /// Starts the API process and waits until it prints its address.
    pub fn start_api(&mut self) -> anyhow::Result<()> {
        let mut child = self
            .command("api")?
            .stdout(Stdio::piped())
            .stderr(log_file(self.dir.path(), "api")?)
            .spawn()
            .context("spawn api")?;
        let stdout = child.stdout.take().context("api stdout")?;
        let proc = Proc { child };
        let mut lines = BufReader::new(stdout).lines();
        let line = lines.next().and_then(Result::ok).unwrap_or_default();
        let Some(url) = line.split_whitespace().find(|w| w.starts_with("http://")) else {
            bail!(
                "the API did not print its address ({line:?}); see {}",
                self.dir.path().display()
            );
        };
        self.base_url = url.to_owned();
        // Keep draining stdout so the API never blocks on a full pipe.
        std::thread::spawn(move || for _ in lines.map_while(Result::ok) {});
        self.api = Some(proc);
        Ok(())
    }

    pub fn worker_pid(&self) -> u32 {
        self.worker.as_ref().map_or(0, Proc::pid)
    }

    pub fn api_pid(&self) -> u32 {
        self.api.as_ref().map_or(0, Proc::pid)
    }

    /// A connection to the read DB, for checks a client cannot make cheaply (counts).
    pub async fn db(&self) -> anyhow::Result<sea_orm::DatabaseConnection> {
        // As the product connects: the store's commits on SQLite expect its own connection
        // (`store::connect`), and sqlx's answered them "cannot commit - no transaction is
        // active".
        Ok(runtime_cloud_store::connect::open(&self.database_url).await?)
    }

    /// An HTTP client acting as this stack's operator.
    pub fn api(&self) -> crate::api::Api {
        crate::api::Api::new(&self.base_url, &self.token)
    }

    /// Stops the processes and drops the PostgreSQL database.
    pub async fn stop(mut self) {
        self.api.take();
        self.worker.take();
        if let Some((admin, name)) = self.postgres.take() {
            drop_postgres(&admin, &name).await;
        }
    }
}

/// A new, empty read DB of `db_kind`: its URL, and for PostgreSQL the admin URL and the name
/// to drop it by ([`drop_postgres`]). SQLite's is `read.db` in `dir`.
pub async fn fresh_db(
    db_kind: Db,
    dir: &Path,
) -> anyhow::Result<(String, Option<(String, String)>)> {
    Ok(match db_kind {
        Db::Sqlite => (
            format!("sqlite://{}?mode=rwc", dir.join("read.db").display()),
            None,
        ),
        Db::Postgres => {
            let (url, admin, name) = fresh_postgres().await?;
            (url, Some((admin, name)))
        }
    })
}

/// Drops the database `name` that [`fresh_postgres`] created (from `admin`), if it can.
pub async fn drop_postgres(admin: &str, name: &str) {
    use sea_orm::ConnectionTrait;
    if let Ok(db) = sea_orm::Database::connect(admin).await {
        let _ = db
            .execute_unprepared(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
            .await;
    }
}

/// Creates `rc_bench_{random}`; returns its URL, the admin URL and its name.
async fn fresh_postgres() -> anyhow::Result<(String, String, String)> {
    use sea_orm::ConnectionTrait;
    let admin = std::env::var("RC_BENCH_POSTGRES_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".into());
    let name = format!("rc_bench_{}", suffix());
    let db = sea_orm::Database::connect(&admin)
        .await
        .context("PostgreSQL at RC_BENCH_POSTGRES_URL")?;
    db.execute_unprepared(&format!("CREATE DATABASE {name}"))
        .await
        .context("create the benchmark database")?;
    let base = admin
        .rsplit_once('/')
        .map(|(b, _)| b.to_owned())
        .unwrap_or(admin.clone());
    Ok((format!("{base}/{name}"), admin, name))
}

/// Polls `check` every `every` until it returns Some, for at most `limit`.
pub async fn poll<T, F, Fut>(
    what: &str,
    every: Duration,
    limit: Duration,
    mut check: F,
) -> anyhow::Result<T>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = anyhow::Result<Option<T>>>,
{
    let deadline = tokio::time::Instant::now() + limit;
    loop {
        if let Some(v) = check().await? {
            return Ok(v);
        }
        if tokio::time::Instant::now() > deadline {
            bail!("timed out after {limit:?} waiting for {what}");
        }
        tokio::time::sleep(every).await;
    }
}

/// The visibility query of every workflow of a stack on `task_queue`.
pub fn product_workflows(task_queue: &str) -> String {
    format!("TaskQueue='{task_queue}'")
}

/// Waits until no workflow on the task queue is running (a sweep finished, a worker idle).
pub async fn wait_idle(client: &temporalio_client::Client, task_queue: &str) -> anyhow::Result<()> {
    wait_none_running(client, &product_workflows(task_queue)).await
}

/// Waits until no workflow that `query` selects is running.
pub async fn wait_none_running(
    client: &temporalio_client::Client,
    query: &str,
) -> anyhow::Result<()> {
    let q = format!("{query} AND ExecutionStatus='Running'");
    poll(
        "every workflow on the task queue to finish",
        Duration::from_millis(500),
        Duration::from_secs(600),
        || async {
            let n = client
                .count_workflows(
                    q.as_str(),
                    temporalio_client::WorkflowCountOptions::default(),
                )
                .await?;
            Ok((n.count() == 0).then_some(()))
        },
    )
    .await
}
