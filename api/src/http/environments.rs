//! `/factory/environments`: register a tenant's environments and their class.

use super::pagination::Items;
use crate::auth::{ProvisioningApply, ProvisioningRead, Scoped};
use crate::json::Json;
use crate::openapi::Problems;
use crate::{AppState, Error};
use axum::extract::State;
use axum::http::StatusCode;
use chrono::Utc;
use runtime_cloud_models::EnvironmentClass;
use runtime_cloud_store::entities::environments;
use sea_orm::{
    ActiveModelTrait, ActiveValue::Set, ColumnTrait, EntityTrait, QueryFilter, QueryOrder,
};
use serde::{Deserialize, Serialize};
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

/// An environment as the API shows it.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct EnvironmentView {
    pub environment_id: String,
    pub tenant_id: String,
    pub project_id: String,
    #[schema(value_type = EnvironmentClass)]
    pub class: String,
    pub target: String,
    pub created_at: chrono::DateTime<Utc>,
}

impl From<environments::Model> for EnvironmentView {
    fn from(m: environments::Model) -> Self {
        Self {
            environment_id: m.environment_id,
            tenant_id: m.tenant_id,
            project_id: m.project_id,
            class: m.class,
            target: m.target,
            created_at: m.created_at,
        }
    }
}

/// Checks an id used in paths and file names: 1–63 of `[A-Za-z0-9._-]`, not starting with a dot.
pub fn valid_id(what: &str, id: &str) -> Result<(), Error> {
    let ok = !id.is_empty()
        && id.len() <= 63
        && !id.starts_with('.')
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
    if ok {
        Ok(())
    } else {
        Err(Error::Unprocessable(format!(
            "{what} must be 1-63 characters of [A-Za-z0-9._-]"
        )))
    }
}

/// Registers an environment in the caller's tenant.
#[utoipa::path(operation_id = "registerEnvironment", post, path = "/factory/environments", tag = "environments",
    security(("bearer" = ["factory.provisioning.apply"])),
    request_body = RegisterEnvironment,
    responses(
        (status = 201, description = "Registered", body = EnvironmentView),
        Problems<400>, Problems<401>, Problems<403>, Problems<409>, Problems<413>, Problems<415>, Problems<422>, Problems<500>,
    ))]
async fn register(
    State(state): State<AppState>,
    auth: Scoped<ProvisioningApply>,
    Json(body): Json<RegisterEnvironment>,
) -> Result<(StatusCode, axum::Json<EnvironmentView>), Error> {
    valid_id("environmentId", &body.environment_id)?;
    valid_id("projectId", &body.project_id)?;
    let target = body.target.unwrap_or_else(|| "sandbox".to_owned());
    if target != "sandbox" {
        return Err(Error::Unprocessable(format!(
            "target `{target}` is not available; use `sandbox`"
        )));
    }
    if find(&state, auth.tenant(), &body.environment_id)
        .await?
        .is_some()
    {
        return Err(Error::Conflict(format!(
            "environment `{}` already exists",
            body.environment_id
        )));
    }
    let now = Utc::now();
    let row = environments::ActiveModel {
        id: Set(uuid::Uuid::now_v7().to_string()),
        tenant_id: Set(auth.tenant().to_owned()),
        environment_id: Set(body.environment_id.clone()),
        project_id: Set(body.project_id),
        class: Set(body.class.as_str().to_owned()),
        target: Set(target),
        created_at: Set(now),
        updated_at: Set(now),
    }
    .insert(&state.db)
    .await
    .map_err(|e| match e.sql_err() {
        Some(sea_orm::SqlErr::UniqueConstraintViolation(_)) => Error::Conflict(format!(
            "environment `{}` already exists",
            body.environment_id
        )),
        _ => Error::from(e),
    })?;
    Ok((StatusCode::CREATED, axum::Json(row.into())))
}

/// The caller's environments, by id.
#[utoipa::path(operation_id = "listEnvironments", get, path = "/factory/environments", tag = "environments",
    security(("bearer" = ["factory.provisioning.read"])),
    responses(
        (status = 200, description = "Every environment of the tenant", body = Items<EnvironmentView>),
        Problems<401>, Problems<403>, Problems<500>,
    ))]
async fn list(
    State(state): State<AppState>,
    auth: Scoped<ProvisioningRead>,
) -> Result<axum::Json<Items<EnvironmentView>>, Error> {
    let rows = environments::Entity::find()
        .filter(environments::Column::TenantId.eq(auth.tenant()))
        .order_by_asc(environments::Column::EnvironmentId)
        .all(&state.db)
        .await?;
    let items = rows.into_iter().map(Into::into).collect();
    Ok(axum::Json(Items { items }))
}

/// The caller's environment, if it exists in their tenant.
pub async fn find(
    state: &AppState,
    tenant: &str,
    environment_id: &str,
) -> Result<Option<environments::Model>, Error> {
    Ok(environments::Entity::find()
        .filter(environments::Column::TenantId.eq(tenant))
        .filter(environments::Column::EnvironmentId.eq(environment_id))
        .one(&state.db)
        .await?)
}

/// The caller's environment, or 404 (also for another tenant's: never confirm it exists).
pub async fn require(
    state: &AppState,
    tenant: &str,
    environment_id: &str,
) -> Result<environments::Model, Error> {
    find(state, tenant, environment_id)
        .await?
        .ok_or_else(|| Error::NotFound(format!("environment `{environment_id}` not found")))
}
