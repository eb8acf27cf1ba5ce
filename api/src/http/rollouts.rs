//! `/fleet/rollouts`: a release across a selection of instances, in waves that halt on their
//! own (workflow `fleet-rollout/{rolloutId}`; the rules in `models::rollouts`).

use super::pagination::{Page, Paged};
use crate::auth::{FleetOperate, MetaRead, Scoped};
use crate::json::Json;
use crate::openapi::Problems;
use crate::query::Query;
use crate::{AppState, Error};
use axum::extract::{Path, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use runtime_cloud_models::EnvironmentClass;
use runtime_cloud_models::rollouts::{
    Member, RolloutInput, RolloutState, WaveStrategy, plan_waves,
};
use runtime_cloud_store::rollouts::{self, Rollout};
use runtime_cloud_workflows::FleetRollout;
use runtime_cloud_workflows::fleet_rollout::Command;
use runtime_cloud_workflows::ids::rollout_workflow_id;
use serde::Deserialize;
use std::collections::BTreeMap;
use temporalio_client::{WorkflowIdConflictPolicy, WorkflowSignalOptions, WorkflowStartOptions};
use utoipa::ToSchema;
use utoipa_axum::{router::OpenApiRouter, routes};

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(list, start))
        .routes(routes!(read))
        .routes(routes!(breach))
        .routes(routes!(resume))
        .routes(routes!(skip))
        .routes(routes!(abort))
        .routes(routes!(roll_back))
}

/// `POST /fleet/rollouts`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct StartRollout {
    /// Only this product's instances.
    product_id: Option<String>,
    /// Only this class's instances.
    class: Option<EnvironmentClass>,
    /// Only these instances.
    environment_ids: Option<Vec<String>>,
    /// Only instances with every one of these labels (`{"region": "eu"}`).
    #[serde(default)]
    #[schema(value_type = std::collections::BTreeMap<String, String>)]
    labels: runtime_cloud_models::environments::Labels,
    /// The release: workload → version. Each instance's next specification is its current one
    /// with these versions.
    versions: BTreeMap<String, String>,
    release_id: Option<String>,
    /// Canary and steps; `{canary: 1, steps: [25 %, 50 %, 100 %]}` when absent.
    #[serde(default)]
    strategy: WaveStrategy,
    /// Failed runs a wave tolerates (0 when absent).
    #[serde(default)]
    failure_budget: usize,
    /// How long an instance may take to converge once its wave started (600 s when absent).
    converge_deadline_seconds: Option<u64>,
    /// How long a converged wave bakes before the next (60 s when absent).
    bake_seconds: Option<u64>,
    /// An SLO query read from Prometheus every few seconds while each wave converges and
    /// bakes: `{"query": "max(error_ratio{environment=~\"$environments\"})", "threshold":
    /// 0.05}`; `$environments` stands for the instances moved so far. Needs
    /// `RUNTIME_CLOUD_PROMETHEUS_URL`.
    slo: Option<runtime_cloud_models::rollouts::SloQuery>,
}

/// Starts a rollout over the selected instances: non-production waves first (a canary, then
/// the steps), production waves last (each production run waits for its approval, verified
/// like any production apply). A release with a quarantined version is refused (409).
#[utoipa::path(operation_id = "startRollout", post, path = "/fleet/rollouts", tag = "fleet",
    security(("bearer" = ["factory.fleet.operate"])),
    request_body = StartRollout,
    responses(
        (status = 202, description = "Started; `Location` names it", body = Rollout,
            headers(("Location" = String, description = "The rollout's URL"))),
        Problems<400>, Problems<401>, Problems<403>, Problems<409>, Problems<413>, Problems<415>, Problems<422>, Problems<500>, Problems<503>,
    ))]
#[tracing::instrument(skip_all, fields(tenant_id = %auth.tenant()))]
async fn start(
    State(state): State<AppState>,
    auth: Scoped<FleetOperate>,
    Json(body): Json<StartRollout>,
) -> Result<Response, Error> {
    if body.versions.is_empty() {
        return Err(Error::Unprocessable(
            "versions must name at least one workload and its version".into(),
        ));
    }
    let members: Vec<Member> = runtime_cloud_store::environments::all(&state.db, auth.tenant())
        .await?
        .into_iter()
        .filter(|e| body.product_id.as_ref().is_none_or(|p| *p == e.project_id))
        .filter(|e| body.class.is_none_or(|c| c == e.class))
        .filter(|e| runtime_cloud_models::environments::selects(&body.labels, &e.labels))
        .filter(|e| {
            body.environment_ids
                .as_ref()
                .is_none_or(|ids| ids.contains(&e.environment_id))
        })
        .map(|e| Member {
            production: e.production(),
            environment_id: e.environment_id,
        })
        .collect();
    if let Some(slo) = &body.slo {
        slo.check().map_err(Error::Unprocessable)?;
        if !state.slo_queries {
            return Err(Error::Unprocessable(
                "no SLO query service is configured (RUNTIME_CLOUD_PROMETHEUS_URL): report \
                 breaches with POST /fleet/rollouts/{rolloutId}/breach instead"
                    .into(),
            ));
        }
    }
    if members.is_empty() {
        return Err(Error::Unprocessable(
            "the selection names no instance of the tenant".into(),
        ));
    }
    // Each instance's run would be refused by its gate: refuse the rollout instead, and say
    // why.
    let in_force = runtime_cloud_store::quarantines::in_force(&state.db, auth.tenant()).await?;
    let hits = runtime_cloud_models::quarantine::in_release(&body.versions, &in_force);
    if !hits.is_empty() {
        return Err(Error::Conflict(format!(
            "{}; lift the quarantine (POST /factory/quarantines/{{quarantineId}}/lift) to roll \
             it out",
            runtime_cloud_models::quarantine::refusal(&hits)
        )));
    }
    let input = RolloutInput {
        rollout_id: uuid::Uuid::now_v7().to_string(),
        tenant_id: auth.tenant().to_owned(),
        waves: plan_waves(&members, &body.strategy),
        versions: body.versions,
        release_id: body.release_id,
        failure_budget: body.failure_budget,
        converge_deadline_secs: body.converge_deadline_seconds.unwrap_or(600),
        bake_secs: body.bake_seconds.unwrap_or(60),
        slo: body.slo,
    };
    let rollout = rollouts::create(&state.db, &input, auth.subject()).await?;
    let opts = WorkflowStartOptions::new(
        state.task_queue.clone(),
        rollout_workflow_id(&input.rollout_id),
    )
    .id_conflict_policy(WorkflowIdConflictPolicy::UseExisting)
    .build();
    if let Err(e) = state
        .temporal
        .start_workflow(FleetRollout::run, input.clone(), opts)
        .await
    {
        tracing::error!(error = %e, "cannot start the rollout");
        // Nothing half-written: without its workflow the rollout must not exist.
        let _ = rollouts::delete(&state.db, &input.rollout_id).await;
        return Err(Error::Unavailable(
            "the workflow service is unavailable; retry later".into(),
        ));
    }
    tracing::info!(rollout_id = %input.rollout_id, waves = input.waves.len(), "fleet rollout started");
    let location = format!("/fleet/rollouts/{}", input.rollout_id);
    Ok((
        StatusCode::ACCEPTED,
        [(header::LOCATION, location)],
        axum::Json(rollout),
    )
        .into_response())
}

async fn find(state: &AppState, tenant: &str, id: &str) -> Result<Rollout, Error> {
    rollouts::find(&state.db, tenant, id)
        .await?
        .ok_or_else(|| Error::NotFound(format!("rollout `{id}` not found")))
}

/// One rollout: its waves, instances with their runs, state and halt.
#[utoipa::path(operation_id = "getRollout", get, path = "/fleet/rollouts/{rolloutId}", tag = "fleet",
    security(("bearer" = ["factory.meta.read"])),
    params(("rolloutId" = String, Path, description = "The rollout id")),
    responses(
        (status = 200, description = "The rollout", body = Rollout),
        Problems<401>, Problems<403>, Problems<404>, Problems<500>,
    ))]
async fn read(
    State(state): State<AppState>,
    auth: Scoped<MetaRead>,
    Path(id): Path<String>,
) -> Result<axum::Json<Rollout>, Error> {
    Ok(axum::Json(find(&state, auth.tenant(), &id).await?))
}

/// The tenant's rollouts, newest first, a page at a time.
#[utoipa::path(operation_id = "listRollouts", get, path = "/fleet/rollouts", tag = "fleet",
    security(("bearer" = ["factory.meta.read"])),
    params(Page),
    responses(
        (status = 200, description = "A page of rollouts", body = Paged<Rollout>),
        Problems<400>, Problems<401>, Problems<403>, Problems<500>,
    ))]
async fn list(
    State(state): State<AppState>,
    auth: Scoped<MetaRead>,
    Query(page): Query<Page>,
) -> Result<axum::Json<Paged<Rollout>>, Error> {
    let (rows, limit) = page.rows()?;
    let items = rollouts::list(&state.db, auth.tenant(), &rows).await?;
    Ok(axum::Json(Paged::from_rows(items, limit, |r: &Rollout| {
        &r.rollout_id
    })))
}

/// `{"reason": "…"}`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct BreachBody {
    reason: String,
}

/// Reports an SLO breach to a running rollout (the embedded SloGuard): the wave under way, or
/// its bake, halts.
#[utoipa::path(operation_id = "reportRolloutBreach", post, path = "/fleet/rollouts/{rolloutId}/breach", tag = "fleet",
    security(("bearer" = ["factory.fleet.operate"])),
    params(("rolloutId" = String, Path, description = "The rollout id")),
    request_body = BreachBody,
    responses(
        (status = 202, description = "Signalled", body = Rollout),
        Problems<400>, Problems<401>, Problems<403>, Problems<404>, Problems<409>, Problems<413>, Problems<415>, Problems<422>, Problems<500>, Problems<503>,
    ))]
async fn breach(
    State(state): State<AppState>,
    auth: Scoped<FleetOperate>,
    Path(id): Path<String>,
    Json(body): Json<BreachBody>,
) -> Result<(StatusCode, axum::Json<Rollout>), Error> {
    if body.reason.trim().is_empty() {
        return Err(Error::Unprocessable("reason must say what breached".into()));
    }
    let rollout = find(&state, auth.tenant(), &id).await?;
    if rollout.state != RolloutState::Running {
        return Err(Error::Conflict(format!(
            "rollout `{id}` is {}",
            rollout.state
        )));
    }
    let handle = state
        .temporal
        .get_workflow_handle::<FleetRollout>(rollout_workflow_id(&id));
    handle
        .signal(
            FleetRollout::breach,
            body.reason,
            WorkflowSignalOptions::default(),
        )
        .await
        .map_err(Error::from_signal(format!("rollout `{id}`")))?;
    Ok((StatusCode::ACCEPTED, axum::Json(rollout)))
}

/// Sends `command` to a halted rollout.
async fn command(
    state: &AppState,
    tenant: &str,
    id: &str,
    command: Command,
) -> Result<(StatusCode, axum::Json<Rollout>), Error> {
    let rollout = find(state, tenant, id).await?;
    if rollout.state != RolloutState::Halted {
        return Err(Error::Conflict(format!(
            "rollout `{id}` is {}, not Halted",
            rollout.state
        )));
    }
    if let Command::Skip { environment_id } = &command
        && !rollout
            .status
            .instances
            .iter()
            .any(|i| &i.environment_id == environment_id)
    {
        return Err(Error::Unprocessable(format!(
            "`{environment_id}` is not an instance of rollout `{id}`"
        )));
    }
    let handle = state
        .temporal
        .get_workflow_handle::<FleetRollout>(rollout_workflow_id(id));
    handle
        .signal(
            FleetRollout::command,
            command,
            WorkflowSignalOptions::default(),
        )
        .await
        .map_err(Error::from_signal(format!("rollout `{id}`")))?;
    Ok((StatusCode::ACCEPTED, axum::Json(rollout)))
}

/// Resumes a halted rollout: its halted wave is followed again (its deadline anew).
#[utoipa::path(operation_id = "resumeRollout", post, path = "/fleet/rollouts/{rolloutId}/resume", tag = "fleet",
    security(("bearer" = ["factory.fleet.operate"])),
    params(("rolloutId" = String, Path, description = "The rollout id")),
    responses(
        (status = 202, description = "Signalled", body = Rollout),
        Problems<401>, Problems<403>, Problems<404>, Problems<409>, Problems<500>, Problems<503>,
    ))]
async fn resume(
    State(state): State<AppState>,
    auth: Scoped<FleetOperate>,
    Path(id): Path<String>,
) -> Result<(StatusCode, axum::Json<Rollout>), Error> {
    command(&state, auth.tenant(), &id, Command::Resume).await
}

/// `{"environmentId": "…"}`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct SkipBody {
    environment_id: String,
}

/// Leaves an instance out of a halted rollout and goes on with the wave.
#[utoipa::path(operation_id = "skipRolloutInstance", post, path = "/fleet/rollouts/{rolloutId}/skip", tag = "fleet",
    security(("bearer" = ["factory.fleet.operate"])),
    params(("rolloutId" = String, Path, description = "The rollout id")),
    request_body = SkipBody,
    responses(
        (status = 202, description = "Signalled", body = Rollout),
        Problems<400>, Problems<401>, Problems<403>, Problems<404>, Problems<409>, Problems<413>, Problems<415>, Problems<422>, Problems<500>, Problems<503>,
    ))]
async fn skip(
    State(state): State<AppState>,
    auth: Scoped<FleetOperate>,
    Path(id): Path<String>,
    Json(body): Json<SkipBody>,
) -> Result<(StatusCode, axum::Json<Rollout>), Error> {
    let skip = Command::Skip {
        environment_id: body.environment_id,
    };
    command(&state, auth.tenant(), &id, skip).await
}

/// Ends a halted rollout where it is (runs in flight go on).
#[utoipa::path(operation_id = "abortRollout", post, path = "/fleet/rollouts/{rolloutId}/abort", tag = "fleet",
    security(("bearer" = ["factory.fleet.operate"])),
    params(("rolloutId" = String, Path, description = "The rollout id")),
    responses(
        (status = 202, description = "Signalled", body = Rollout),
        Problems<401>, Problems<403>, Problems<404>, Problems<409>, Problems<500>, Problems<503>,
    ))]
async fn abort(
    State(state): State<AppState>,
    auth: Scoped<FleetOperate>,
    Path(id): Path<String>,
) -> Result<(StatusCode, axum::Json<Rollout>), Error> {
    command(&state, auth.tenant(), &id, Command::Abort).await
}

/// Rolls a halted rollout back: every instance it started (and did not skip) is run back to
/// the specification it ran before (`RollingBack`, then `RolledBack`).
#[utoipa::path(operation_id = "rollBackRollout", post, path = "/fleet/rollouts/{rolloutId}/rollback", tag = "fleet",
    security(("bearer" = ["factory.fleet.operate"])),
    params(("rolloutId" = String, Path, description = "The rollout id")),
    responses(
        (status = 202, description = "Signalled", body = Rollout),
        Problems<401>, Problems<403>, Problems<404>, Problems<409>, Problems<500>, Problems<503>,
    ))]
async fn roll_back(
    State(state): State<AppState>,
    auth: Scoped<FleetOperate>,
    Path(id): Path<String>,
) -> Result<(StatusCode, axum::Json<Rollout>), Error> {
    command(&state, auth.tenant(), &id, Command::RollBack).await
}
