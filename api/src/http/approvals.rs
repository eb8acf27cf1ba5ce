//! `/factory/approvals`: approvals of production applies, recorded by Operators.
//!
//! An approval opens the production gate of one run: a run that names it (`approvalId` in
//! `POST /factory/provisioning/runs`) verifies and spends it through the Approvals port before
//! it applies. Recording one needs the `Operator` or `PlatformAdmin` role; its grantor, roles
//! and expiry are recorded with it.

use super::pagination::{EnvironmentPage, Paged};
use crate::auth::{PRODUCTION_DECIDERS, ProvisioningApply, ProvisioningRead, Scoped};
use crate::json::Json;
use crate::openapi::Problems;
use crate::query::Query;
use crate::tenancy::require_active_environment;
use crate::{AppState, Error};
use axum::extract::{Path, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use chrono::{DateTime, Utc};
use runtime_cloud_models::approvals::{ApprovalClaim, ApprovalSource, RecordedApproval};
use runtime_cloud_models::{ApprovalDecision, RefusalReason};
use runtime_cloud_store::approvals::{self, NewApproval};
use serde::Deserialize;
use utoipa::ToSchema;
use utoipa_axum::{router::OpenApiRouter, routes};

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(list, record))
        .routes(routes!(read))
}

/// `POST /factory/approvals`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct RecordApproval {
    /// The environment it is for; its class is the approval's class.
    environment_id: String,
    /// `approve` (a grant) or `reject` (recorded, never opens the gate).
    decision: ApprovalDecision,
    /// Why (a change ticket, …).
    #[serde(default)]
    reason: String,
    /// The plan it is for; without it, any plan of the environment (one run).
    inputs_hash: Option<String>,
    /// The promotion it belongs to.
    promotion_id: Option<uuid::Uuid>,
    /// Until when it can be spent; `ApprovalValidityHours` from now when absent.
    expires_at: Option<DateTime<Utc>>,
}

/// Records an approval by the caller (an Operator or Platform admin). A run that names it
/// spends it once; see [`RecordedApproval`].
#[utoipa::path(operation_id = "recordApproval", post, path = "/factory/approvals", tag = "approvals",
    security(("bearer" = ["factory.provisioning.apply"])),
    request_body = RecordApproval,
    responses(
        (status = 201, description = "Recorded; `Location` names it", body = RecordedApproval,
            headers(("Location" = String, description = "The approval's URL"))),
        Problems<400>, Problems<401>, Problems<403>, Problems<404>, Problems<413>, Problems<415>, Problems<422>, Problems<500>,
    ))]
#[tracing::instrument(skip_all, fields(tenant_id = %auth.tenant(), environment_id = %body.environment_id))]
async fn record(
    State(state): State<AppState>,
    auth: Scoped<ProvisioningApply>,
    Json(body): Json<RecordApproval>,
) -> Result<Response, Error> {
    auth.require_role(PRODUCTION_DECIDERS)?;
    let env = require_active_environment(&state.db, auth.tenant(), &body.environment_id).await?;
    let now = Utc::now();
    let expires_at = body
        .expires_at
        .unwrap_or(now + state.options.approval_validity());
    if expires_at <= now {
        return Err(Error::Unprocessable(format!(
            "expiresAt {expires_at} is not in the future"
        )));
    }
    let approval = approvals::record(
        &state.db,
        NewApproval {
            tenant_id: auth.tenant().to_owned(),
            environment_id: env.environment_id,
            class: env.class,
            decision: body.decision,
            granted_by: auth.subject().to_owned(),
            granted_by_roles: auth.roles().to_vec(),
            reason: body.reason,
            inputs_hash: body.inputs_hash,
            promotion_id: body.promotion_id.map(|u| u.to_string()),
            source: ApprovalSource::Operator,
            expires_at,
            spent_by_run_id: None,
        },
    )
    .await?;
    tracing::info!(approval_id = %approval.approval_id, "approval recorded");
    let location = format!("/factory/approvals/{}", approval.approval_id);
    Ok((
        StatusCode::CREATED,
        [(header::LOCATION, location)],
        axum::Json(approval),
    )
        .into_response())
}

/// One approval, with the run that spent it.
#[utoipa::path(operation_id = "getApproval", get, path = "/factory/approvals/{approvalId}", tag = "approvals",
    security(("bearer" = ["factory.provisioning.read"])),
    params(("approvalId" = String, Path, description = "The approval id")),
    responses(
        (status = 200, description = "The approval", body = RecordedApproval),
        Problems<401>, Problems<403>, Problems<404>, Problems<500>,
    ))]
async fn read(
    State(state): State<AppState>,
    auth: Scoped<ProvisioningRead>,
    Path(id): Path<String>,
) -> Result<axum::Json<RecordedApproval>, Error> {
    approvals::find(&state.db, auth.tenant(), &id)
        .await?
        .map(axum::Json)
        .ok_or_else(|| Error::NotFound(format!("approval `{id}` not found")))
}

/// Approvals, newest first, a page at a time.
#[utoipa::path(operation_id = "listApprovals", get, path = "/factory/approvals", tag = "approvals",
    security(("bearer" = ["factory.provisioning.read"])),
    params(EnvironmentPage),
    responses(
        (status = 200, description = "A page of approvals", body = Paged<RecordedApproval>),
        Problems<400>, Problems<401>, Problems<403>, Problems<500>,
    ))]
async fn list(
    State(state): State<AppState>,
    auth: Scoped<ProvisioningRead>,
    Query(q): Query<EnvironmentPage>,
) -> Result<axum::Json<Paged<RecordedApproval>>, Error> {
    let (rows, limit) = q.page().rows()?;
    let env = q.environment_id.as_deref();
    let items = approvals::list(&state.db, auth.tenant(), env, &rows).await?;
    Ok(axum::Json(Paged::from_rows(
        items,
        limit,
        |a: &RecordedApproval| &a.approval_id,
    )))
}

/// The early check of a run request that names an approval: the rule the run applies when it
/// spends it, before anything is created, so a bad id is a 422 with the reason rather than
/// a run that waits. (The run checks again, and spends it, before it applies.)
pub(crate) async fn check_named(state: &AppState, claim: &ApprovalClaim) -> Result<(), Error> {
    match approvals::verify(&state.db, claim).await? {
        Ok(()) => Ok(()),
        // Perhaps RunControlService's: the run claims it there before it applies.
        Err(RefusalReason::UnknownApproval) if state.approvals_elsewhere => Ok(()),
        Err(why) => Err(Error::Unprocessable(format!(
            "approval `{}` does not open the gate of `{}`: {} ({why})",
            claim.approval_id,
            claim.environment_id,
            why.describe()
        ))),
    }
}
