//! `/factory/provisioning/specifications`: declare and list desired-state versions.

use super::pagination::{EnvironmentPage, Paged};
use crate::auth::{ProvisioningApply, ProvisioningRead, Scoped};
use crate::json::Json;
use crate::openapi::Problems;
use crate::query::Query;
use crate::tenancy::require_active_environment;
use crate::{AppState, Error};
use axum::extract::State;
use axum::http::StatusCode;
use chrono::Utc;
use runtime_cloud_models::validation::Declaration;
use runtime_cloud_models::{Refs, SpecificationKind, Workload};
use runtime_cloud_store::specifications::{self, Specification};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use utoipa_axum::{router::OpenApiRouter, routes};

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(list, declare))
}

/// `POST /factory/provisioning/specifications`: declares the next version for an environment.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DeclareSpecification {
    pub environment_id: String,
    pub kind: SpecificationKind,
    pub program_ref: String,
    pub program_version: String,
    pub release_id: Option<uuid::Uuid>,
    pub strategy: Option<String>,
    /// Config Platform keys by reference (`name` → URI).
    pub config_refs: Refs,
    /// Secret Broker references (`name` → URI such as `secretbroker://payments/db`); a value
    /// that is not a reference is refused with 422 and never echoed.
    pub secret_refs: Refs,
    pub workloads: Vec<Workload>,
}

/// A specification version as the API shows it.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct SpecificationView {
    pub specification_id: String,
    pub tenant_id: String,
    pub project_id: String,
    pub environment_id: String,
    pub kind: SpecificationKind,
    pub program_ref: String,
    pub program_version: String,
    pub release_id: Option<String>,
    pub strategy: Option<String>,
    pub config_refs: Refs,
    pub secret_refs: Refs,
    pub workloads: Vec<Workload>,
    /// 1, 2, 3 … per environment; a version never changes.
    pub version: i32,
    pub declared_at: chrono::DateTime<Utc>,
}

impl From<Specification> for SpecificationView {
    fn from(m: Specification) -> Self {
        let d = m.declaration;
        Self {
            specification_id: m.specification_id,
            tenant_id: d.tenant_id,
            project_id: d.project_id,
            environment_id: d.environment_id,
            kind: d.kind,
            program_ref: d.program_ref,
            program_version: d.program_version,
            release_id: d.release_id,
            strategy: d.strategy,
            config_refs: d.config_refs,
            secret_refs: d.secret_refs,
            workloads: d.workloads,
            version: m.version,
            declared_at: m.declared_at,
        }
    }
}

/// Declares the next specification version of an environment.
#[utoipa::path(operation_id = "declareSpecification", post, path = "/factory/provisioning/specifications", tag = "specifications",
    security(("bearer" = ["factory.provisioning.apply"])),
    request_body = DeclareSpecification,
    responses(
        (status = 201, description = "Declared as the next version", body = SpecificationView),
        Problems<400>, Problems<401>, Problems<403>, Problems<404>, Problems<413>, Problems<415>, Problems<422>, Problems<500>,
    ))]
async fn declare(
    State(state): State<AppState>,
    auth: Scoped<ProvisioningApply>,
    Json(body): Json<DeclareSpecification>,
) -> Result<(StatusCode, axum::Json<SpecificationView>), Error> {
    let mut declaration = Declaration {
        tenant_id: auth.tenant().to_owned(),
        // Known once the environment is found, below.
        project_id: String::new(),
        environment_id: body.environment_id,
        kind: body.kind,
        program_ref: body.program_ref,
        program_version: body.program_version,
        release_id: body.release_id.map(|u| u.to_string()),
        strategy: body.strategy,
        config_refs: body.config_refs,
        secret_refs: body.secret_refs,
        workloads: body.workloads,
    };
    // The store checks every declaration; checking here first answers an invalid body with
    // 422 whether or not its environment exists.
    declaration.validate()?;
    let env =
        require_active_environment(&state.db, auth.tenant(), &declaration.environment_id).await?;
    declaration.project_id = env.project_id;
    let spec = specifications::declare(&state.db, &declaration).await?;
    Ok((StatusCode::CREATED, axum::Json(spec.into())))
}

/// Specification versions, newest first, a page at a time.
#[utoipa::path(operation_id = "listSpecifications", get, path = "/factory/provisioning/specifications", tag = "specifications",
    security(("bearer" = ["factory.provisioning.read"])),
    params(EnvironmentPage),
    responses(
        (status = 200, description = "A page of versions", body = Paged<SpecificationView>),
        Problems<400>, Problems<401>, Problems<403>, Problems<500>,
    ))]
async fn list(
    State(state): State<AppState>,
    auth: Scoped<ProvisioningRead>,
    Query(q): Query<EnvironmentPage>,
) -> Result<axum::Json<Paged<SpecificationView>>, Error> {
    let (rows, limit) = q.page().rows()?;
    let specs =
        specifications::list(&state.db, auth.tenant(), q.environment_id.as_deref(), &rows).await?;
    let views = specs.into_iter().map(SpecificationView::from).collect();
    Ok(axum::Json(Paged::from_rows(
        views,
        limit,
        |s: &SpecificationView| &s.specification_id,
    )))
}
