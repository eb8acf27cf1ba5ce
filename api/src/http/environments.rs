//! `/factory/environments`: register a tenant's environments and their class.

use super::pagination::{Page, Paged};
use crate::auth::{PRODUCTION_DECIDERS, ProvisioningApply, ProvisioningRead, Scoped};
use crate::json::Json;
use crate::openapi::Problems;
use crate::query::Query;
use crate::tenancy::{require_active_environment, require_environment};
use crate::{AppState, Error};
use axum::extract::{Path, State};
use axum::http::StatusCode;
use runtime_cloud_models::EnvironmentClass;
use runtime_cloud_models::environments::EnvironmentMode;
use runtime_cloud_models::targets::{ObserverTarget, Target};
use runtime_cloud_models::validation::check_id;
use runtime_cloud_store::environments::{self, Environment, NewEnvironment};
use serde::Deserialize;
use utoipa::ToSchema;
use utoipa_axum::{router::OpenApiRouter, routes};

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(list, register))
        .routes(routes!(read))
        .routes(routes!(change_target))
}

/// `POST /factory/environments`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RegisterEnvironment {
    /// 1–63 characters of `[A-Za-z0-9._-]`, unique in the tenant.
    pub environment_id: String,
    /// 1–63 characters of `[A-Za-z0-9._-]`.
    pub project_id: String,
    /// Production runs wait for an operator's approval.
    pub class: EnvironmentClass,
    /// Where it runs: `{"runner": {"kind": "sandbox"}}` (the default) or
    /// `{"runner": {"kind": "pulumi", "stack": "org/project/stack", "backendUrl": "s3://…",
    /// "passphraseRef": "secretbroker://…"}}`.
    #[serde(default)]
    pub target: Target,
    /// `observe` (findings only), `propose` (operators decide every proposal) or `auto`
    /// (non-destructive proposals outside production accepted on their own); by default `auto`
    /// outside production and `propose` in production.
    pub mode: Option<EnvironmentMode>,
    /// What fleet rollouts select it by (`{"region": "eu"}`): keys and values as Kubernetes
    /// labels have them, at most 32.
    #[serde(default)]
    #[schema(value_type = std::collections::BTreeMap<String, String>)]
    pub labels: runtime_cloud_models::environments::Labels,
    /// The customer tenant inside the product (not a Factory tenant), where given.
    pub customer_tenant_id: Option<String>,
    /// The tenant's worker pool whose workers plan and apply its runs
    /// (`runtime-cloud worker --pool`); by default the shared task queue.
    pub pool_id: Option<String>,
    /// An ephemeral environment's time to live (`20s`, `72h`, `7d`): decommissioned when it
    /// has passed. Not for production; within the tenant's limit
    /// (`GET /factory/capacity/environment-lifetime`).
    pub ttl: Option<String>,
    /// An ephemeral environment's expiry (RFC 3339), instead of `ttl`.
    pub expires_at: Option<chrono::DateTime<chrono::Utc>>,
}

/// An environment may be bound only to a pool of its own tenant that takes work.
pub(crate) async fn check_pool(
    state: &AppState,
    tenant_id: &str,
    pool_id: &str,
) -> Result<(), Error> {
    let pool = runtime_cloud_store::capacity::find_pool(&state.db, tenant_id, pool_id).await?;
    match pool {
        None => Err(Error::Unprocessable(format!(
            "poolId: no worker pool `{pool_id}` in this tenant"
        ))),
        Some(pool) if pool.state != runtime_cloud_models::capacity::PoolState::Active => Err(
            Error::Unprocessable(format!("poolId: worker pool `{pool_id}` is {}", pool.state)),
        ),
        Some(_) => Ok(()),
    }
}

fn already_exists(environment_id: &str) -> Error {
    Error::Conflict(format!("environment `{environment_id}` already exists"))
}

/// Registers an environment in the caller's tenant.
#[utoipa::path(operation_id = "registerEnvironment", post, path = "/factory/environments", tag = "environments",
    security(("bearer" = ["factory.provisioning.apply"])),
    request_body = RegisterEnvironment,
    responses(
        (status = 201, description = "Registered", body = Environment),
        Problems<400>, Problems<401>, Problems<403>, Problems<409>, Problems<413>, Problems<415>, Problems<422>, Problems<500>,
    ))]
async fn register(
    State(state): State<AppState>,
    auth: Scoped<ProvisioningApply>,
    Json(body): Json<RegisterEnvironment>,
) -> Result<(StatusCode, axum::Json<Environment>), Error> {
    check_id("environmentId", &body.environment_id)?;
    check_id("projectId", &body.project_id)?;
    body.target.validate().map_err(Error::Unprocessable)?;
    runtime_cloud_models::environments::check_labels(&body.labels).map_err(Error::Unprocessable)?;
    if let Some(customer) = &body.customer_tenant_id {
        check_id("customerTenantId", customer)?;
    }
    if let Some(pool_id) = &body.pool_id {
        check_pool(&state, auth.tenant(), pool_id).await?;
    }
    let ephemeral = body.ttl.is_some() || body.expires_at.is_some();
    if let Some(why) = ephemeral
        .then(|| runtime_cloud_models::lifetime::ephemeral_refused(body.class))
        .flatten()
    {
        return Err(Error::Unprocessable(why));
    }
    let expires_at =
        super::lifetimes::expiry(&state, auth.tenant(), body.ttl.as_deref(), body.expires_at)
            .await?;
    if environments::find(&state.db, auth.tenant(), &body.environment_id)
        .await?
        .is_some()
    {
        return Err(already_exists(&body.environment_id));
    }
    let new = NewEnvironment {
        tenant_id: auth.tenant().to_owned(),
        environment_id: body.environment_id.clone(),
        project_id: body.project_id,
        class: body.class,
        target: body.target,
        mode: body.mode,
        labels: body.labels,
        customer_tenant_id: body.customer_tenant_id,
        pool_id: body.pool_id,
        expires_at,
    };
    let env = match environments::register(&state.db, new).await {
        Ok(env) => env,
        // Another request registered it since the check above.
        Err(runtime_cloud_store::Error::Duplicate { .. }) => {
            return Err(already_exists(&body.environment_id));
        }
        Err(e) => return Err(e.into()),
    };
    watch_cluster(&state, &env).await;
    super::lifetimes::start_lifetime(&state, &env).await;
    Ok((StatusCode::CREATED, axum::Json(env)))
}

/// Starts the watch of the cluster `env` is observed on, unless one runs (or the clusters are
/// not watched). A start that fails is logged: every worker starts the clusters' watches as it
/// starts, and the sweep observes the environment meanwhile.
async fn watch_cluster(state: &AppState, env: &Environment) {
    let ObserverTarget::Kubernetes(ns) = &env.target.observer else {
        return;
    };
    if !state.kubernetes_watch {
        return;
    }
    let cluster = ns.cluster();
    let started = runtime_cloud_temporal::cluster_watches::start(
        &state.temporal,
        &state.task_queue,
        cluster.clone(),
    );
    if let Err(e) = runtime_cloud_temporal::in_current_span(started).await {
        tracing::warn!(cluster = %cluster.id(), error = %e, "cannot start the cluster's watch");
    }
}

/// The caller's environments, by id, a page at a time.
#[utoipa::path(operation_id = "listEnvironments", get, path = "/factory/environments", tag = "environments",
    security(("bearer" = ["factory.provisioning.read"])),
    params(Page),
    responses(
        (status = 200, description = "A page of the tenant's environments", body = Paged<Environment>),
        Problems<400>, Problems<401>, Problems<403>, Problems<500>,
    ))]
async fn list(
    State(state): State<AppState>,
    auth: Scoped<ProvisioningRead>,
    Query(page): Query<Page>,
) -> Result<axum::Json<Paged<Environment>>, Error> {
    let (rows, limit) = page.rows()?;
    let items = environments::list(&state.db, auth.tenant(), &rows).await?;
    Ok(axum::Json(Paged::from_rows(
        items,
        limit,
        |e: &Environment| &e.environment_id,
    )))
}

/// One environment of the caller's, with its target.
#[utoipa::path(operation_id = "getEnvironment", get, path = "/factory/environments/{environmentId}", tag = "environments",
    security(("bearer" = ["factory.provisioning.read"])),
    params(("environmentId" = String, Path, description = "The environment id")),
    responses(
        (status = 200, description = "The environment", body = Environment),
        Problems<401>, Problems<403>, Problems<404>, Problems<500>,
    ))]
async fn read(
    State(state): State<AppState>,
    auth: Scoped<ProvisioningRead>,
    Path(environment_id): Path<String>,
) -> Result<axum::Json<Environment>, Error> {
    Ok(axum::Json(
        require_environment(&state.db, auth.tenant(), &environment_id).await?,
    ))
}

/// Moves an environment to another target (runner, observer). Needs the `Operator` or
/// `PlatformAdmin` role; recorded as an `EnvironmentTargetChanged` event naming who did it.
/// Runs already started keep the target they planned with.
#[utoipa::path(operation_id = "changeEnvironmentTarget", put, path = "/factory/environments/{environmentId}/target", tag = "environments",
    security(("bearer" = ["factory.provisioning.apply"])),
    params(("environmentId" = String, Path, description = "The environment id")),
    request_body = Target,
    responses(
        (status = 200, description = "The environment with its new target", body = Environment),
        Problems<400>, Problems<401>, Problems<403>, Problems<404>, Problems<413>, Problems<415>, Problems<422>, Problems<500>,
    ))]
#[tracing::instrument(skip_all, fields(tenant_id = %auth.tenant(), environment_id = %environment_id))]
async fn change_target(
    State(state): State<AppState>,
    auth: Scoped<ProvisioningApply>,
    Path(environment_id): Path<String>,
    Json(target): Json<Target>,
) -> Result<axum::Json<Environment>, Error> {
    auth.require_role(PRODUCTION_DECIDERS)?;
    target.validate().map_err(Error::Unprocessable)?;
    require_active_environment(&state.db, auth.tenant(), &environment_id).await?;
    let env = environments::change_target(
        &state.db,
        auth.tenant(),
        &environment_id,
        target,
        auth.subject(),
    )
    .await?;
    tracing::info!(
        runner = env.target.runner_kind(),
        "environment target changed"
    );
    watch_cluster(&state, &env).await;
    Ok(axum::Json(env))
}
