//! `/factory/capacity`: the tenant's worker pools, its projects' quotas and the capacity
//! leases its runs hold (spec 003, ExecutionCapacityService; the rules in `models::capacity`).

use super::pagination::{Page, Paged};
use crate::auth::{CapacityManage, CapacityRead, QUOTA_SETTERS, Scoped};
use crate::json::Json;
use crate::openapi::Problems;
use crate::query::Query;
use crate::{AppState, Error};
use axum::extract::{Path, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use runtime_cloud_models::capacity::{LeaseState, PoolKind, PoolState, QuotaLimits};
use runtime_cloud_models::validation::check_id;
use runtime_cloud_store::capacity::{self, Lease, NewPool, Pool, Quota};
use serde::Deserialize;
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::{router::OpenApiRouter, routes};

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(list_pools, create_pool))
        .routes(routes!(read_pool))
        .routes(routes!(set_pool_state))
        .routes(routes!(bind_environment))
        .routes(routes!(list_quotas))
        .routes(routes!(read_quota, set_quota))
        .routes(routes!(list_leases))
}

/// `POST /factory/capacity/pools`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct CreatePool {
    /// 1–63 characters of `[A-Za-z0-9._-]`, unique across tenants (it names a task queue).
    pool_id: String,
    /// `shared` or `dedicated` (one tenant's runs only).
    kind: PoolKind,
    /// The boundary its workers run in (`production`, `customer-isolated`, `shared`).
    security_boundary: String,
    region: String,
    node_profile: String,
    #[serde(default)]
    min_size: u32,
    max_size: u32,
}

/// Creates a worker pool of the tenant.
#[utoipa::path(operation_id = "createWorkerPool", post, path = "/factory/capacity/pools", tag = "capacity",
    security(("bearer" = ["factory.capacity.manage"])),
    request_body = CreatePool,
    responses(
        (status = 201, description = "Created; `Location` names it", body = Pool,
            headers(("Location" = String, description = "The pool's URL"))),
        Problems<400>, Problems<401>, Problems<403>, Problems<409>, Problems<413>, Problems<415>, Problems<422>, Problems<500>,
    ))]
async fn create_pool(
    State(state): State<AppState>,
    auth: Scoped<CapacityManage>,
    Json(body): Json<CreatePool>,
) -> Result<Response, Error> {
    check_id("poolId", &body.pool_id)?;
    for (name, value) in [
        ("securityBoundary", &body.security_boundary),
        ("region", &body.region),
        ("nodeProfile", &body.node_profile),
    ] {
        if value.trim().is_empty() {
            return Err(Error::Unprocessable(format!("{name} must not be empty")));
        }
    }
    if body.max_size == 0 || body.min_size > body.max_size {
        return Err(Error::Unprocessable(
            "maxSize must be at least 1 and at least minSize".into(),
        ));
    }
    let new = NewPool {
        pool_id: body.pool_id.clone(),
        tenant_id: auth.tenant().to_owned(),
        kind: body.kind,
        security_boundary: body.security_boundary,
        region: body.region,
        node_profile: body.node_profile,
        min_size: body.min_size,
        max_size: body.max_size,
    };
    let pool = match capacity::create_pool(&state.db, new).await {
        Ok(pool) => pool,
        Err(runtime_cloud_store::Error::Duplicate { .. }) => {
            return Err(Error::Conflict(format!(
                "pool `{}` already exists",
                body.pool_id
            )));
        }
        Err(e) => return Err(e.into()),
    };
    let location = format!("/factory/capacity/pools/{}", pool.pool_id);
    Ok((
        StatusCode::CREATED,
        [(header::LOCATION, location)],
        axum::Json(pool),
    )
        .into_response())
}

/// A worker pool, with what Temporal says of its task queue.
#[derive(Debug, serde::Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
struct PoolView {
    #[serde(flatten)]
    pool: Pool,
    /// Workers polling the pool's task queue (seen in the last 90 s).
    current_size: u32,
    /// Plans and applies waiting for one of its workers.
    backlog: u64,
    /// Runs holding a lease in the pool over its workers' activity slots (0–1; 1 when work
    /// waits and no worker serves it).
    utilisation: f64,
}

/// `pool` with its size, backlog and utilisation read from Temporal now. Temporal not
/// answering is a 503: a size that is not read is not shown.
async fn with_load(state: &AppState, pool: Pool) -> Result<PoolView, Error> {
    let queue = runtime_cloud_temporal::pool_task_queue(&state.task_queue, &pool.pool_id);
    let load = runtime_cloud_temporal::pool_load(&state.temporal, &queue)
        .await
        .map_err(|e| {
            tracing::error!(error = %e, "cannot read the pool's task queue");
            Error::Unavailable("the workflow service is unavailable; retry later".into())
        })?;
    let granted = capacity::granted_in_pool(&state.db, &pool.tenant_id, &pool.pool_id).await?;
    Ok(PoolView {
        current_size: load.workers,
        backlog: load.backlog,
        utilisation: runtime_cloud_models::capacity::utilisation(
            granted,
            load.backlog,
            load.workers,
        ),
        pool,
    })
}

/// The tenant's worker pools, newest first, a page at a time.
#[utoipa::path(operation_id = "listWorkerPools", get, path = "/factory/capacity/pools", tag = "capacity",
    security(("bearer" = ["factory.capacity.read"])),
    params(Page),
    responses(
        (status = 200, description = "A page of pools", body = Paged<PoolView>),
        Problems<400>, Problems<401>, Problems<403>, Problems<500>, Problems<503>,
    ))]
async fn list_pools(
    State(state): State<AppState>,
    auth: Scoped<CapacityRead>,
    Query(page): Query<Page>,
) -> Result<axum::Json<Paged<PoolView>>, Error> {
    let (rows, limit) = page.rows()?;
    let items = capacity::pools(&state.db, auth.tenant(), &rows).await?;
    let paged = Paged::from_rows(items, limit, |p: &Pool| &p.id);
    let mut items = Vec::with_capacity(paged.items.len());
    for pool in paged.items {
        items.push(with_load(&state, pool).await?);
    }
    Ok(axum::Json(Paged {
        items,
        next_cursor: paged.next_cursor,
    }))
}

/// One worker pool of the tenant.
#[utoipa::path(operation_id = "getWorkerPool", get, path = "/factory/capacity/pools/{poolId}", tag = "capacity",
    security(("bearer" = ["factory.capacity.read"])),
    params(("poolId" = String, Path, description = "The pool id")),
    responses(
        (status = 200, description = "The pool", body = PoolView),
        Problems<401>, Problems<403>, Problems<404>, Problems<500>, Problems<503>,
    ))]
async fn read_pool(
    State(state): State<AppState>,
    auth: Scoped<CapacityRead>,
    Path(pool_id): Path<String>,
) -> Result<axum::Json<PoolView>, Error> {
    let pool = capacity::find_pool(&state.db, auth.tenant(), &pool_id)
        .await?
        .ok_or_else(|| Error::NotFound(format!("pool `{pool_id}`")))?;
    Ok(axum::Json(with_load(&state, pool).await?))
}

/// The tenant's recorded quotas, newest first, a page at a time (a project without one has
/// the default: `GET …/quotas/{projectId}`).
#[utoipa::path(operation_id = "listQuotas", get, path = "/factory/capacity/quotas", tag = "capacity",
    security(("bearer" = ["factory.capacity.read"])),
    params(Page),
    responses(
        (status = 200, description = "A page of quotas", body = Paged<Quota>),
        Problems<400>, Problems<401>, Problems<403>, Problems<500>,
    ))]
async fn list_quotas(
    State(state): State<AppState>,
    auth: Scoped<CapacityRead>,
    Query(page): Query<Page>,
) -> Result<axum::Json<Paged<Quota>>, Error> {
    let (rows, limit) = page.rows()?;
    let items = capacity::quotas(&state.db, auth.tenant(), &rows).await?;
    Ok(axum::Json(Paged::from_rows(items, limit, |q: &Quota| {
        q.quota_id.as_deref().unwrap_or_default()
    })))
}

/// The quota that applies to a project of the tenant: the recorded one, or the default
/// (`source: default`).
#[utoipa::path(operation_id = "getQuota", get, path = "/factory/capacity/quotas/{projectId}", tag = "capacity",
    security(("bearer" = ["factory.capacity.read"])),
    params(("projectId" = String, Path, description = "The project id")),
    responses(
        (status = 200, description = "The quota", body = Quota),
        Problems<400>, Problems<401>, Problems<403>, Problems<500>,
    ))]
async fn read_quota(
    State(state): State<AppState>,
    auth: Scoped<CapacityRead>,
    Path(project_id): Path<String>,
) -> Result<axum::Json<Quota>, Error> {
    check_id("projectId", &project_id)?;
    Ok(axum::Json(
        capacity::quota(&state.db, auth.tenant(), &project_id).await?,
    ))
}

/// `PUT /factory/capacity/quotas/{projectId}`: the limits, and where they come from.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct SetQuota {
    #[serde(flatten)]
    limits: QuotaLimits,
    /// Where the limits come from (`plan:enterprise`, a ticket); `manual` when absent.
    source: Option<String>,
}

/// Sets the quota of a project of the tenant; needs the `PlatformAdmin` role.
#[utoipa::path(operation_id = "setQuota", put, path = "/factory/capacity/quotas/{projectId}", tag = "capacity",
    security(("bearer" = ["factory.capacity.manage"])),
    params(("projectId" = String, Path, description = "The project id")),
    request_body = SetQuota,
    responses(
        (status = 200, description = "The quota as set", body = Quota),
        Problems<400>, Problems<401>, Problems<403>, Problems<413>, Problems<415>, Problems<422>, Problems<500>,
    ))]
async fn set_quota(
    State(state): State<AppState>,
    auth: Scoped<CapacityManage>,
    Path(project_id): Path<String>,
    Json(body): Json<SetQuota>,
) -> Result<axum::Json<Quota>, Error> {
    auth.require_role(QUOTA_SETTERS)?;
    check_id("projectId", &project_id)?;
    body.limits.check().map_err(Error::Unprocessable)?;
    let source = body.source.unwrap_or_else(|| "manual".into());
    if source.trim().is_empty() {
        return Err(Error::Unprocessable("source must not be empty".into()));
    }
    let quota = capacity::set_quota(
        &state.db,
        auth.tenant(),
        &project_id,
        &body.limits,
        &source,
        auth.subject(),
    )
    .await?;
    tracing::info!(project_id = %project_id, concurrent_runs = quota.limits.concurrent_runs, "quota set");
    // A raised quota lets deferred runs start now (their asks bring the new limit to the
    // project's semaphore); the starter admits them later should this fail.
    let admitted = runtime_cloud_temporal::admission::admit(
        &state.db,
        &state.temporal,
        &state.task_queue,
        auth.tenant(),
        &project_id,
    )
    .await;
    if let Err(e) = admitted {
        tracing::warn!(error = %e, project_id = %project_id, "deferred runs not admitted yet");
    }
    Ok(axum::Json(quota))
}

/// `PUT /factory/capacity/pools/{poolId}/state`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct SetPoolState {
    /// `active` (takes runs), `draining` (finishes what holds a lease, takes no new run) or
    /// `disabled` (takes nothing new).
    state: PoolState,
}

/// Sets a worker pool's state. Runs of its environments that have not taken their lease wait
/// (`waitingForCapacity`, held by the pool) until it is `active` again.
#[utoipa::path(operation_id = "setWorkerPoolState", put, path = "/factory/capacity/pools/{poolId}/state", tag = "capacity",
    security(("bearer" = ["factory.capacity.manage"])),
    params(("poolId" = String, Path, description = "The pool id")),
    request_body = SetPoolState,
    responses(
        (status = 200, description = "The pool in its new state", body = PoolView),
        Problems<400>, Problems<401>, Problems<403>, Problems<404>, Problems<413>, Problems<415>, Problems<422>, Problems<500>, Problems<503>,
    ))]
async fn set_pool_state(
    State(state): State<AppState>,
    auth: Scoped<CapacityManage>,
    Path(pool_id): Path<String>,
    Json(body): Json<SetPoolState>,
) -> Result<axum::Json<PoolView>, Error> {
    let pool = capacity::set_pool_state(&state.db, auth.tenant(), &pool_id, body.state)
        .await?
        .ok_or_else(|| Error::NotFound(format!("pool `{pool_id}`")))?;
    tracing::info!(pool_id = %pool_id, state = %body.state, "pool state set");
    Ok(axum::Json(with_load(&state, pool).await?))
}

/// `PUT /factory/environments/{environmentId}/pool`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct BindPool {
    /// A pool of the tenant that is `active`; null for the shared task queue.
    pool_id: Option<String>,
}

/// Binds an environment to a worker pool of the tenant (or back to the shared task queue):
/// its next runs plan and apply on the pool's workers. A run that already took its lease
/// keeps the pool it was given.
#[utoipa::path(operation_id = "bindEnvironmentPool", put, path = "/factory/environments/{environmentId}/pool", tag = "capacity",
    security(("bearer" = ["factory.capacity.manage"])),
    params(("environmentId" = String, Path, description = "The environment id")),
    request_body = BindPool,
    responses(
        (status = 200, description = "The environment with its pool", body = runtime_cloud_store::environments::Environment),
        Problems<400>, Problems<401>, Problems<403>, Problems<404>, Problems<413>, Problems<415>, Problems<422>, Problems<500>,
    ))]
async fn bind_environment(
    State(state): State<AppState>,
    auth: Scoped<CapacityManage>,
    Path(environment_id): Path<String>,
    Json(body): Json<BindPool>,
) -> Result<axum::Json<runtime_cloud_store::environments::Environment>, Error> {
    crate::tenancy::require_active_environment(&state.db, auth.tenant(), &environment_id).await?;
    if let Some(pool_id) = &body.pool_id {
        crate::http::environments::check_pool(&state, auth.tenant(), pool_id).await?;
    }
    let env = runtime_cloud_store::environments::bind_pool(
        &state.db,
        auth.tenant(),
        &environment_id,
        body.pool_id,
    )
    .await
    .map_err(|e| match e {
        runtime_cloud_store::Error::Missing { .. } => {
            Error::NotFound(format!("environment `{environment_id}`"))
        }
        e => e.into(),
    })?;
    tracing::info!(environment_id = %environment_id, pool_id = ?env.pool_id, "environment bound to pool");
    Ok(axum::Json(env))
}

/// `?state=&provisioningRunId=&cursor=&limit=`.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(rename_all = "camelCase")]
struct LeaseQuery {
    /// `waiting`, `granted`, `released` or `expired`.
    state: Option<String>,
    /// Only this run's.
    provisioning_run_id: Option<String>,
    cursor: Option<String>,
    limit: Option<u64>,
}

/// The tenant's capacity leases, newest first, a page at a time.
#[utoipa::path(operation_id = "listCapacityLeases", get, path = "/factory/capacity/leases", tag = "capacity",
    security(("bearer" = ["factory.capacity.read"])),
    params(LeaseQuery),
    responses(
        (status = 200, description = "A page of leases", body = Paged<Lease>),
        Problems<400>, Problems<401>, Problems<403>, Problems<500>,
    ))]
async fn list_leases(
    State(state): State<AppState>,
    auth: Scoped<CapacityRead>,
    Query(q): Query<LeaseQuery>,
) -> Result<axum::Json<Paged<Lease>>, Error> {
    let lease_state = crate::query::optional::<LeaseState>(q.state.as_deref())?;
    let page = Page {
        cursor: q.cursor,
        limit: q.limit,
    };
    let (rows, limit) = page.rows()?;
    let items = capacity::leases(
        &state.db,
        auth.tenant(),
        lease_state,
        q.provisioning_run_id.as_deref(),
        &rows,
    )
    .await?;
    Ok(axum::Json(Paged::from_rows(items, limit, |l: &Lease| {
        &l.lease_id
    })))
}
