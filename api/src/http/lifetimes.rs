//! An environment's life: extend an ephemeral environment's expiry, decommission an
//! environment now, and the tenant's limit on how long its environments may live.

use crate::auth::{
    CapacityManage, CapacityRead, PRODUCTION_DECIDERS, ProvisioningApply, QUOTA_SETTERS, Scoped,
};
use crate::json::Json;
use crate::openapi::Problems;
use crate::tenancy::require_active_environment;
use crate::{AppState, Error};
use axum::extract::{Path, State};
use axum::http::StatusCode;
use chrono::{DateTime, Utc};
use runtime_cloud_models::environments::EnvironmentKey;
use runtime_cloud_models::lifetime::{Lifetime, parse_ttl, text_of};
use runtime_cloud_store::environments::{self, Environment, Extended};
use runtime_cloud_workflows::environment_lifetime::DecommissionAsked;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use utoipa_axum::{router::OpenApiRouter, routes};

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(extend))
        .routes(routes!(decommission))
        .routes(routes!(read_limit, set_limit))
}

/// The expiry a registration or an extension asks for, checked against the tenant's limit;
/// none when neither `ttl` nor `expiresAt` is given.
pub(crate) async fn expiry(
    state: &AppState,
    tenant_id: &str,
    ttl: Option<&str>,
    expires_at: Option<DateTime<Utc>>,
) -> Result<Option<DateTime<Utc>>, Error> {
    let Some(lifetime) = Lifetime::of(ttl, expires_at).map_err(Error::Unprocessable)? else {
        return Ok(None);
    };
    let limit = environments::lifetime_limit(&state.db, tenant_id).await?;
    lifetime
        .expiry(Utc::now(), limit.max_ttl)
        .map(Some)
        .map_err(Error::Unprocessable)
}

/// Starts the lifetime of an ephemeral environment just registered. A start that fails is
/// logged: every worker starts the lifetimes of the ephemeral environments as it starts.
pub(crate) async fn start_lifetime(state: &AppState, env: &Environment) {
    if env.expires_at.is_none() {
        return;
    }
    let started =
        runtime_cloud_temporal::lifetimes::start(&state.temporal, &state.task_queue, key(env));
    if let Err(e) = runtime_cloud_temporal::in_current_span(started).await {
        tracing::warn!(error = %e, "cannot start the environment's lifetime");
    }
}

fn key(env: &Environment) -> EnvironmentKey {
    EnvironmentKey {
        tenant_id: env.tenant_id.clone(),
        environment_id: env.environment_id.clone(),
    }
}

/// `POST /factory/environments/{environmentId}/extend`: `{"ttl": "2h"}` (from now) or
/// `{"expiresAt": "…"}`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct Extend {
    /// The new time to live, from now (`20s`, `90m`, `72h`, `7d`).
    ttl: Option<String>,
    /// The new expiry (RFC 3339).
    expires_at: Option<DateTime<Utc>>,
}

/// Moves an ephemeral environment's expiry (within the tenant's limit, from now); recorded as
/// `EnvironmentExpiryExtended` naming who did it. 409 for an environment that is not
/// ephemeral, or retired.
#[utoipa::path(operation_id = "extendEnvironment", post, path = "/factory/environments/{environmentId}/extend", tag = "environments",
    security(("bearer" = ["factory.provisioning.apply"])),
    params(("environmentId" = String, Path, description = "The environment id")),
    request_body = Extend,
    responses(
        (status = 200, description = "The environment with its new expiry", body = Environment),
        Problems<400>, Problems<401>, Problems<403>, Problems<404>, Problems<409>, Problems<413>, Problems<415>, Problems<422>, Problems<500>,
    ))]
#[tracing::instrument(skip_all, fields(tenant_id = %auth.tenant(), environment_id = %environment_id))]
async fn extend(
    State(state): State<AppState>,
    auth: Scoped<ProvisioningApply>,
    Path(environment_id): Path<String>,
    Json(body): Json<Extend>,
) -> Result<axum::Json<Environment>, Error> {
    let env = require_active_environment(&state.db, auth.tenant(), &environment_id).await?;
    let Some(expires_at) =
        expiry(&state, auth.tenant(), body.ttl.as_deref(), body.expires_at).await?
    else {
        return Err(Error::Unprocessable("give ttl or expiresAt".into()));
    };
    let not_ephemeral = || {
        Error::Conflict(format!(
            "environment `{environment_id}` is not ephemeral: it has no expiry to move"
        ))
    };
    if env.expires_at.is_none() {
        return Err(not_ephemeral());
    }
    let extended = environments::extend(
        &state.db,
        auth.tenant(),
        &environment_id,
        expires_at,
        auth.subject(),
    )
    .await?;
    let after = match extended {
        Extended::Moved(after) => *after,
        Extended::Refused(env) if env.retired() => {
            return Err(Error::Conflict(format!(
                "environment `{environment_id}` is retired"
            )));
        }
        Extended::Refused(_) => return Err(not_ephemeral()),
    };
    tracing::info!(%expires_at, "environment expiry extended");
    // The lifetime reads the row when it wakes; telling it wakes it now (it would otherwise
    // wake at the old warning or expiry and read the new one then).
    let told =
        runtime_cloud_temporal::lifetimes::changed(&state.temporal, &state.task_queue, key(&after));
    if let Err(e) = runtime_cloud_temporal::in_current_span(told).await {
        tracing::warn!(error = %e, "the environment's lifetime was not told of its new expiry");
    }
    Ok(axum::Json(after))
}

/// `POST /factory/environments/{environmentId}/decommission`: `{"reason": "…"}`.
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct Decommission {
    /// Why (a ticket, "preview of PR 42 merged").
    #[serde(default)]
    reason: String,
}

/// The environment's lifetime took the decommission.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
struct DecommissionRequested {
    environment_id: String,
    decommission_requested: bool,
    /// The workflow that records the decommission run and follows it.
    workflow_id: String,
}

/// Decommissions the environment now: its lifetime records a `decommission` run that destroys
/// what the environment runs (planned first; in production it waits for an approval like any
/// apply), and the environment is retired once it applied. Needs the `Operator` or
/// `PlatformAdmin` role.
#[utoipa::path(operation_id = "decommissionEnvironment", post, path = "/factory/environments/{environmentId}/decommission", tag = "environments",
    security(("bearer" = ["factory.provisioning.apply"])),
    params(("environmentId" = String, Path, description = "The environment id")),
    request_body(content = Option<Decommission>, description = "Optional"),
    responses(
        (status = 202, description = "The decommission is under way", body = DecommissionRequested),
        Problems<400>, Problems<401>, Problems<403>, Problems<404>, Problems<409>, Problems<413>, Problems<422>, Problems<500>, Problems<503>,
    ))]
#[tracing::instrument(skip_all, fields(tenant_id = %auth.tenant(), environment_id = %environment_id))]
async fn decommission(
    State(state): State<AppState>,
    auth: Scoped<ProvisioningApply>,
    Path(environment_id): Path<String>,
    body: axum::body::Bytes,
) -> Result<(StatusCode, axum::Json<DecommissionRequested>), Error> {
    auth.require_role(PRODUCTION_DECIDERS)?;
    let reason = crate::json::parse_optional::<Decommission>(&body)?.reason;
    let env = require_active_environment(&state.db, auth.tenant(), &environment_id).await?;
    let asked = DecommissionAsked {
        by: auth.subject().to_owned(),
        reason,
    };
    let key = key(&env);
    let workflow_id =
        runtime_cloud_workflows::ids::environment_lifetime_id(&key.tenant_id, &key.environment_id);
    let told = runtime_cloud_temporal::lifetimes::decommission(
        &state.temporal,
        &state.task_queue,
        key,
        asked,
    );
    runtime_cloud_temporal::in_current_span(told)
        .await
        .map_err(|e| {
            tracing::error!(error = %e, "cannot ask the environment's lifetime to decommission it");
            Error::Unavailable("the workflow service is unavailable; retry later".into())
        })?;
    tracing::warn!(by = %auth.subject(), "decommission requested");
    Ok((
        StatusCode::ACCEPTED,
        axum::Json(DecommissionRequested {
            environment_id,
            decommission_requested: true,
            workflow_id,
        }),
    ))
}

/// The tenant's limit on how long its environments may live.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
struct LifetimeLimit {
    /// The longest time to live, from now, at registration and at each extension (`30d`).
    max_ttl: String,
    /// Who set it; absent: the default.
    #[serde(skip_serializing_if = "Option::is_none")]
    set_by: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    updated_at: Option<DateTime<Utc>>,
}

impl From<environments::LifetimeLimit> for LifetimeLimit {
    fn from(l: environments::LifetimeLimit) -> Self {
        Self {
            max_ttl: text_of(l.max_ttl),
            set_by: l.set_by,
            updated_at: l.updated_at,
        }
    }
}

/// The tenant's limit on its ephemeral environments' lifetimes.
#[utoipa::path(operation_id = "getEnvironmentLifetimeLimit", get, path = "/factory/capacity/environment-lifetime", tag = "capacity",
    security(("bearer" = ["factory.capacity.read"])),
    responses(
        (status = 200, description = "The limit", body = LifetimeLimit),
        Problems<401>, Problems<403>, Problems<500>,
    ))]
async fn read_limit(
    State(state): State<AppState>,
    auth: Scoped<CapacityRead>,
) -> Result<axum::Json<LifetimeLimit>, Error> {
    Ok(axum::Json(
        environments::lifetime_limit(&state.db, auth.tenant())
            .await?
            .into(),
    ))
}

/// `PUT /factory/capacity/environment-lifetime`: `{"maxTtl": "72h"}`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct SetLimit {
    max_ttl: String,
}

/// Sets the tenant's limit on its ephemeral environments' lifetimes (registrations and
/// extensions from now on); needs the `PlatformAdmin` role.
#[utoipa::path(operation_id = "setEnvironmentLifetimeLimit", put, path = "/factory/capacity/environment-lifetime", tag = "capacity",
    security(("bearer" = ["factory.capacity.manage"])),
    request_body = SetLimit,
    responses(
        (status = 200, description = "The limit as set", body = LifetimeLimit),
        Problems<400>, Problems<401>, Problems<403>, Problems<413>, Problems<415>, Problems<422>, Problems<500>,
    ))]
async fn set_limit(
    State(state): State<AppState>,
    auth: Scoped<CapacityManage>,
    Json(body): Json<SetLimit>,
) -> Result<axum::Json<LifetimeLimit>, Error> {
    auth.require_role(QUOTA_SETTERS)?;
    let max_ttl = parse_ttl(&body.max_ttl)
        .filter(|d| *d >= runtime_cloud_models::lifetime::MIN_TTL)
        .ok_or_else(|| {
            Error::Unprocessable(format!(
                "maxTtl `{}` is not a duration of at least 10s such as `72h` or `30d`",
                body.max_ttl
            ))
        })?;
    let limit =
        environments::set_lifetime_limit(&state.db, auth.tenant(), max_ttl, auth.subject()).await?;
    Ok(axum::Json(limit.into()))
}
