//! `/factory/provisioning/runs`: plan, list, read, approve and cancel provisioning runs.
//!
//! Commands go to the run's workflow (`provisioning-run/{id}`); reads come from the
//! `provisioning_runs` read table, which every workflow transition updates.

use super::environments::require as require_environment;
use super::pagination::{Page, Paged};
use crate::auth::{Auth, PRODUCTION_DECIDERS, PROVISIONING_APPLY, PROVISIONING_READ};
use crate::json::Json;
use crate::query::Query;
use crate::{AppState, Error};
use axum::Router;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use chrono::Utc;
use runtime_cloud_activities::store::{self, logs_ref};
use runtime_cloud_models::entities::{
    deployment_specifications as specs, provisioning_runs as runs,
};
use runtime_cloud_models::{
    Approval, ApprovalDecision, EnvironmentClass, ProvisioningKind, ProvisioningState, RunInput,
    RunStatus, run_workflow_id,
};
use runtime_cloud_workflows::ProvisioningRun;
use runtime_cloud_workflows::provisioning_run::{CancelRequest, cancellable};
use runtime_cloud_workflows::search_attributes::{ENVIRONMENT_ID, RUN_KIND, TENANT_ID};
use sea_orm::{
    ActiveModelTrait, ActiveValue::Set, ColumnTrait, EntityTrait, ModelTrait, QueryFilter,
    QueryOrder,
};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::str::FromStr;
use temporalio_client::{
    WorkflowIdConflictPolicy, WorkflowIdReusePolicy, WorkflowQueryOptions, WorkflowSignalOptions,
    WorkflowStartOptions,
};
use temporalio_common::search_attributes::SearchAttributes;

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/factory/provisioning/runs", get(list).post(plan))
        .route("/factory/provisioning/runs/{id}", get(read))
        .route("/factory/provisioning/runs/{id}/cancel", post(cancel))
        .route("/factory/provisioning/runs/{id}/approval", post(approve))
}

/// `POST /factory/provisioning/runs`.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PlanProvisioning {
    pub environment_id: String,
    /// The latest version when absent.
    pub specification_version: Option<i32>,
    pub kind: ProvisioningKind,
    pub promotion_id: Option<uuid::Uuid>,
    pub approval_id: Option<uuid::Uuid>,
}

/// A run as the API shows it.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RunView {
    pub provisioning_run_id: String,
    pub workflow_id: String,
    pub tenant_id: String,
    pub project_id: String,
    pub environment_id: String,
    pub specification_id: String,
    pub specification_version: i32,
    pub kind: String,
    pub promotion_id: Option<String>,
    pub approval_id: Option<String>,
    /// Null while the run waits for its turn on the environment or plans.
    pub state: Option<String>,
    pub plan: Option<serde_json::Value>,
    pub approval: Option<serde_json::Value>,
    pub apply_receipt: Option<serde_json::Value>,
    pub reason: Option<String>,
    pub logs_ref: Option<String>,
    pub started_at: chrono::DateTime<Utc>,
    pub completed_at: Option<chrono::DateTime<Utc>>,
}

impl From<runs::Model> for RunView {
    fn from(m: runs::Model) -> Self {
        Self {
            workflow_id: run_workflow_id(&m.provisioning_run_id),
            provisioning_run_id: m.provisioning_run_id,
            tenant_id: m.tenant_id,
            project_id: m.project_id,
            environment_id: m.environment_id,
            specification_id: m.specification_id,
            specification_version: m.specification_version,
            kind: m.kind,
            promotion_id: m.promotion_id,
            approval_id: m.approval_id,
            state: m.state,
            plan: m.plan_receipt,
            approval: m.approval,
            apply_receipt: m.apply_receipt,
            reason: m.reason,
            logs_ref: m.logs_ref,
            started_at: m.started_at,
            completed_at: m.completed_at,
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

fn accepted(run: runs::Model, status: StatusCode) -> Response {
    let location = format!("/factory/provisioning/runs/{}", run.provisioning_run_id);
    (
        status,
        [(header::LOCATION, location)],
        axum::Json(RunView::from(run)),
    )
        .into_response()
}

async fn find_run(state: &AppState, tenant: &str, id: &str) -> Result<runs::Model, Error> {
    runs::Entity::find_by_id(id.to_owned())
        .filter(runs::Column::TenantId.eq(tenant))
        .one(&state.db)
        .await?
        .ok_or_else(|| Error::NotFound(format!("provisioning run `{id}` not found")))
}

async fn plan(
    State(state): State<AppState>,
    auth: Auth,
    headers: HeaderMap,
    Json(body): Json<PlanProvisioning>,
) -> Result<Response, Error> {
    auth.require(PROVISIONING_APPLY)?;
    let key = idempotency_key(&headers)?;
    let hash = request_hash(&body);

    if let Some(key) = &key
        && let Some(existing) = find_by_key(&state, auth.tenant(), key).await?
    {
        return replay(existing, &hash);
    }

    let env = require_environment(&state, auth.tenant(), &body.environment_id).await?;
    let mut select = specs::Entity::find()
        .filter(specs::Column::TenantId.eq(auth.tenant()))
        .filter(specs::Column::EnvironmentId.eq(&body.environment_id));
    if let Some(v) = body.specification_version {
        select = select.filter(specs::Column::Version.eq(v));
    }
    let spec = select
        .order_by_desc(specs::Column::Version)
        .one(&state.db)
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
    let snapshot = store::snapshot(&spec).map_err(Error::internal)?;

    let run_id = uuid::Uuid::now_v7().to_string();
    let now = Utc::now();
    let row = runs::ActiveModel {
        provisioning_run_id: Set(run_id.clone()),
        tenant_id: Set(auth.tenant().to_owned()),
        project_id: Set(env.project_id.clone()),
        environment_id: Set(env.environment_id.clone()),
        specification_id: Set(spec.specification_id.clone()),
        specification_version: Set(spec.version),
        kind: Set(body.kind.as_str().to_owned()),
        promotion_id: Set(body.promotion_id.map(|u| u.to_string())),
        approval_id: Set(body.approval_id.map(|u| u.to_string())),
        plan_receipt: Set(None),
        approval: Set(None),
        apply_receipt: Set(None),
        state: Set(None),
        reason: Set(None),
        logs_ref: Set(Some(logs_ref(&run_id))),
        idempotency_key: Set(key.clone()),
        request_hash: Set(Some(hash.clone())),
        started_at: Set(now),
        completed_at: Set(None),
        created_at: Set(now),
        updated_at: Set(now),
    };
    let row = match row.insert(&state.db).await {
        Ok(row) => row,
        // Another request with the same key won the race: answer as it did.
        Err(e)
            if matches!(
                e.sql_err(),
                Some(sea_orm::SqlErr::UniqueConstraintViolation(_))
            ) =>
        {
            let key = key.as_deref().unwrap_or_default();
            let existing = find_by_key(&state, auth.tenant(), key)
                .await?
                .ok_or_else(|| Error::internal(e))?;
            return replay(existing, &hash);
        }
        Err(e) => return Err(e.into()),
    };

    let class = EnvironmentClass::from_str(&env.class).map_err(Error::internal)?;
    let input = RunInput {
        run_id: run_id.clone(),
        tenant_id: auth.tenant().to_owned(),
        project_id: env.project_id,
        environment_id: env.environment_id,
        environment_class: class,
        kind: body.kind,
        promotion_id: row.promotion_id.clone(),
        approval_id: row.approval_id.clone(),
        specification: snapshot,
        approval_timeout_secs: state.options.approval_timeout_secs(),
        apply_timeout_secs: state.options.apply_timeout_secs(),
    };
    if let Err(e) = start(&state, input).await {
        // Nothing half-written: without its workflow the run must not exist.
        let _ = row.delete(&state.db).await;
        return Err(e);
    }
    tracing::info!(run_id = %run_id, environment_id = %body.environment_id, "provisioning run started");
    let row = find_run(&state, auth.tenant(), &run_id).await?;
    Ok(accepted(row, StatusCode::ACCEPTED))
}

async fn find_by_key(
    state: &AppState,
    tenant: &str,
    key: &str,
) -> Result<Option<runs::Model>, Error> {
    Ok(runs::Entity::find()
        .filter(runs::Column::TenantId.eq(tenant))
        .filter(runs::Column::IdempotencyKey.eq(key))
        .one(&state.db)
        .await?)
}

/// The same key again: the same run for the same body, 422 for another body.
fn replay(existing: runs::Model, hash: &str) -> Result<Response, Error> {
    if existing.request_hash.as_deref() != Some(hash) {
        return Err(Error::Unprocessable(
            "this Idempotency-Key was used with a different request body".into(),
        ));
    }
    Ok(accepted(existing, StatusCode::OK))
}

/// Starts the run's workflow. The id is the idempotency key on the Temporal side: a start
/// for an id that exists (running or closed) never creates a second execution.
async fn start(state: &AppState, input: RunInput) -> Result<(), Error> {
    let attributes = SearchAttributes::new([
        TENANT_ID.value_set(input.tenant_id.clone()),
        ENVIRONMENT_ID.value_set(input.environment_id.clone()),
        RUN_KIND.value_set(input.kind.as_str().to_owned()),
    ]);
    let opts = WorkflowStartOptions::new(state.task_queue.clone(), run_workflow_id(&input.run_id))
        .id_reuse_policy(WorkflowIdReusePolicy::RejectDuplicate)
        .id_conflict_policy(WorkflowIdConflictPolicy::UseExisting)
        .search_attributes(attributes)
        .build();
    state
        .temporal
        .start_workflow(ProvisioningRun::run, input, opts)
        .await
        .map_err(|e| {
            tracing::error!(error = %e, "cannot start provisioning run");
            Error::Unavailable(
                "the workflow service is unavailable; nothing was started, retry later".into(),
            )
        })?;
    Ok(())
}

/// `?environmentId=&kind=&state=&cursor=&limit=`.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct ListQuery {
    environment_id: Option<String>,
    kind: Option<String>,
    state: Option<String>,
    cursor: Option<String>,
    limit: Option<u64>,
}

async fn list(
    State(state): State<AppState>,
    auth: Auth,
    Query(q): Query<ListQuery>,
) -> Result<axum::Json<Paged<RunView>>, Error> {
    auth.require(PROVISIONING_READ)?;
    let mut select = runs::Entity::find().filter(runs::Column::TenantId.eq(auth.tenant()));
    if let Some(env) = &q.environment_id {
        select = select.filter(runs::Column::EnvironmentId.eq(env));
    }
    if let Some(kind) = &q.kind {
        let kind =
            ProvisioningKind::from_str(kind).map_err(|e| Error::BadRequest(e.to_string()))?;
        select = select.filter(runs::Column::Kind.eq(kind.as_str()));
    }
    if let Some(s) = &q.state {
        let s = ProvisioningState::from_str(s).map_err(|e| Error::BadRequest(e.to_string()))?;
        select = select.filter(runs::Column::State.eq(s.as_str()));
    }
    let page = Page {
        cursor: q.cursor,
        limit: q.limit,
    };
    let paged = page
        .fetch(
            &state.db,
            select,
            runs::Column::ProvisioningRunId,
            RunView::from,
            |r| &r.provisioning_run_id,
        )
        .await?;
    Ok(axum::Json(paged))
}

async fn read(
    State(state): State<AppState>,
    auth: Auth,
    Path(id): Path<String>,
) -> Result<axum::Json<RunView>, Error> {
    auth.require(PROVISIONING_READ)?;
    Ok(axum::Json(
        find_run(&state, auth.tenant(), &id).await?.into(),
    ))
}

/// The run's live status from its workflow; the read row when the workflow cannot answer
/// (no worker polling), which may lag a transition behind.
async fn live_status(state: &AppState, row: &runs::Model) -> RunStatus {
    let handle = state
        .temporal
        .get_workflow_handle::<ProvisioningRun>(run_workflow_id(&row.provisioning_run_id));
    let query = handle.query(ProvisioningRun::state, (), WorkflowQueryOptions::default());
    match tokio::time::timeout(std::time::Duration::from_secs(5), query).await {
        Ok(Ok(status)) => status,
        _ => RunStatus {
            state: row
                .state
                .as_deref()
                .and_then(|s| ProvisioningState::from_str(s).ok()),
            plan: row
                .plan_receipt
                .clone()
                .and_then(|p| serde_json::from_value(p).ok()),
            ..Default::default()
        },
    }
}

/// `POST …/runs/{id}/cancel`: `{"reason": "…"}` (optional).
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct CancelBody {
    #[serde(default)]
    reason: String,
}

async fn cancel(
    State(state): State<AppState>,
    auth: Auth,
    Path(id): Path<String>,
    body: axum::body::Bytes,
) -> Result<(StatusCode, axum::Json<serde_json::Value>), Error> {
    auth.require(PROVISIONING_APPLY)?;
    let row = find_run(&state, auth.tenant(), &id).await?;
    let status = live_status(&state, &row).await;
    if !cancellable(status.state) {
        return Err(Error::Conflict(format!(
            "run `{id}` is {} and can no longer be cancelled",
            status.state.map_or("in progress", |s| s.as_str())
        )));
    }
    let reason = crate::json::parse_optional::<CancelBody>(&body)?.reason;
    let request = CancelRequest {
        by: auth.subject().to_owned(),
        reason,
    };
    signal_run(&state, &id, |h| async move {
        h.signal(
            ProvisioningRun::cancel,
            request,
            WorkflowSignalOptions::default(),
        )
        .await
    })
    .await?;
    Ok((
        StatusCode::ACCEPTED,
        axum::Json(serde_json::json!({ "provisioningRunId": id, "cancelRequested": true })),
    ))
}

/// `POST …/runs/{id}/approval`: `{"decision":"approve"|"reject","reason":"…","inputsHash":"…"}`.
/// The approver is the token's subject.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct ApprovalBody {
    decision: ApprovalDecision,
    #[serde(default)]
    reason: String,
    inputs_hash: String,
}

async fn approve(
    State(state): State<AppState>,
    auth: Auth,
    Path(id): Path<String>,
    Json(body): Json<ApprovalBody>,
) -> Result<(StatusCode, axum::Json<serde_json::Value>), Error> {
    auth.require(PROVISIONING_APPLY)?;
    let row = find_run(&state, auth.tenant(), &id).await?;
    // Only production runs wait for approval, and a production approval is an Operator's.
    auth.require_role(PRODUCTION_DECIDERS)?;
    let status = live_status(&state, &row).await;
    if status.state != Some(ProvisioningState::AwaitingApproval) {
        return Err(Error::Conflict(format!(
            "run `{id}` is {}, not AwaitingApproval",
            status.state.map_or("not planned yet", |s| s.as_str())
        )));
    }
    let planned = status
        .plan
        .as_ref()
        .map(|p| p.inputs_hash.as_str())
        .unwrap_or_default();
    if planned != body.inputs_hash {
        return Err(Error::Conflict(format!(
            "the approval names plan {} but the run's plan is {planned}; review the current plan",
            body.inputs_hash
        )));
    }
    let approval = Approval {
        decision: body.decision,
        approver: auth.subject().to_owned(),
        reason: body.reason,
        inputs_hash: body.inputs_hash,
    };
    signal_run(&state, &id, |h| async move {
        h.signal(
            ProvisioningRun::approval,
            approval,
            WorkflowSignalOptions::default(),
        )
        .await
    })
    .await?;
    Ok((
        StatusCode::ACCEPTED,
        axum::Json(serde_json::json!({ "provisioningRunId": id, "decision": body.decision })),
    ))
}

async fn signal_run<F, Fut>(state: &AppState, id: &str, send: F) -> Result<(), Error>
where
    F: FnOnce(temporalio_client::WorkflowHandle<temporalio_client::Client, ProvisioningRun>) -> Fut,
    Fut: std::future::Future<
            Output = Result<(), temporalio_client::errors::WorkflowInteractionError>,
        >,
{
    let handle = state
        .temporal
        .get_workflow_handle::<ProvisioningRun>(run_workflow_id(id));
    send(handle).await.map_err(|e| match e {
        temporalio_client::errors::WorkflowInteractionError::NotFound(_) => {
            Error::Conflict(format!("run `{id}` has already ended"))
        }
        e => {
            tracing::error!(error = %e, run_id = %id, "cannot signal run");
            Error::Unavailable("the workflow service is unavailable; retry later".into())
        }
    })
}
