//! The processes: `dev` (everything), `worker`, `api` and `migrate`.

use crate::config::Config;
use anyhow::Context;
use runtime_cloud_activities::kubernetes::Kubernetes;
use runtime_cloud_activities::outbox_relay;
use runtime_cloud_activities::ports::{
    Approvals, Policy, RecordedApprovals, TargetObservers, TargetRunners,
};
use runtime_cloud_activities::pulumi::Pulumi;
use runtime_cloud_activities::references::{HttpReferences, References};
use runtime_cloud_activities::run_control::RunControlApprovals;
use runtime_cloud_activities::sandbox::Sandbox;
use runtime_cloud_activities::slo::PrometheusSloGuard;
use runtime_cloud_api::AppState;
use runtime_cloud_api::auth::oidc::Oidc;
use runtime_cloud_api::auth::{Authenticator, JwtKeys, OidcSignIn, SignIn};

use runtime_cloud_store::artifacts;
use runtime_cloud_store::migration::Migrator;
use runtime_cloud_temporal::worker::WorkerDeps;
use sea_orm::DatabaseConnection;
use sea_orm_migration::MigratorTrait;
use std::future::Future;
use std::sync::Arc;

/// Connects to the read DB.
pub async fn connect_db(config: &Config) -> anyhow::Result<DatabaseConnection> {
    std::fs::create_dir_all(&config.data_dir)
        .with_context(|| format!("creating {}", config.data_dir.display()))?;
    let url = config.database_url();
    let connecting = || format!("connecting to the read DB ({})", redact_url(&url));
    let db = if url.starts_with("sqlite:") {
        sqlite_pool(&url).await.with_context(connecting)?
    } else {
        postgres_pool(&url).await.with_context(connecting)?
    };
    Ok(db)
}

/// A pool that never starts sqlx's maintenance task. sea-orm always gives sqlx's pool an idle
/// timeout and a maximum lifetime, and with either sqlx 0.8.6 runs a task whose sweep can read a
/// miscounted idle queue as `usize::MAX` and spin on it forever, wedging the pool (sqlx issue
/// 3645, fixed after 0.8.6; seen here as an API at 86 % CPU answering nothing, and reported on
/// PostgreSQL pools elsewhere). So the pools are built here, without either: a connection stays
/// open until it breaks, and a broken one is found by the check before it is handed out.
fn without_maintenance<DB: sqlx::Database>(
    pool: sqlx::pool::PoolOptions<DB>,
) -> sqlx::pool::PoolOptions<DB> {
    pool.idle_timeout(None)
        .max_lifetime(None)
        .min_connections(0)
}

/// The SQLite pool: one connection, one writer at a time anyway (sea-orm's default for SQLite).
async fn sqlite_pool(url: &str) -> anyhow::Result<DatabaseConnection> {
    use sqlx::ConnectOptions as _;
    use sqlx::sqlite::{
        SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous,
    };
    let connect = url
        .parse::<SqliteConnectOptions>()?
        .disable_statement_logging()
        // Write-ahead logging: readers (the API) never block the writer (the worker) and the
        // other way round. With it, `synchronous=normal` syncs the log at checkpoints rather
        // than at every commit, as the embedded Temporal store next to it does: a killed
        // process loses nothing it committed, a power cut can lose the last transactions
        // (PostgreSQL is the production store; docs/configuration.md).
        .journal_mode(SqliteJournalMode::Wal)
        .synchronous(SqliteSynchronous::Normal)
        // sqlx hands each row from the connection's thread to the async side through a
        // bounded channel (50 rows by default); a list page is up to 201 rows, and a full
        // channel parks the thread until the reader catches up. Room for a whole page avoids it.
        .row_buffer_size(256);
    let pool = without_maintenance(SqlitePoolOptions::new())
        .max_connections(1)
        // Nothing can have broken a file open in this process between uses, and the ping sqlx
        // sends before handing a connection out is a round trip to the connection's thread.
        .test_before_acquire(false)
        .connect_with(connect)
        .await?;
    Ok(sea_orm::SqlxSqliteConnector::from_sqlx_sqlite_pool(pool))
}

/// The PostgreSQL pool: sqlx's defaults (ten connections, each checked before it is handed
/// out: the server may have closed it) without the maintenance task.
async fn postgres_pool(url: &str) -> anyhow::Result<DatabaseConnection> {
    use sqlx::ConnectOptions as _;
    use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
    let connect = url.parse::<PgConnectOptions>()?.disable_statement_logging();
    let pool = without_maintenance(PgPoolOptions::new())
        .connect_with(connect)
        .await?;
    Ok(sea_orm::SqlxPostgresConnector::from_sqlx_postgres_pool(
        pool,
    ))
}

/// A database URL without its password, for error messages.
fn redact_url(url: &str) -> String {
    match (url.find("://"), url.find('@')) {
        (Some(s), Some(at)) if at > s => format!("{}://…@{}", &url[..s], &url[at + 1..]),
        _ => url.to_owned(),
    }
}

/// Applies every pending migration.
pub async fn migrate(config: &Config) -> anyhow::Result<()> {
    let db = connect_db(config).await?;
    Migrator::up(&db, None)
        .await
        .context("migrating the read DB")?;
    Ok(())
}

/// A references port: local schemes, and the service at `url` for the others when set.
fn references(url: &Option<String>, token: &Option<String>) -> anyhow::Result<References> {
    let remote = match url {
        Some(url) => Some(HttpReferences::new(url, token.clone())?),
        None => None,
    };
    Ok(References { remote })
}

/// The RunControlService adapter, when `RUNTIME_CLOUD_RUN_CONTROL_URL` is set.
fn run_control(config: &Config) -> anyhow::Result<Option<Arc<dyn Approvals>>> {
    let Some(url) = &config.run_control_url else {
        return Ok(None);
    };
    let adapter = RunControlApprovals::new(url, config.run_control_token.clone())?;
    Ok(Some(Arc::new(adapter)))
}

/// The Policy port: the PolicyEngineService when `RUNTIME_CLOUD_POLICY_URL` names one, else
/// the embedded Rego engine over the default bundle and `RUNTIME_CLOUD_POLICY_DIR`'s files (a
/// bundle that does not parse stops the worker here, with the file and line).
fn policy(config: &Config, auto_accept: bool) -> anyhow::Result<Arc<dyn Policy>> {
    use runtime_cloud_activities::policy::{OpaPolicy, RegoPolicy};
    if let Some(url) = &config.policy_url {
        return Ok(Arc::new(OpaPolicy::new(auto_accept, url)));
    }
    Ok(Arc::new(RegoPolicy::new(
        auto_accept,
        config.policy_dir.clone(),
    )?))
}

/// What a worker's activities need, from the configuration.
async fn worker_deps(config: &Config) -> anyhow::Result<WorkerDeps> {
    let db = connect_db(config).await?;
    let client = connect_temporal_patiently(config).await?;
    let sandbox = Arc::new(Sandbox::new(&config.data_dir));
    let artifacts = artifacts::from_url(config.artifacts_url.as_deref(), &config.data_dir)?;
    let inventory = config.runtime_cloud.inventory.clone();
    let secrets = Arc::new(references(
        &config.secret_broker_url,
        &config.secret_broker_token,
    )?);
    let pulumi = Arc::new(Pulumi::new(
        db.clone(),
        &config.data_dir,
        config.pulumi_binary.clone().into(),
        secrets.clone(),
        Arc::new(references(
            &config.config_platform_url,
            &config.config_platform_token,
        )?),
        artifacts.clone(),
    ));
    Ok(WorkerDeps {
        client,
        db: db.clone(),
        runner: Arc::new(TargetRunners {
            db: db.clone(),
            sandbox: sandbox.clone(),
            pulumi: pulumi.clone(),
        }),
        observer: Arc::new(TargetObservers {
            db: db.clone(),
            sandbox,
            kubernetes: Arc::new(Kubernetes::new(
                db.clone(),
                secrets.clone(),
                config.kubernetes_calls_per_cluster.ceil() as usize,
            )),
            pulumi,
        }),
        policy: policy(
            config,
            inventory.auto_accept_non_destructive_outside_production,
        )?,
        artifacts,
        approvals: Arc::new(RecordedApprovals {
            db: db.clone(),
            elsewhere: run_control(config)?,
        }),
        provisioning: config.runtime_cloud.provisioning.clone(),
        inventory,
        task_queue: config.task_queue.clone(),
        schedules_paused: config.schedules_paused,
        slo: config.prometheus_url.as_deref().map(|url| {
            Arc::new(PrometheusSloGuard::new(
                url,
                config.prometheus_token.clone(),
            )) as Arc<dyn runtime_cloud_activities::slo::SloGuard>
        }),
    })
}

/// Connects to Temporal as the configuration says.
async fn connect_temporal(
    config: &Config,
) -> Result<runtime_cloud_temporal::Client, runtime_cloud_temporal::Error> {
    let how = runtime_cloud_temporal::Connect {
        trace_context: config.otlp_endpoint.is_some(),
        gzip: config.temporal_grpc_gzip,
    };
    runtime_cloud_temporal::connect_with(&config.temporal_address, &config.temporal_namespace, how)
        .await
}

/// Connects a worker to Temporal, trying again while it is unreachable (the pause doubles up
/// to `worker::RestartPauses::MAX`): a worker started during an outage of Temporal serves once it
/// is back, as one that was running does. A bad address is an error at once.
async fn connect_temporal_patiently(
    config: &Config,
) -> anyhow::Result<runtime_cloud_temporal::Client> {
    let mut pauses = runtime_cloud_temporal::worker::RestartPauses::default();
    loop {
        let connected = connect_temporal(config).await;
        match connected {
            Ok(client) => return Ok(client),
            Err(e @ runtime_cloud_temporal::Error::Connect { .. }) => {
                let pause = pauses.next_pause();
                tracing::warn!(error = %e, "Temporal unreachable; the worker tries again in {pause:?}");
                tokio::time::sleep(pause).await;
            }
            Err(e) => return Err(e.into()),
        }
    }
}

/// Runs a worker of pool `pool_id` until `shutdown`: it serves only the plans and applies of
/// the environments bound to the pool (no workflows, no relay).
pub async fn run_pool_worker(
    config: &Config,
    pool_id: &str,
    shutdown: impl Future<Output = ()>,
) -> anyhow::Result<()> {
    tokio::pin!(shutdown);
    let deps = tokio::select! {
        deps = worker_deps(config) => deps?,
        () = &mut shutdown => return Ok(()),
    };
    runtime_cloud_temporal::worker::run_pool(deps, pool_id, shutdown).await?;
    Ok(())
}

/// How often a worker folds PostgreSQL's metric deltas into the counts.
const METRIC_FOLD_EVERY: std::time::Duration = std::time::Duration::from_secs(60);

/// Runs the worker (every workflow and activity) until `shutdown`, with the outbox relay beside
/// it when NATS is configured, and the metric deltas' folding.
pub async fn run_worker(config: &Config, shutdown: impl Future<Output = ()>) -> anyhow::Result<()> {
    tokio::pin!(shutdown);
    let deps = tokio::select! {
        deps = worker_deps(config) => deps?,
        () = &mut shutdown => return Ok(()),
    };
    // What runs beside the worker stops when it does.
    let (stop_beside, _) = tokio::sync::watch::channel(false);
    let stopped = || {
        let mut rx = stop_beside.subscribe();
        async move {
            let _ = rx.wait_for(|s| *s).await;
        }
    };
    // The outbox relay runs beside the worker when NATS is configured; without it events stay
    // readable in the outbox table.
    let relay = config.nats_url.clone().map(|url| {
        tokio::spawn(outbox_relay::run(
            deps.db.clone(),
            url,
            std::time::Duration::from_millis(250),
            stopped(),
        ))
    });
    // PostgreSQL's metric deltas are folded into the counts here, every minute, whether or not
    // anything scrapes `/metrics` (`store::metrics::keep_folding`; nothing to do on SQLite).
    let folding = tokio::spawn(runtime_cloud_store::metrics::keep_folding(
        deps.db.clone(),
        METRIC_FOLD_EVERY,
        stopped(),
    ));
    let shutdown = async move {
        shutdown.await;
        let _ = stop_beside.send(true);
    };
    let result = runtime_cloud_temporal::worker::run(deps, shutdown).await;
    if let Some(relay) = relay {
        let _ = relay.await;
    }
    let _ = folding.await;
    result?;
    Ok(())
}

/// Runs the API until `shutdown`; `on_listening` gets the bound address.
pub async fn run_api(
    config: &Config,
    sign_in: SignIn,
    shutdown: impl Future<Output = ()> + Send + 'static,
    on_listening: impl FnOnce(std::net::SocketAddr),
) -> anyhow::Result<()> {
    // First: a misconfigured provider is reported before anything else is connected to.
    let (auth, sign_in) = authenticator(config, sign_in).await?;
    let db = connect_db(config).await?;
    let temporal = connect_temporal(config).await?;
    let state = AppState {
        db,
        temporal,
        task_queue: config.task_queue.clone(),
        auth: Arc::new(auth),
        sign_in: Arc::new(sign_in),
        options: config.runtime_cloud.provisioning.clone(),
        inventory: config.runtime_cloud.inventory.clone(),
        approvals_elsewhere: config.run_control_url.is_some(),
        slo_queries: config.prometheus_url.is_some(),
        artifacts: artifacts::from_url(config.artifacts_url.as_deref(), &config.data_dir)?,
        http_metrics: Default::default(),
        inbox_lag: Arc::new(std::sync::atomic::AtomicI64::new(-1)),
        inbox_oldest: Arc::new(std::sync::atomic::AtomicI64::new(-1)),
        pacer: Arc::new(runtime_cloud_api::pacing::Pacer::new(
            runtime_cloud_models::pacing::Pace {
                per_second: config.run_submissions_per_second,
                burst: config.run_submission_burst.ceil().min(f64::from(u32::MAX)) as u32,
                max_wait: std::time::Duration::from_secs_f64(
                    config.run_submission_max_wait_seconds,
                ),
            },
        )),
    };
    let listener = tokio::net::TcpListener::bind(&config.listen)
        .await
        .with_context(|| format!("binding {}", config.listen))?;
    on_listening(listener.local_addr()?);
    // Beside the API, and stopping with it: the starter (runs whose request ended before their
    // workflow started) and, when NATS is configured, the inbound events consumer.
    let (stop_beside, beside_stopped) = tokio::sync::watch::channel(false);
    let stopped = move || {
        let mut rx = beside_stopped.clone();
        async move {
            let _ = rx.wait_for(|s| *s).await;
        }
    };
    let starter = tokio::spawn(runtime_cloud_api::starter::run(state.clone(), stopped()));
    let inbound = config.nats_url.clone().map(|url| {
        let lag = state.inbox_lag.clone();
        tokio::spawn(runtime_cloud_api::inbound::run(
            state.clone(),
            url,
            lag,
            stopped(),
        ))
    });
    let shutdown = async move {
        shutdown.await;
        let _ = stop_beside.send(true);
    };
    runtime_cloud_api::serve(listener, state, shutdown).await?;
    let _ = starter.await;
    if let Some(inbound) = inbound {
        let _ = inbound.await;
    }
    Ok(())
}

/// How the API verifies tokens, and what the console is told about signing in: the OIDC
/// provider's tokens when one is configured (found through its discovery document now, so a
/// misconfigured provider stops the start), else the local key's.
async fn authenticator(
    config: &Config,
    mut sign_in: SignIn,
) -> anyhow::Result<(Authenticator, SignIn)> {
    let Some(settings) = config.oidc()? else {
        if !sign_in.dev {
            tracing::warn!(
                "no OIDC provider configured (oidc_issuer): accepting HS256 tokens of the local \
                 key, which are meant for dev and tests; production signs in with a provider"
            );
        }
        return Ok((
            Authenticator::Local(JwtKeys::from_secret(&config.jwt_secret()?)),
            sign_in,
        ));
    };
    let issuer = settings.issuer.clone();
    let provider = Oidc::discover(settings)
        .await
        .with_context(|| format!("discovering the OIDC provider {issuer}"))?;
    // Tokens only the provider issues: no dev sign-in beside it.
    sign_in.dev = false;
    if let Some(client_id) = &config.oidc_console_client_id {
        let d = provider.discovery();
        match (&d.authorization_endpoint, &d.token_endpoint) {
            (Some(authorize), Some(token)) => {
                sign_in.oidc = Some(OidcSignIn {
                    issuer: issuer.clone(),
                    client_id: client_id.clone(),
                    scope: config.oidc_console_scope.clone(),
                    authorization_endpoint: authorize.clone(),
                    token_endpoint: token.clone(),
                })
            }
            _ => tracing::warn!(
                issuer = %issuer,
                "the provider's discovery document has no authorization or token endpoint; \
                 the console offers only pasting a token"
            ),
        }
    }
    Ok((Authenticator::Oidc(Box::new(provider)), sign_in))
}

/// Mints a bearer token with the configured key.
pub fn mint_token(
    config: &Config,
    subject: &str,
    tenant: &str,
    scopes: &[String],
    roles: &[String],
    ttl_secs: u64,
) -> anyhow::Result<String> {
    let keys = JwtKeys::from_secret(&config.jwt_secret()?);
    keys.mint(subject, tenant, scopes, roles, ttl_secs)
        .map_err(|e| anyhow::anyhow!("{e}"))
}

pub use runtime_cloud_api::auth::ALL_SCOPES;

/// `runtime-cloud dev`: a local Temporal dev server (started or reused), a migrated SQLite read
/// DB, the worker and the API in one process, until `shutdown`.
pub async fn run_dev(
    config: &Config,
    temporal_port: u16,
    ui_port: u16,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    let mut config = config.clone();
    let server =
        runtime_cloud_temporal::dev_server::ensure(&config.data_dir, temporal_port, ui_port)
            .await?;
    config.temporal_address = server.address.clone();
    migrate(&config).await?;
    let scopes: Vec<String> = ALL_SCOPES.iter().map(|s| s.to_string()).collect();
    let token = mint_token(
        &config,
        "dev-operator",
        "dev",
        &scopes,
        &["Operator".into()],
        30 * 24 * 3600,
    )?;

    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let api_stop = {
        let mut rx = stop_rx.clone();
        async move {
            let _ = rx.wait_for(|s| *s).await;
        }
    };
    let worker_stop = {
        let mut rx = stop_rx.clone();
        async move {
            let _ = rx.wait_for(|s| *s).await;
        }
    };
    let ui_url = server.ui_url.clone();
    let sign_in = SignIn {
        dev: true,
        ..Default::default()
    };
    let api = run_api(&config, sign_in, api_stop, |addr| {
        println!("Runtime Cloud is running.");
        println!("  API:          http://{addr}");
        println!("  Console:      http://{addr}/console   (one-click dev sign-in)");
        println!("  Temporal UI:  {ui_url}");
        println!("  Temporal:     {}", config.temporal_address);
        println!("  Data dir:     {}", config.data_dir.display());
        println!("  Dev token (tenant `dev`, all scopes, 30 days):");
        println!("  export TOKEN={token}");
    });
    let worker = run_worker(&config, worker_stop);
    let stopper = async move {
        shutdown.await;
        let _ = stop_tx.send(true);
    };
    let (api, worker, ()) = tokio::join!(api, worker, stopper);
    server.stop().await;
    api.and(worker)
}

#[cfg(test)]
mod tests {
    use super::*;
    use sea_orm::{ConnectionTrait, DbBackend, Statement};

    /// A pragma's value on the pool's connection.
    async fn pragma(db: &DatabaseConnection, name: &str) -> String {
        let sql = format!("PRAGMA {name}");
        let row = db
            .query_one(Statement::from_string(DbBackend::Sqlite, sql))
            .await
            .expect("reads the pragma")
            .expect("a row");
        row.try_get_by_index::<String>(0)
            .or_else(|_| row.try_get_by_index::<i64>(0).map(|n| n.to_string()))
            .expect("a value")
    }

    #[tokio::test]
    async fn the_sqlite_pool_logs_ahead_syncs_at_checkpoints_and_never_sweeps() {
        let dir = tempfile::tempdir().expect("a directory");
        let url = format!("sqlite://{}?mode=rwc", dir.path().join("read.db").display());
        let db = sqlite_pool(&url).await.expect("connects");
        assert_eq!(pragma(&db, "journal_mode").await, "wal");
        // 1 is NORMAL (2, FULL, syncs the log at every commit).
        assert_eq!(pragma(&db, "synchronous").await, "1");
        let options = db.get_sqlite_connection_pool().options();
        assert_eq!(options.get_idle_timeout(), None);
        assert_eq!(options.get_max_lifetime(), None);
        assert_eq!(options.get_max_connections(), 1);
    }

    #[tokio::test]
    async fn the_postgres_pool_never_sweeps_and_checks_connections_before_use() {
        let url = std::env::var("RC_TEST_POSTGRES_URL")
            .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".into());
        let db = postgres_pool(&url)
            .await
            .expect("PostgreSQL at RC_TEST_POSTGRES_URL");
        let one = db
            .query_one(Statement::from_string(DbBackend::Postgres, "SELECT 1"))
            .await
            .expect("answers")
            .expect("a row");
        assert_eq!(one.try_get_by_index::<i32>(0).expect("a number"), 1);
        let options = db.get_postgres_connection_pool().options();
        assert_eq!(options.get_idle_timeout(), None);
        assert_eq!(options.get_max_lifetime(), None);
        assert!(options.get_test_before_acquire());
    }
}
