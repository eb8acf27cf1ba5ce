//! `/factory/quarantines`: workload versions refused fleet-wide for the tenant. A rollout's
//! rollback places them on its own; an Operator places one with a reason, and lifts one with a
//! reason. Nothing automatic applies a specification that carries a version in force (the
//! run's gate, the GitOps reconciler, auto-accept, new rollouts: `models::quarantine`); an
//! Operator's explicit run with `quarantineOverride.reason` does, recorded.

use super::pagination::{Page, Paged};
use crate::auth::{PRODUCTION_DECIDERS, ProvisioningApply, ProvisioningRead, Scoped};
use crate::json::Json;
use crate::openapi::Problems;
use crate::query::Query;
use crate::{AppState, Error};
use axum::extract::{Path, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use runtime_cloud_models::quarantine::{QuarantineSource, QuarantineState};
use runtime_cloud_store::quarantines::{self, Filter, Lifted, NewQuarantine, Placed, Quarantine};
use serde::Deserialize;
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::{router::OpenApiRouter, routes};

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(list, place))
        .routes(routes!(read))
        .routes(routes!(lift))
}

/// `POST /factory/quarantines`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct PlaceQuarantine {
    /// The workload's name in the specifications.
    workload: String,
    /// The version refused.
    version: String,
    /// Why it must not run.
    reason: String,
}

/// `POST /factory/quarantines/{quarantineId}/lift`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct LiftQuarantine {
    /// Why the version may run again.
    reason: String,
}

/// `?state=in-force|lifted&workload=&cursor=&limit=`.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
struct QuarantineQuery {
    /// `in-force` or `lifted`; both when absent.
    state: Option<String>,
    /// Only this workload's.
    workload: Option<String>,
    cursor: Option<String>,
    limit: Option<u64>,
}

/// The tenant's quarantines, newest first, a page at a time.
#[utoipa::path(operation_id = "listQuarantines", get, path = "/factory/quarantines", tag = "runs",
    security(("bearer" = ["factory.provisioning.read"])),
    params(QuarantineQuery),
    responses(
        (status = 200, description = "A page of quarantines, newest first", body = Paged<Quarantine>),
        Problems<400>, Problems<401>, Problems<403>, Problems<500>,
    ))]
async fn list(
    State(state): State<AppState>,
    auth: Scoped<ProvisioningRead>,
    Query(q): Query<QuarantineQuery>,
) -> Result<axum::Json<Paged<Quarantine>>, Error> {
    let filter = Filter {
        state: crate::query::optional::<QuarantineState>(q.state.as_deref())?,
        workload: q.workload,
    };
    let page = Page {
        cursor: q.cursor,
        limit: q.limit,
    };
    let (rows, limit) = page.rows()?;
    let items = quarantines::list(&state.db, auth.tenant(), &filter, &rows).await?;
    Ok(axum::Json(Paged::from_rows(
        items,
        limit,
        |q: &Quarantine| &q.quarantine_id,
    )))
}

/// Quarantines a workload's version for the tenant, with a reason (`VersionQuarantined`): from
/// now on nothing automatic applies a specification that carries it. Needs the `Operator` (or
/// `PlatformAdmin`) role. A version in quarantine already answers that quarantine (200).
#[utoipa::path(operation_id = "placeQuarantine", post, path = "/factory/quarantines", tag = "runs",
    security(("bearer" = ["factory.provisioning.apply"])),
    request_body = PlaceQuarantine,
    responses(
        (status = 201, description = "Placed; `Location` names it", body = Quarantine,
            headers(("Location" = String, description = "The quarantine's URL"))),
        (status = 200, description = "The version was in quarantine already", body = Quarantine),
        Problems<400>, Problems<401>, Problems<403>, Problems<413>, Problems<415>, Problems<422>, Problems<500>,
    ))]
#[tracing::instrument(skip_all, fields(tenant_id = %auth.tenant()))]
async fn place(
    State(state): State<AppState>,
    auth: Scoped<ProvisioningApply>,
    Json(body): Json<PlaceQuarantine>,
) -> Result<Response, Error> {
    auth.require_role(PRODUCTION_DECIDERS)?;
    let mut problems = Vec::new();
    if body.workload.trim().is_empty() {
        problems.push("workload must name a workload");
    }
    if body.version.trim().is_empty() {
        problems.push("version must name the version refused");
    }
    if body.reason.trim().is_empty() {
        problems.push("reason must say why the version must not run");
    }
    if !problems.is_empty() {
        return Err(Error::Unprocessable(problems.join("; ")));
    }
    let new = NewQuarantine {
        tenant_id: auth.tenant().to_owned(),
        workload: body.workload.trim().to_owned(),
        version: body.version.trim().to_owned(),
        source: QuarantineSource::Operator,
        reason: body.reason.trim().to_owned(),
        rollout_id: None,
        by: auth.subject().to_owned(),
    };
    let placed = quarantines::place_one_of(&state.db, new).await?;
    let status = match &placed {
        Placed::New(q) => {
            tracing::warn!(quarantine_id = %q.quarantine_id, workload = %q.workload, version = %q.version, "version quarantined");
            StatusCode::CREATED
        }
        Placed::Already(_) => StatusCode::OK,
    };
    let q = placed.quarantine().clone();
    let location = format!("/factory/quarantines/{}", q.quarantine_id);
    Ok((status, [(header::LOCATION, location)], axum::Json(q)).into_response())
}

/// One quarantine of the tenant.
#[utoipa::path(operation_id = "getQuarantine", get, path = "/factory/quarantines/{quarantineId}", tag = "runs",
    security(("bearer" = ["factory.provisioning.read"])),
    params(("quarantineId" = String, Path, description = "The quarantine id")),
    responses(
        (status = 200, description = "The quarantine", body = Quarantine),
        Problems<401>, Problems<403>, Problems<404>, Problems<500>,
    ))]
async fn read(
    State(state): State<AppState>,
    auth: Scoped<ProvisioningRead>,
    Path(id): Path<String>,
) -> Result<axum::Json<Quarantine>, Error> {
    quarantines::find(&state.db, auth.tenant(), &id)
        .await?
        .map(axum::Json)
        .ok_or_else(|| not_found(&id))
}

fn not_found(id: &str) -> Error {
    Error::NotFound(format!("quarantine `{id}` not found"))
}

/// Lifts a quarantine, with a reason (`QuarantineLifted`): the version may be applied again.
/// Needs the `Operator` (or `PlatformAdmin`) role. A quarantine lifted before answers as it
/// was (200), unchanged.
#[utoipa::path(operation_id = "liftQuarantine", post, path = "/factory/quarantines/{quarantineId}/lift", tag = "runs",
    security(("bearer" = ["factory.provisioning.apply"])),
    params(("quarantineId" = String, Path, description = "The quarantine id")),
    request_body = LiftQuarantine,
    responses(
        (status = 200, description = "Lifted (now or before)", body = Quarantine),
        Problems<400>, Problems<401>, Problems<403>, Problems<404>, Problems<413>, Problems<415>, Problems<422>, Problems<500>,
    ))]
#[tracing::instrument(skip_all, fields(tenant_id = %auth.tenant(), quarantine_id = %id))]
async fn lift(
    State(state): State<AppState>,
    auth: Scoped<ProvisioningApply>,
    Path(id): Path<String>,
    Json(body): Json<LiftQuarantine>,
) -> Result<axum::Json<Quarantine>, Error> {
    auth.require_role(PRODUCTION_DECIDERS)?;
    if body.reason.trim().is_empty() {
        return Err(Error::Unprocessable(
            "reason must say why the version may run again".into(),
        ));
    }
    let lifted = quarantines::lift(&state.db, auth.tenant(), &id, auth.subject(), &body.reason)
        .await?
        .ok_or_else(|| not_found(&id))?;
    Ok(axum::Json(match lifted {
        Lifted::Now(q) => {
            tracing::warn!(by = %auth.subject(), "quarantine lifted");
            q
        }
        Lifted::Before(q) => q,
    }))
}
