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
use runtime_cloud_api::inbound::sources::Sources;
use runtime_cloud_api::inbound::verify::Verifier;

use crate::worker::WorkerDeps;
use runtime_cloud_store::migration::Migrator;
use sea_orm::DatabaseConnection;
use sea_orm_migration::MigratorTrait;
use std::future::Future;
use std::sync::Arc;

/// Connects to the read DB.
pub async fn connect_db(config: &Config) -> anyhow::Result<DatabaseConnection> {
    std::fs::create_dir_all(&config.data_dir)
        .with_context(|| format!("creating {}", config.data_dir.display()))?;
    let url = config.database_url();
    runtime_cloud_store::connect::open(&url)
        .await
        .with_context(|| format!("connecting to the read DB ({})", redact_url(&url)))
}

/// A database URL without its password, for error messages.
fn redact_url(url: &str) -> String {
    match (url.find("://"), url.find('@')) {
        (Some(s), Some(at)) if at > s => format!("{}://…@{}", &url[..s], &url[at + 1..]),
        _ => url.to_owned(),
    }
}

/// Applies every pending migration, and says in one line where the read DB stands
/// (sea-orm-migration's own lines, several for each migration, are left out by `RUST_LOG`'s
/// default).
pub async fn migrate(config: &Config) -> anyhow::Result<()> {
    let db = connect_db(config).await?;
    let pending = Migrator::get_pending_migrations(&db)
        .await
        .map_err(|e| unknown_schema(config, e))?
        .len();
    Migrator::up(&db, None)
        .await
        .context("migrating the read DB")?;
    let applied = Migrator::get_applied_migrations(&db)
        .await
        .context("reading the read DB's migrations")?;
    let version = applied
        .last()
        .map(|m| m.name().to_owned())
        .unwrap_or_default();
    tracing::info!(
        version,
        migrated = pending,
        "read DB at version {} ({version}), {pending} migrated now",
        applied.len()
    );
    Ok(())
}

/// A read DB that holds migrations this version does not have: one made by an unreleased
/// version, whose migrations have since been squashed (or a newer version's).
fn unknown_schema(config: &Config, e: sea_orm::DbErr) -> anyhow::Error {
    let url = config.database_url();
    let what = match runtime_cloud_store::connect::sqlite_file(&url) {
        Some(file) => format!("delete {} (and its -wal and -shm files)", file.display()),
        None => "drop and create the database".to_owned(),
    };
    anyhow::anyhow!(
        "the read DB was made by another version of Runtime Cloud, whose migrations this one \
         does not have ({e}). Before the first release the schema is rebuilt rather than \
         migrated: {what} and start again; what it held (environments, specifications, runs) \
         is not carried over"
    )
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
    let artifacts = crate::artifacts::open(config.artifacts_url.as_deref(), &config.data_dir)?;
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
    let kubernetes = Arc::new(Kubernetes::new(
        db.clone(),
        secrets.clone(),
        config.kubernetes_calls_per_cluster.ceil() as usize,
        config.posture_findings,
    ));
    let policy = policy(
        config,
        inventory.auto_accept_non_destructive_outside_production,
    )?;
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
            kubernetes: kubernetes.clone(),
            pulumi: pulumi.clone(),
            policy: policy.clone(),
            posture: config.posture_findings,
        }),
        pulumi,
        policy,
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
        kubernetes_watch: config.kubernetes_watch.then_some(kubernetes),
        posture_findings: config.posture_findings,
    })
}

/// Connects to Temporal as the configuration says.
pub(crate) async fn connect_temporal(
    config: &Config,
) -> anyhow::Result<runtime_cloud_temporal::Client> {
    let how = config.temporal_connect()?;
    Ok(runtime_cloud_temporal::connect_with(
        &config.temporal_address,
        &config.temporal_namespace,
        how,
    )
    .await?)
}

/// Connects a worker to Temporal, trying again while it is unreachable (the pause doubles up
/// to `worker::RestartPauses::MAX`): a worker started during an outage of Temporal serves once it
/// is back, as one that was running does. A bad address is an error at once.
async fn connect_temporal_patiently(
    config: &Config,
) -> anyhow::Result<runtime_cloud_temporal::Client> {
    let mut pauses = crate::worker::RestartPauses::default();
    loop {
        let how = config.temporal_connect()?;
        let connected = runtime_cloud_temporal::connect_with(
            &config.temporal_address,
            &config.temporal_namespace,
            how,
        )
        .await;
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
    crate::worker::run_pool(deps, pool_id, shutdown).await?;
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
    let relay = config.nats().map(|nats| {
        tokio::spawn(outbox_relay::run(
            deps.db.clone(),
            nats,
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
    let result = crate::worker::run(deps, shutdown).await;
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
        payload_keys: config.payload_keys()?,
        db,
        temporal,
        task_queue: config.task_queue.clone(),
        auth: Arc::new(auth),
        sign_in: Arc::new(sign_in),
        options: config.runtime_cloud.provisioning.clone(),
        inventory: config.runtime_cloud.inventory.clone(),
        approvals_elsewhere: config.run_control_url.is_some(),
        slo_queries: config.prometheus_url.is_some(),
        artifacts: crate::artifacts::open(config.artifacts_url.as_deref(), &config.data_dir)?,
        http_metrics: Default::default(),
        inbox_lag: Arc::new(std::sync::atomic::AtomicI64::new(-1)),
        inbox_oldest: Arc::new(std::sync::atomic::AtomicI64::new(-1)),
        inbound_refusals: Default::default(),
        metrics_internal: config.metrics_listen.is_some(),
        nats_configured: config.nats_url.is_some(),
        kubernetes_watch: config.kubernetes_watch,
        nats_refusal: Default::default(),
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
    // `/metrics` for scrapers inside the cluster, on an address of its own.
    let metrics = match &config.metrics_listen {
        Some(address) => {
            let listener = tokio::net::TcpListener::bind(address)
                .await
                .with_context(|| format!("binding the metrics listener {address}"))?;
            tracing::info!(address = %listener.local_addr()?, "metrics listener");
            Some(tokio::spawn(runtime_cloud_api::http::serve_internal(
                listener,
                state.clone(),
                stopped(),
            )))
        }
        None => None,
    };
    let inbound = match config.nats() {
        Some(nats) => {
            let verifier = Arc::new(inbound_verifier(config).await?);
            let lag = state.inbox_lag.clone();
            Some(tokio::spawn(runtime_cloud_api::inbound::run(
                state.clone(),
                nats,
                verifier,
                lag,
                stopped(),
            )))
        }
        None => None,
    };
    let shutdown = async move {
        shutdown.await;
        let _ = stop_beside.send(true);
    };
    runtime_cloud_api::serve(listener, state, shutdown).await?;
    let _ = starter.await;
    if let Some(metrics) = metrics {
        let _ = metrics.await;
    }
    if let Some(inbound) = inbound {
        let _ = inbound.await;
    }
    Ok(())
}

/// How inbound approvals are proven: the configured sources' keys, read (or fetched) now so
/// that a source whose keys cannot be had stops the start.
async fn inbound_verifier(config: &Config) -> anyhow::Result<Verifier> {
    let sources = match &config.inbound_sources {
        Some(path) => Sources::load(path).await?,
        None => Sources::none(),
    };
    Ok(Verifier {
        sources,
        accept_unsigned: config.inbound_accept_unsigned,
        run_control: config.run_control_url.is_some(),
    })
}

/// Refuses a setting meant for `runtime-cloud dev` only in the production commands.
pub fn refuse_dev_only_settings(config: &Config) -> anyhow::Result<()> {
    if config.inbound_accept_unsigned {
        anyhow::bail!(
            "RUNTIME_CLOUD_INBOUND_ACCEPT_UNSIGNED (inbound_accept_unsigned) takes approvals \
             nobody proved: only `runtime-cloud dev` starts with it"
        );
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
    if !server.owned() {
        let client = connect_temporal(&config).await?;
        runtime_cloud_temporal::dev_server::refuse_shared(
            &client,
            &config.temporal_address,
            &config.task_queue,
            &config.data_dir,
        )
        .await?;
    }
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
