//! `/factory/environments`: register a tenant's environments and their class.

use super::pagination::Items;
use crate::auth::{ProvisioningApply, ProvisioningRead, Scoped};
use crate::json::Json;
use crate::openapi::Problems;
use crate::{AppState, Error};
use axum::extract::State;
use axum::http::StatusCode;
use runtime_cloud_models::EnvironmentClass;
use runtime_cloud_models::validation::check_id;
use runtime_cloud_store::environments::{self, Environment, NewEnvironment};
use serde::Deserialize;
use utoipa::ToSchema;
use utoipa_axum::{router::OpenApiRouter, routes};

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(list, register))
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
    /// The adapter that serves it; only `sandbox` is built in.
    #[serde(default)]
    pub target: Option<String>,
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
    let target = body.target.unwrap_or_else(|| "sandbox".to_owned());
    if target != "sandbox" {
        return Err(Error::Unprocessable(format!(
            "target `{target}` is not available; use `sandbox`"
        )));
    }
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
        target,
    };
    let env = match environments::register(&state.db, new).await {
        Ok(env) => env,
        // Another request registered it since the check above.
        Err(runtime_cloud_store::Error::Duplicate { .. }) => {
            return Err(already_exists(&body.environment_id));
        }
        Err(e) => return Err(e.into()),
    };
    Ok((StatusCode::CREATED, axum::Json(env)))
}

/// The caller's environments, by id.
#[utoipa::path(operation_id = "listEnvironments", get, path = "/factory/environments", tag = "environments",
    security(("bearer" = ["factory.provisioning.read"])),
    responses(
        (status = 200, description = "Every environment of the tenant", body = Items<Environment>),
        Problems<401>, Problems<403>, Problems<500>,
    ))]
async fn list(
    State(state): State<AppState>,
    auth: Scoped<ProvisioningRead>,
) -> Result<axum::Json<Items<Environment>>, Error> {
    let rows = environments::list(&state.db, auth.tenant()).await?;
    Ok(axum::Json(Items { items: rows }))
}
