//! `/factory/environments/{environmentId}/inventory|drift|observe|mode`: what actually runs,
//! and how far the product goes on its own when it drifts.

use super::pagination::{Page, Paged};
use crate::auth::{Auth, RuntimeOperate, RuntimeRead, Scoped};
use crate::json::Json;
use crate::openapi::Problems;
use crate::query::Query;
use crate::tenancy::{require_active_environment, require_environment};
use crate::{AppState, Error};
use axum::extract::{Path, State};
use axum::http::StatusCode;
use chrono::Utc;
use runtime_cloud_models::drift::DriftKind;
use runtime_cloud_models::environments::EnvironmentMode;
use runtime_cloud_models::observation::ObservedWorkload;
use runtime_cloud_store::environments::Environment;
use runtime_cloud_store::findings::{self, Finding};
use runtime_cloud_store::inventory;
use runtime_cloud_workflows::ObserveEnvironment;
use runtime_cloud_workflows::ids::observe_workflow_id;
use runtime_cloud_workflows::observe_environment::ObserveInput;
use runtime_cloud_workflows::search_attributes::{ENVIRONMENT_ID, TENANT_ID};
use serde::{Deserialize, Serialize};
use temporalio_client::{WorkflowIdConflictPolicy, WorkflowStartOptions};
use temporalio_common::search_attributes::SearchAttributes;
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::{router::OpenApiRouter, routes};

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(inventory))
        .routes(routes!(drift))
        .routes(routes!(observe))
        .routes(routes!(change_mode))
}

async fn environment(state: &AppState, auth: &Auth, id: &str) -> Result<Environment, Error> {
    require_environment(&state.db, auth.tenant(), id).await
}

/// The observed state of an environment.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct InventoryView {
    pub environment_id: String,
    pub tenant_id: String,
    pub project_id: String,
    /// What the target reports it runs; references only, never secret values.
    pub workloads: Vec<ObservedWorkload>,
    pub current_release_id: Option<String>,
    pub specification_version: Option<i32>,
    /// Null until the first successful observation.
    pub observed_at: Option<chrono::DateTime<Utc>>,
    /// True when the last observation failed or none is newer than `StalenessMinutes`.
    pub stale: bool,
    pub last_error: Option<String>,
    /// What it costs an hour at the tenant's prices, from its last observation (`GET
    /// /fleet/costs` for many); null without a price table or before a first observation.
    pub cost: Option<runtime_cloud_models::cost::Cost>,
}

/// What the environment was last observed to run, and whether that is stale.
#[utoipa::path(operation_id = "getInventory", get, path = "/factory/environments/{environmentId}/inventory", tag = "inventory",
    security(("bearer" = ["factory.runtime.read"])),
    params(("environmentId" = String, Path, description = "The environment id")),
    responses(
        (status = 200, description = "The inventory (empty and stale before the first observation)", body = InventoryView),
        Problems<401>, Problems<403>, Problems<404>, Problems<500>,
    ))]
async fn inventory(
    State(state): State<AppState>,
    auth: Scoped<RuntimeRead>,
    Path(environment_id): Path<String>,
) -> Result<axum::Json<InventoryView>, Error> {
    // One query when the environment has been observed (the common case): an inventory row
    // exists only for a registered environment, and environments are never removed.
    let row = inventory::find(&state.db, auth.tenant(), &environment_id).await?;
    let view = match row {
        None => {
            let env = environment(&state, &auth, &environment_id).await?;
            InventoryView {
                environment_id,
                tenant_id: env.tenant_id,
                project_id: env.project_id,
                workloads: Vec::new(),
                current_release_id: None,
                specification_version: None,
                observed_at: None,
                stale: true,
                last_error: None,
                cost: None,
            }
        }
        Some(i) => InventoryView {
            stale: state.inventory.is_stale(i.stale, i.observed_at, Utc::now()),
            environment_id: i.environment_id,
            tenant_id: i.tenant_id,
            project_id: i.project_id,
            workloads: i.workloads,
            current_release_id: i.current_release_id,
            specification_version: i.specification_version,
            observed_at: i.observed_at,
            last_error: i.last_error,
            cost: i.cost,
        },
    };
    Ok(axum::Json(view))
}

/// `?state=open|suppressed|resolved&kind=…`.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
struct DriftQuery {
    /// `open`, `suppressed` (open, and a drift rule suppresses it) or `resolved`.
    state: Option<String>,
    /// A drift kind such as `replica` or `version`.
    kind: Option<String>,
    /// The `nextCursor` of the previous page.
    cursor: Option<String>,
    /// 1–200, default 50.
    #[param(minimum = 1, maximum = 200)]
    limit: Option<u64>,
}

/// The environment's drift findings, newest first, a page at a time.
#[utoipa::path(operation_id = "listDrift", get, path = "/factory/environments/{environmentId}/drift", tag = "inventory",
    security(("bearer" = ["factory.runtime.read"])),
    params(("environmentId" = String, Path, description = "The environment id"), DriftQuery),
    responses(
        (status = 200, description = "A page of findings", body = Paged<Finding>),
        Problems<400>, Problems<401>, Problems<403>, Problems<404>, Problems<500>,
    ))]
async fn drift(
    State(state): State<AppState>,
    auth: Scoped<RuntimeRead>,
    Path(environment_id): Path<String>,
    Query(q): Query<DriftQuery>,
) -> Result<axum::Json<Paged<Finding>>, Error> {
    environment(&state, &auth, &environment_id).await?;
    let page = Page {
        cursor: q.cursor,
        limit: q.limit,
    };
    let (rows, limit) = page.rows()?;
    let status = match q.state.as_deref() {
        None => None,
        Some("open") => Some(findings::Status::Open),
        Some("suppressed") => Some(findings::Status::Suppressed),
        Some("resolved") => Some(findings::Status::Resolved),
        Some(other) => {
            return Err(Error::BadRequest(format!(
                "state must be `open`, `suppressed` or `resolved`, not `{other}`"
            )));
        }
    };
    let kind = crate::query::optional::<DriftKind>(q.kind.as_deref())?;
    let items = findings::list(
        &state.db,
        auth.tenant(),
        &environment_id,
        status,
        kind,
        &rows,
    )
    .await?;
    Ok(axum::Json(Paged::from_rows(items, limit, |f: &Finding| {
        &f.finding_id
    })))
}

/// An observation started for the environment.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ObservationStarted {
    pub environment_id: String,
    /// `observe/{tenant}/{environment}/manual-{id}`.
    pub workflow_id: String,
}

/// Observes the environment now (workflow `observe/…`): inventory, drift findings and, when
/// anything drifted, a reconciliation proposal.
#[utoipa::path(operation_id = "observeEnvironment", post, path = "/factory/environments/{environmentId}/observe", tag = "inventory",
    security(("bearer" = ["factory.runtime.operate"])),
    params(("environmentId" = String, Path, description = "The environment id")),
    responses(
        (status = 202, description = "Started", body = ObservationStarted),
        Problems<401>, Problems<403>, Problems<404>, Problems<500>, Problems<503>,
    ))]
#[tracing::instrument(skip_all, fields(tenant_id = %auth.tenant(), environment_id = %environment_id))]
async fn observe(
    State(state): State<AppState>,
    auth: Scoped<RuntimeOperate>,
    Path(environment_id): Path<String>,
) -> Result<(StatusCode, axum::Json<ObservationStarted>), Error> {
    require_active_environment(&state.db, auth.tenant(), &environment_id).await?;
    let workflow_id = start_observation(&state, auth.tenant(), &environment_id).await?;
    Ok((
        StatusCode::ACCEPTED,
        axum::Json(ObservationStarted {
            environment_id,
            workflow_id,
        }),
    ))
}

/// Starts an observation of the environment now; returns its workflow id.
async fn start_observation(
    state: &AppState,
    tenant: &str,
    environment_id: &str,
) -> Result<String, Error> {
    // Every request observes anew: an operator asking twice wants two looks.
    let window = format!("manual-{}", uuid::Uuid::now_v7());
    let id = observe_workflow_id(tenant, environment_id, &window);
    let input = ObserveInput {
        tenant_id: tenant.to_owned(),
        environment_id: environment_id.to_owned(),
    };
    let opts = WorkflowStartOptions::new(state.task_queue.clone(), id.clone())
        .id_conflict_policy(WorkflowIdConflictPolicy::UseExisting)
        .search_attributes(SearchAttributes::new([
            TENANT_ID.value_set(tenant.to_owned()),
            ENVIRONMENT_ID.value_set(environment_id.to_owned()),
        ]))
        .build();
    runtime_cloud_temporal::in_current_span(state.temporal.start_workflow(
        ObserveEnvironment::run,
        input,
        opts,
    ))
    .await
    .map_err(|e| {
        tracing::error!(error = %e, "cannot start observation");
        Error::Unavailable("the workflow service is unavailable; retry later".into())
    })?;
    Ok(id)
}

/// `PUT /factory/environments/{environmentId}/mode`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct ChangeMode {
    /// `observe`, `propose` or `auto`.
    mode: EnvironmentMode,
}

/// Sets how far the product goes on its own when the environment drifts: `observe` (findings
/// and their events, no proposal), `propose` (an operator decides every proposal) or `auto`
/// (non-destructive proposals outside production accepted where the option and the policy
/// allow). Recorded as `EnvironmentModeChanged`. Leaving `observe` observes the environment at
/// once, so its open findings are grouped into a proposal.
#[utoipa::path(operation_id = "changeEnvironmentMode", put, path = "/factory/environments/{environmentId}/mode", tag = "inventory",
    security(("bearer" = ["factory.runtime.operate"])),
    params(("environmentId" = String, Path, description = "The environment id")),
    request_body = ChangeMode,
    responses(
        (status = 200, description = "The environment with its mode", body = Environment),
        Problems<400>, Problems<401>, Problems<403>, Problems<404>, Problems<413>, Problems<415>, Problems<422>, Problems<500>, Problems<503>,
    ))]
#[tracing::instrument(skip_all, fields(tenant_id = %auth.tenant(), environment_id = %environment_id))]
async fn change_mode(
    State(state): State<AppState>,
    auth: Scoped<RuntimeOperate>,
    Path(environment_id): Path<String>,
    Json(body): Json<ChangeMode>,
) -> Result<axum::Json<Environment>, Error> {
    require_active_environment(&state.db, auth.tenant(), &environment_id).await?;
    let (before, after) = runtime_cloud_store::environments::change_mode(
        &state.db,
        auth.tenant(),
        &environment_id,
        body.mode,
        auth.subject(),
    )
    .await?;
    tracing::info!(before = %before.mode, after = %after.mode, "environment mode changed");
    if !before.mode.proposes() && after.mode.proposes() {
        start_observation(&state, auth.tenant(), &environment_id).await?;
    }
    Ok(axum::Json(after))
}
