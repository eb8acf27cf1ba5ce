//! `/factory/provisioning/runs`: plan, list, read, approve and cancel provisioning runs.
//!
//! Commands go to the run's workflow (`provisioning-run/{provisioningRunId}`); reads come from the
//! `provisioning_runs` read table, which every workflow transition updates.

use super::pagination::{Page, Paged};
use crate::auth::{PRODUCTION_DECIDERS, ProvisioningApply, ProvisioningRead, Scoped};
use crate::json::Json;
use crate::openapi::Problems;
use crate::query::Query;
use crate::tenancy::require_active_environment;
use crate::{AppState, Error};
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use runtime_cloud_models::EnvironmentClass;
use runtime_cloud_models::approvals::{ApprovalClaim, ApprovalSource};
use runtime_cloud_models::options::{RUN_START_IN_FLIGHT, RUN_START_TIMEOUT};
use runtime_cloud_models::quarantine::QuarantineOverride;
use runtime_cloud_models::{
    Approval, ApprovalDecision, ProvisioningKind, ProvisioningState, RunInput,
};
use runtime_cloud_models::{break_glass_refused, cancel_refused, decision_refused};
use runtime_cloud_store::approvals::{self, NewApproval};
use runtime_cloud_store::run_starts;
use runtime_cloud_store::runs::{self, NewRun, Run, RunFilter};
use runtime_cloud_store::specifications;
use runtime_cloud_workflows::ProvisioningRun;
use runtime_cloud_workflows::ids::run_workflow_id;
use runtime_cloud_workflows::provisioning_run::CancelRequest;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use temporalio_client::errors::WorkflowUpdateError;
use temporalio_client::{
    WorkflowDescribeOptions, WorkflowExecuteUpdateOptions, WorkflowSignalOptions,
};
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::{router::OpenApiRouter, routes};

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(list, plan))
        .routes(routes!(read))
        .routes(routes!(cancel))
        .routes(routes!(approve))
        .routes(routes!(break_glass))
}

/// `POST /factory/provisioning/runs`.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PlanProvisioning {
    pub environment_id: String,
    /// The latest version when absent.
    pub specification_version: Option<i32>,
    pub kind: ProvisioningKind,
    /// The promotion that started this run, when one did.
    pub promotion_id: Option<uuid::Uuid>,
    /// A recorded approval (`POST /factory/approvals`, a promotion's): a production run that
    /// names one that verifies does not wait for an operator; one that does not verify is
    /// refused with 422 and the reason. The run verifies it again and spends it before it
    /// applies.
    pub approval_id: Option<uuid::Uuid>,
    /// Run through quarantined versions (`GET /factory/quarantines`): `{"reason": "…"}`.
    /// Needs the `Operator` (or `PlatformAdmin`) role; recorded on the run
    /// (`quarantineOverride`) and as `QuarantineOverridden`. Without it a specification that
    /// carries a quarantined version is refused with 409 and the reason.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quarantine_override: Option<OverrideAsked>,
}

/// `quarantineOverride` of a run's request.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct OverrideAsked {
    /// Mandatory: why the quarantined version must run anyway.
    pub reason: String,
}

/// A run as the API shows it: the stored run (every read shows it the same way, the
/// receipts as the stored JSON text, passed through; see [`Run`]) and its workflow.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct RunView {
    /// `provisioning-run/{provisioningRunId}`, for the Temporal UI and CLI.
    pub workflow_id: String,
    #[serde(flatten)]
    pub run: Run,
}

impl From<Run> for RunView {
    fn from(run: Run) -> Self {
        Self {
            workflow_id: run_workflow_id(&run.provisioning_run_id),
            run,
        }
    }
}

fn idempotency_key(headers: &HeaderMap) -> Result<Option<String>, Error> {
    match headers.get("idempotency-key") {
        None => Ok(None),
        Some(v) => {
            let key = v
                .to_str()
                .map_err(|_| Error::BadRequest("Idempotency-Key must be ASCII".into()))?;
            if key.is_empty() || key.len() > 255 {
                return Err(Error::BadRequest(
                    "Idempotency-Key must be 1-255 characters".into(),
                ));
            }
            Ok(Some(key.to_owned()))
        }
    }
}

fn request_hash(body: &PlanProvisioning) -> String {
    // Serializing the parsed body (not the raw bytes) makes whitespace and key order irrelevant.
    let canonical = serde_json::to_string(body).unwrap_or_default();
    hex::encode(Sha256::digest(canonical.as_bytes()))
}

fn accepted_response(run: RunView, status: StatusCode) -> Response {
    let location = format!("/factory/provisioning/runs/{}", run.run.provisioning_run_id);
    (status, [(header::LOCATION, location)], axum::Json(run)).into_response()
}

fn not_found(id: &str) -> Error {
    Error::NotFound(format!("provisioning run `{id}` not found"))
}

/// The tenant's run (commands check its state).
pub(super) async fn find_run(state: &AppState, tenant: &str, id: &str) -> Result<Run, Error> {
    runs::find(&state.db, tenant, id)
        .await?
        .ok_or_else(|| not_found(id))
}

/// The tenant's run as the API shows it, read the way the list reads it.
async fn find_view(state: &AppState, tenant: &str, id: &str) -> Result<RunView, Error> {
    Ok(find_run(state, tenant, id).await?.into())
}

/// Plans a run: starts workflow `provisioning-run/{id}`, which takes the environment's lock,
/// plans, waits for approval in production, applies and records receipts. A run whose
/// project's quota is full (its `concurrentRuns` in flight and one more waiting) is deferred:
/// it shows `waitingForCapacity` and starts when a slot frees. Send an `Idempotency-Key` to
/// make retries safe.
#[utoipa::path(operation_id = "planRun", post, path = "/factory/provisioning/runs", tag = "runs",
    security(("bearer" = ["factory.provisioning.apply"])),
    params(("Idempotency-Key" = Option<String>, Header,
        description = "1–255 characters; the same key with the same body answers the same run (200), with another body 422")),
    request_body = PlanProvisioning,
    responses(
        (status = 202, description = "Started, or deferred until its project has capacity (`waitingForCapacity`); `Location` names the run", body = RunView,
            headers(("Location" = String, description = "The run's URL"))),
        (status = 200, description = "An earlier request with this Idempotency-Key started this run", body = RunView),
        Problems<400>, Problems<401>, Problems<403>, Problems<404>, Problems<409>, Problems<413>, Problems<415>, Problems<422>, Problems<429>, Problems<500>, Problems<503>,
    ))]
#[tracing::instrument(skip_all, fields(tenant_id = %auth.tenant(), environment_id = %body.environment_id, run_id))]
async fn plan(
    State(state): State<AppState>,
    auth: Scoped<ProvisioningApply>,
    headers: HeaderMap,
    Json(body): Json<PlanProvisioning>,
) -> Result<Response, Error> {
    let key = idempotency_key(&headers)?;
    let hash = request_hash(&body);
    // Before anything costs the database: one tenant's flood waits here, not in everyone's way.
    state.pacer.wait_turn(auth.tenant()).await?;

    if let Some(key) = &key
        && let Some(existing) = find_by_key(&state, auth.tenant(), key).await?
    {
        return replay(&state, existing, &hash).await;
    }

    let env = require_active_environment(&state.db, auth.tenant(), &body.environment_id).await?;
    // Destroying an environment is an Operator's call, in production and outside it.
    if body.kind == runtime_cloud_models::ProvisioningKind::Decommission {
        auth.require_role(PRODUCTION_DECIDERS)?;
    }
    // The run itself checks again before it plans: this only spares the caller a run that
    // would end `Rejected`.
    let (quota, spent) = runtime_cloud_store::capacity::minutes_spent(
        &state.db,
        auth.tenant(),
        &env.project_id,
        chrono::Utc::now(),
    )
    .await?;
    if let Some(spent) = spent {
        return Err(spent.into());
    }
    let spec = specifications::version(
        &state.db,
        auth.tenant(),
        &body.environment_id,
        body.specification_version,
    )
    .await?
    .ok_or_else(|| match body.specification_version {
        Some(v) => Error::NotFound(format!(
            "specification version {v} of `{}` not found",
            body.environment_id
        )),
        None => Error::Conflict(format!(
            "environment `{}` has no specification yet; declare one first",
            body.environment_id
        )),
    })?;

    let quarantine_override = quarantine_override(
        &state,
        &auth,
        &spec,
        body.kind,
        body.quarantine_override.as_ref(),
    )
    .await?;
    let run_id = uuid::Uuid::now_v7().to_string();
    tracing::Span::current().record("run_id", &run_id);
    if let Some(approval_id) = body.approval_id
        && env.production()
    {
        let claim = ApprovalClaim {
            approval_id: approval_id.to_string(),
            tenant_id: auth.tenant().to_owned(),
            environment_id: env.environment_id.clone(),
            environment_class: env.class,
            run_id: run_id.clone(),
            inputs_hash: None,
            at: chrono::Utc::now(),
        };
        super::approvals::check_named(&state, &claim).await?;
    }
    let new = NewRun {
        run_id: &run_id,
        environment: &env,
        specification: &spec,
        kind: body.kind,
        promotion_id: body.promotion_id.map(|u| u.to_string()),
        approval_id: body.approval_id.map(|u| u.to_string()),
        idempotency_key: key.clone(),
        request_hash: Some(hash.clone()),
        quarantine_override,
    };
    let admission = admission(&env, &run_id, quota);
    let input = match runtime_cloud_transactions::admit_run::accept_run(
        &state.db,
        &new,
        &state.options,
        Some(&admission),
    )
    .await
    {
        // Its project's runs fill its quota: it starts when a slot frees, and shows why it
        // waits meanwhile.
        Ok(accepted) if accepted.deferred => {
            tracing::info!(run_id = %run_id, "provisioning run deferred for capacity");
            let view = find_view(&state, auth.tenant(), &run_id).await?;
            return Ok(accepted_response(view, StatusCode::ACCEPTED));
        }
        Ok(accepted) => accepted.input,
        // Another request with the same key won the race: answer as it did.
        Err(runtime_cloud_store::Error::Duplicate { .. }) if key.is_some() => {
            let key = key.as_deref().unwrap_or_default();
            let existing = find_by_key(&state, auth.tenant(), key)
                .await?
                .ok_or_else(|| Error::internal(anyhow::anyhow!("run with key {key} vanished")))?;
            return replay(&state, existing, &hash).await;
        }
        Err(e) => return Err(e.into()),
    };
    if let Err(e) = start(&state, input).await
        && !started_after_all(&state, &run_id).await
    {
        // Nothing half-written: without its workflow the run must not exist. Should the
        // database refuse too, the start stays accepted and the starter makes it later.
        return Err(
            match run_starts::withdraw(&state.db, auth.tenant(), &run_id).await {
                Ok(()) => e,
                Err(withdraw) => {
                    tracing::error!(error = %withdraw, "cannot withdraw run {run_id}");
                    Error::Unavailable(
                        "the workflow service is unavailable and the run could not be taken back: \
                     it starts once both are back; send the same Idempotency-Key to see it"
                            .into(),
                    )
                }
            },
        );
    }
    forget_start(&state, &run_id).await;
    tracing::info!(run_id = %run_id, environment_id = %body.environment_id, "provisioning run started");
    let view = find_view(&state, auth.tenant(), &run_id).await?;
    Ok(accepted_response(view, StatusCode::ACCEPTED))
}

/// The override a run asks for, when `spec` carries quarantined versions of the tenant: 409
/// with the reason when it does and none is asked for, 422 when one is asked for and there is
/// nothing to override (or no reason), 403 without an Operator. The run's gate weighs the
/// quarantines again before it applies: one placed after this is not overridden.
async fn quarantine_override(
    state: &AppState,
    auth: &Scoped<ProvisioningApply>,
    spec: &specifications::Specification,
    kind: ProvisioningKind,
    asked: Option<&OverrideAsked>,
) -> Result<Option<QuarantineOverride>, Error> {
    use runtime_cloud_models::quarantine::{carried, refusal};
    // A decommission applies no version (`models::quarantine::gate`).
    if kind == ProvisioningKind::Decommission && asked.is_none() {
        return Ok(None);
    }
    let in_force = runtime_cloud_store::quarantines::in_force(&state.db, auth.tenant()).await?;
    let snapshot = spec.snapshot();
    let hits = carried(&snapshot, &in_force);
    match asked {
        None if hits.is_empty() => Ok(None),
        None => Err(Error::Conflict(format!(
            "{}; an Operator may run it anyway with quarantineOverride.reason",
            refusal(&hits)
        ))),
        Some(_) if hits.is_empty() || kind == ProvisioningKind::Decommission => {
            Err(Error::Unprocessable(format!(
                "quarantineOverride: specification version {} carries no quarantined version",
                spec.version
            )))
        }
        Some(asked) => {
            auth.require_role(PRODUCTION_DECIDERS)?;
            if asked.reason.trim().is_empty() {
                return Err(Error::Unprocessable(
                    "quarantineOverride.reason must say why the quarantined version must run"
                        .into(),
                ));
            }
            Ok(Some(QuarantineOverride::of(
                &hits,
                auth.subject(),
                &asked.reason,
                chrono::Utc::now(),
            )))
        }
    }
}

/// What deferring run `run_id` of `env` takes (`transactions::admit_run::accept_run`): its project's
/// quota, the `waiting` lease it is recorded with, and the wait it shows.
fn admission(
    env: &runtime_cloud_store::environments::Environment,
    run_id: &str,
    quota: runtime_cloud_store::capacity::Quota,
) -> runtime_cloud_transactions::admit_run::Admission {
    use runtime_cloud_models::capacity::CapacityWait;
    let lease = runtime_cloud_transactions::take_lease::run_lease(
        uuid::Uuid::now_v7().to_string(),
        run_id,
        String::new(),
        run_workflow_id(run_id),
        (env.tenant_id.clone(), env.project_id.clone()),
        env.pool_id.clone(),
        &quota.limits,
    );
    let wait = CapacityWait::quota_full(
        &env.project_id,
        quota.limits.concurrent_runs,
        quota.source,
        env.pool_id.clone(),
        chrono::Utc::now(),
    );
    runtime_cloud_transactions::admit_run::Admission {
        concurrent_runs: quota.limits.concurrent_runs,
        lease,
        wait,
    }
}

async fn find_by_key(state: &AppState, tenant: &str, key: &str) -> Result<Option<Run>, Error> {
    Ok(runs::by_idempotency_key(&state.db, tenant, key).await?)
}

/// The same key again: the same run for the same body, 422 for another body. A run whose
/// first request ended before its workflow started (the process stopped in between) has it
/// started now.
async fn replay(state: &AppState, existing: Run, hash: &str) -> Result<Response, Error> {
    if existing.request_hash.as_deref() != Some(hash) {
        return Err(Error::Unprocessable(
            "this Idempotency-Key was used with a different request body".into(),
        ));
    }
    let run_id = &existing.provisioning_run_id;
    if let Some(pending) = run_starts::pending(&state.db, &existing.tenant_id, run_id).await? {
        // The first request may still be starting the run, or about to take it back: starting
        // it from here too could leave a workflow whose run was taken back.
        if chrono::Utc::now() - pending.accepted_at < in_flight() {
            return Err(Error::Conflict(format!(
                "the first request with this Idempotency-Key is still starting run `{run_id}`; \
                 send it again in a few seconds"
            )));
        }
        // A deferred start is admitted when its project has a slot, not by a retry.
        if !pending.deferred {
            start(state, pending.input).await?;
            forget_start(state, run_id).await;
        }
    }
    Ok(accepted_response(existing.into(), StatusCode::OK))
}

/// [`RUN_START_IN_FLIGHT`], to compare with the database's timestamps.
fn in_flight() -> chrono::Duration {
    chrono::Duration::from_std(RUN_START_IN_FLIGHT).unwrap_or_default()
}

/// Whether the run's workflow exists although its start failed: a start that timed out may
/// have reached Temporal all the same. Asked once and briefly; no answer counts as no (the
/// run is taken back, and a workflow that did start writes its row again when it first
/// projects).
async fn started_after_all(state: &AppState, run_id: &str) -> bool {
    let handle = state
        .temporal
        .get_workflow_handle::<ProvisioningRun>(run_workflow_id(run_id));
    let described = tokio::time::timeout(
        std::time::Duration::from_secs(2),
        handle.describe(WorkflowDescribeOptions::default()),
    )
    .await;
    matches!(described, Ok(Ok(_)))
}

/// The run's workflow started: its start is no longer pending. Should the database refuse,
/// the starter starts it again later, which changes nothing.
pub(crate) async fn forget_start(state: &AppState, run_id: &str) {
    if let Err(e) = run_starts::started(&state.db, run_id).await {
        tracing::warn!(error = %e, "run {run_id} started; its start stays pending");
    }
}

/// Starts the run's workflow (an inbound event's run too). The id is the idempotency key on
/// the Temporal side: a start for an id that exists (running or closed) never creates a
/// second execution, and is answered as a start. Temporal's answer is awaited for
/// [`RUN_START_TIMEOUT`] at most, within the starter's grace (`UnstartedRunGraceSeconds`), so
/// a request that could not start its run has taken it back before the starter looks.
pub(crate) async fn start(state: &AppState, input: RunInput) -> Result<(), Error> {
    let started = tokio::time::timeout(
        RUN_START_TIMEOUT,
        runtime_cloud_temporal::in_current_span(runtime_cloud_temporal::admission::start_run(
            &state.temporal,
            &state.task_queue,
            input,
        )),
    )
    .await;
    match started {
        Ok(Ok(())) => Ok(()),
        Ok(Err(e)) => {
            tracing::error!(error = %e, "cannot start provisioning run");
            Err(Error::Unavailable(
                "the workflow service is unavailable; nothing was started, retry later".into(),
            ))
        }
        Err(_) => {
            tracing::error!("no answer from the workflow service within {RUN_START_TIMEOUT:?}");
            Err(Error::Unavailable(
                "the workflow service did not answer; nothing was started, retry later".into(),
            ))
        }
    }
}

/// `?environmentId=&kind=&state=&cursor=&limit=`.
#[derive(Debug, Deserialize, IntoParams)]
#[serde(rename_all = "camelCase")]
#[into_params(parameter_in = Query)]
struct ListQuery {
    /// Only this environment's runs.
    environment_id: Option<String>,
    /// `baseline`, `promotion`, `reconciliation` or `decommission`.
    kind: Option<String>,
    /// A provisioning state such as `AwaitingApproval` or `Applied`.
    state: Option<String>,
    /// The `nextCursor` of the previous page.
    cursor: Option<String>,
    /// 1–200, default 50.
    #[param(minimum = 1, maximum = 200)]
    limit: Option<u64>,
}

/// Runs, newest first, a page at a time.
#[utoipa::path(operation_id = "listRuns", get, path = "/factory/provisioning/runs", tag = "runs",
    security(("bearer" = ["factory.provisioning.read"])),
    params(ListQuery),
    responses(
        (status = 200, description = "A page of runs", body = Paged<RunView>),
        Problems<400>, Problems<401>, Problems<403>, Problems<500>,
    ))]
async fn list(
    State(state): State<AppState>,
    auth: Scoped<ProvisioningRead>,
    Query(q): Query<ListQuery>,
) -> Result<axum::Json<Paged<RunView>>, Error> {
    let filter = RunFilter {
        environment_id: q.environment_id,
        kind: crate::query::optional::<ProvisioningKind>(q.kind.as_deref())?,
        state: crate::query::optional::<ProvisioningState>(q.state.as_deref())?,
    };
    let page = Page {
        cursor: q.cursor,
        limit: q.limit,
    };
    let (rows, limit) = page.rows()?;
    let runs = runs::list(&state.db, auth.tenant(), &filter, &rows).await?;
    let views = runs.into_iter().map(RunView::from).collect();
    let paged = Paged::from_rows(views, limit, |r: &RunView| &r.run.provisioning_run_id);
    Ok(axum::Json(paged))
}

/// One run with its receipts.
#[utoipa::path(operation_id = "getRun", get, path = "/factory/provisioning/runs/{provisioningRunId}", tag = "runs",
    security(("bearer" = ["factory.provisioning.read"])),
    params(("provisioningRunId" = String, Path, description = "The provisioning run id")),
    responses(
        (status = 200, description = "The run", body = RunView),
        Problems<401>, Problems<403>, Problems<404>, Problems<500>,
    ))]
#[tracing::instrument(skip_all, fields(tenant_id = %auth.tenant(), run_id = %id))]
async fn read(
    State(state): State<AppState>,
    auth: Scoped<ProvisioningRead>,
    Path(id): Path<String>,
) -> Result<axum::Json<RunView>, Error> {
    Ok(axum::Json(find_view(&state, auth.tenant(), &id).await?))
}

/// `POST …/runs/{provisioningRunId}/cancel`: `{"reason": "…"}` (optional).
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct CancelBody {
    /// Why; recorded with the cancellation.
    #[serde(default)]
    reason: String,
}

/// The run took the cancellation.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
struct CancelRequested {
    provisioning_run_id: String,
    cancel_requested: bool,
}

/// The run took the decision.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
struct ApprovalSignalled {
    provisioning_run_id: String,
    decision: ApprovalDecision,
}

/// Cancels a run that has not started applying (update `request_cancel`; 409 from the run
/// once its apply started); it ends `Cancelled` and releases the environment.
#[utoipa::path(operation_id = "cancelRun", post, path = "/factory/provisioning/runs/{provisioningRunId}/cancel", tag = "runs",
    security(("bearer" = ["factory.provisioning.apply"])),
    params(("provisioningRunId" = String, Path, description = "The provisioning run id")),
    request_body(content = Option<CancelBody>, description = "Optional"),
    responses(
        (status = 202, description = "The run took it", body = CancelRequested),
        Problems<400>, Problems<401>, Problems<403>, Problems<404>, Problems<409>, Problems<413>, Problems<422>, Problems<500>, Problems<503>,
    ))]
#[tracing::instrument(skip_all, fields(tenant_id = %auth.tenant(), run_id = %id))]
async fn cancel(
    State(state): State<AppState>,
    auth: Scoped<ProvisioningApply>,
    Path(id): Path<String>,
    body: axum::body::Bytes,
) -> Result<(StatusCode, axum::Json<CancelRequested>), Error> {
    find_run(&state, auth.tenant(), &id).await?;
    let reason = crate::json::parse_optional::<CancelBody>(&body)?.reason;
    let request = CancelRequest {
        by: auth.subject().to_owned(),
        reason,
    };
    tell_run(
        &state,
        auth.tenant(),
        &id,
        request,
        |h, r| async move {
            let opts = WorkflowExecuteUpdateOptions::default();
            h.execute_update(ProvisioningRun::request_cancel, r, opts)
                .await
        },
        |row, _| Ok(cancel_refused(&id, row.state)),
        |h, r| async move {
            h.signal(ProvisioningRun::cancel, r, WorkflowSignalOptions::default())
                .await
        },
    )
    .await?;
    Ok((
        StatusCode::ACCEPTED,
        axum::Json(CancelRequested {
            provisioning_run_id: id,
            cancel_requested: true,
        }),
    ))
}

/// `POST …/runs/{provisioningRunId}/break-glass`: `{"reason":"…"}`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct BreakGlassBody {
    /// Mandatory: why the change cannot wait for the window.
    reason: String,
}

/// The run took the break-glass.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
struct BreakGlassSignalled {
    provisioning_run_id: String,
    break_glass_requested: bool,
}

/// Lets a run apply inside a closed change window (update `request_break_glass`): the reason and who
/// gave it are recorded on the run (`breakGlass`) and as `ChangeWindowOverridden`. Needs the
/// `Operator` (or `PlatformAdmin`) role; only before the apply starts.
#[utoipa::path(operation_id = "breakGlass", post, path = "/factory/provisioning/runs/{provisioningRunId}/break-glass", tag = "runs",
    security(("bearer" = ["factory.provisioning.apply"])),
    params(("provisioningRunId" = String, Path, description = "The provisioning run id")),
    request_body = BreakGlassBody,
    responses(
        (status = 202, description = "The run took it", body = BreakGlassSignalled),
        Problems<400>, Problems<401>, Problems<403>, Problems<404>, Problems<409>, Problems<413>, Problems<415>, Problems<422>, Problems<500>, Problems<503>,
    ))]
#[tracing::instrument(skip_all, fields(tenant_id = %auth.tenant(), run_id = %id))]
async fn break_glass(
    State(state): State<AppState>,
    auth: Scoped<ProvisioningApply>,
    Path(id): Path<String>,
    Json(body): Json<BreakGlassBody>,
) -> Result<(StatusCode, axum::Json<BreakGlassSignalled>), Error> {
    auth.require_role(PRODUCTION_DECIDERS)?;
    if body.reason.trim().is_empty() {
        return Err(Error::Unprocessable(
            "reason must say why the change cannot wait for its window".into(),
        ));
    }
    find_run(&state, auth.tenant(), &id).await?;
    let request = runtime_cloud_models::BreakGlass {
        by: auth.subject().to_owned(),
        reason: body.reason,
        window_id: None,
        at: None,
    };
    tell_run(
        &state,
        auth.tenant(),
        &id,
        request,
        |h, r| async move {
            let opts = WorkflowExecuteUpdateOptions::default();
            h.execute_update(ProvisioningRun::request_break_glass, r, opts)
                .await
        },
        |row, _| Ok(break_glass_refused(&id, row.state)),
        |h, r| async move {
            h.signal(
                ProvisioningRun::break_glass,
                r,
                WorkflowSignalOptions::default(),
            )
            .await
        },
    )
    .await?;
    tracing::warn!(by = %auth.subject(), "break-glass requested");
    Ok((
        StatusCode::ACCEPTED,
        axum::Json(BreakGlassSignalled {
            provisioning_run_id: id,
            break_glass_requested: true,
        }),
    ))
}

/// `POST …/runs/{provisioningRunId}/approval`: `{"decision":"approve"|"reject","reason":"…","inputsHash":"…"}`.
/// The approver is the token's subject.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct ApprovalBody {
    decision: ApprovalDecision,
    /// Why (a change ticket, …).
    #[serde(default)]
    reason: String,
    /// The `inputsHash` of the plan being approved; another plan answers 409.
    inputs_hash: String,
}

/// Approves or rejects a production run's plan (update `decide`: 409 from the run when it does
/// not await approval, the decision names another plan, or it has a decision already). Needs
/// the `Operator` or `PlatformAdmin` role too; the approver is the token's subject.
#[utoipa::path(operation_id = "approveRun", post, path = "/factory/provisioning/runs/{provisioningRunId}/approval", tag = "runs",
    security(("bearer" = ["factory.provisioning.apply"])),
    params(("provisioningRunId" = String, Path, description = "The provisioning run id")),
    request_body = ApprovalBody,
    responses(
        (status = 202, description = "The run took it", body = ApprovalSignalled),
        Problems<400>, Problems<401>, Problems<403>, Problems<404>, Problems<409>, Problems<413>, Problems<415>, Problems<422>, Problems<500>, Problems<503>,
    ))]
#[tracing::instrument(skip_all, fields(tenant_id = %auth.tenant(), run_id = %id))]
async fn approve(
    State(state): State<AppState>,
    auth: Scoped<ProvisioningApply>,
    Path(id): Path<String>,
    Json(body): Json<ApprovalBody>,
) -> Result<(StatusCode, axum::Json<ApprovalSignalled>), Error> {
    let row = find_run(&state, auth.tenant(), &id).await?;
    // Only production runs wait for approval, and a production approval is an Operator's.
    auth.require_role(PRODUCTION_DECIDERS)?;
    // What the read tables already refuse (they say `AwaitingApproval` as soon as the run
    // awaits it) is refused before anything is recorded; the run refuses the rest.
    let plan = row.plan()?;
    let asked = Approval {
        decision: body.decision,
        approver: auth.subject().to_owned(),
        reason: body.reason.clone(),
        inputs_hash: body.inputs_hash.clone(),
        approval_id: None,
    };
    if let Some(why) = decision_refused(&id, row.state, plan.as_ref(), false, &asked) {
        return Err(Error::Conflict(why));
    }
    // A grant is recorded first, bound to this plan: the run verifies and spends it through
    // the Approvals port before it applies, so the decision alone opens nothing.
    let recorded = match body.decision {
        ApprovalDecision::Approve => Some(
            approvals::record(
                &state.db,
                NewApproval {
                    tenant_id: auth.tenant().to_owned(),
                    environment_id: row.environment_id.clone(),
                    class: EnvironmentClass::Production,
                    decision: ApprovalDecision::Approve,
                    granted_by: auth.subject().to_owned(),
                    granted_by_roles: auth.roles().to_vec(),
                    reason: body.reason.clone(),
                    inputs_hash: Some(body.inputs_hash.clone()),
                    promotion_id: None,
                    source: ApprovalSource::RunDecision,
                    expires_at: chrono::Utc::now() + state.options.approval_validity(),
                    spent_by_run_id: None,
                },
            )
            .await?
            .approval_id,
        ),
        ApprovalDecision::Reject => None,
    };
    let approval = Approval {
        approval_id: recorded.clone(),
        ..asked
    };
    let told = tell_decision(&state, auth.tenant(), &id, approval).await;
    if let (Err(e), Some(approval_id)) = (&told, &recorded) {
        // Nothing half-written: an approval no run took is taken back.
        tracing::warn!(error = %e, %approval_id, "approval not taken; forgetting it");
        let _ = approvals::forget(&state.db, auth.tenant(), approval_id).await;
    }
    told?;
    Ok((
        StatusCode::ACCEPTED,
        axum::Json(ApprovalSignalled {
            provisioning_run_id: id,
            decision: body.decision,
        }),
    ))
}

/// Signals a decision to the run (an inbound `ApprovalDecided`'s); [`Error::Conflict`] when the
/// run has ended.
pub(crate) async fn signal_approval(
    state: &AppState,
    id: &str,
    approval: Approval,
) -> Result<(), Error> {
    signal_run(state, id, |h| async move {
        h.signal(
            ProvisioningRun::approval,
            approval,
            WorkflowSignalOptions::default(),
        )
        .await
    })
    .await
}

/// Tells the run an operator's decision: the `decide` update, which the run refuses to the
/// caller (409) when it would not count it; when no worker answers, the read tables' check and
/// the `approval` signal.
async fn tell_decision(
    state: &AppState,
    tenant: &str,
    id: &str,
    approval: Approval,
) -> Result<(), Error> {
    tell_run(
        state,
        tenant,
        id,
        approval,
        |h, a| async move {
            let opts = WorkflowExecuteUpdateOptions::default();
            h.execute_update(ProvisioningRun::decide, a, opts).await
        },
        |row, a| {
            let plan = row.plan()?;
            Ok(decision_refused(id, row.state, plan.as_ref(), false, a))
        },
        |h, a| async move {
            h.signal(
                ProvisioningRun::approval,
                a,
                WorkflowSignalOptions::default(),
            )
            .await
        },
    )
    .await
}

/// How long the API waits for the run's worker to take or refuse an update. A run no worker
/// serves now (its worker restarting, or every worker down) cannot answer one: the API then
/// checks the read tables and signals instead, and the run weighs the signal once a worker is
/// back. Should the server still deliver the update then, the run takes it once with the
/// signal (the first cancel, break-glass or decision counts; the same one twice, once).
const UPDATE_WAIT: std::time::Duration = std::time::Duration::from_secs(10);

/// The run's workflow, by its id.
type RunHandle = temporalio_client::WorkflowHandle<temporalio_client::Client, ProvisioningRun>;

/// Tells the run `request` by `update`, which the run refuses to the caller ([`Error::Conflict`]
/// with its reason) when it would not take it. When no worker answers in [`UPDATE_WAIT`] (or the
/// workflow has ended), the read tables' row is checked by `refused`, the same rule, and
/// `request` is sent by `signal` instead.
async fn tell_run<T, U, UF, S, SF>(
    state: &AppState,
    tenant: &str,
    id: &str,
    request: T,
    update: U,
    refused: impl FnOnce(&Run, &T) -> Result<Option<String>, Error>,
    signal: S,
) -> Result<(), Error>
where
    T: Clone,
    U: FnOnce(RunHandle, T) -> UF,
    UF: std::future::Future<Output = Result<(), WorkflowUpdateError>>,
    S: FnOnce(RunHandle, T) -> SF,
    SF: std::future::Future<
            Output = Result<(), temporalio_client::errors::WorkflowInteractionError>,
        >,
{
    start_if_unstarted(state, id).await?;
    let sent =
        runtime_cloud_temporal::in_current_span(update(run_handle(state, id), request.clone()));
    match tokio::time::timeout(UPDATE_WAIT, sent).await {
        Ok(Ok(())) => return Ok(()),
        Ok(Err(WorkflowUpdateError::Failed(refusal))) => {
            return Err(Error::Conflict(refusal.message));
        }
        Ok(Err(WorkflowUpdateError::NotFound(_))) | Err(_) => {}
        Ok(Err(e)) => {
            tracing::error!(error = %e, "cannot update run `{id}`");
            return Err(Error::Unavailable(
                "the workflow service is unavailable; retry later".into(),
            ));
        }
    }
    let row = find_run(state, tenant, id).await?;
    if let Some(why) = refused(&row, &request)? {
        return Err(Error::Conflict(why));
    }
    signal_run(state, id, |h| signal(h, request)).await
}

fn run_handle(state: &AppState, id: &str) -> RunHandle {
    state
        .temporal
        .get_workflow_handle::<ProvisioningRun>(run_workflow_id(id))
}

async fn signal_run<F, Fut>(state: &AppState, id: &str, send: F) -> Result<(), Error>
where
    F: FnOnce(RunHandle) -> Fut,
    Fut: std::future::Future<
            Output = Result<(), temporalio_client::errors::WorkflowInteractionError>,
        >,
{
    start_if_unstarted(state, id).await?;
    runtime_cloud_temporal::in_current_span(send(run_handle(state, id)))
        .await
        .map_err(Error::from_signal(format!("run `{id}`")))
}

/// Starts the run's workflow if it may not have started (its start deferred, or admitted and
/// not made yet): a signal or an update would find no workflow. A deferred run then waits for
/// its slot in the capacity semaphore, which still bounds its project; a start made already
/// starts nothing.
async fn start_if_unstarted(state: &AppState, id: &str) -> Result<(), Error> {
    if let Some(input) = run_starts::unstarted(&state.db, id).await? {
        start(state, input).await?;
        forget_start(state, id).await;
    }
    Ok(())
}
