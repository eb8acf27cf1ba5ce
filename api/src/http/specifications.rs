//! `/factory/provisioning/specifications`: declare and list desired-state versions.

use super::environments::{require as require_environment, valid_id};
use super::pagination::{Page, Paged};
use crate::auth::{ProvisioningApply, ProvisioningRead, Scoped};
use crate::json::Json;
use crate::openapi::Problems;
use crate::query::Query;
use crate::{AppState, Error};
use axum::extract::State;
use axum::http::StatusCode;
use chrono::Utc;
use runtime_cloud_activities::store::{self, NewSpecification};
use runtime_cloud_store::entities::deployment_specifications as specs;
use runtime_cloud_models::{Refs, SpecificationKind, Workload};
use sea_orm::{ColumnTrait, EntityTrait, QueryFilter};
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;
use utoipa::{IntoParams, ToSchema};
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
    #[schema(value_type = SpecificationKind)]
    pub kind: String,
    pub program_ref: String,
    pub program_version: String,
    pub release_id: Option<String>,
    pub strategy: Option<String>,
    #[schema(value_type = BTreeMap<String, String>)]
    pub config_refs: serde_json::Value,
    #[schema(value_type = BTreeMap<String, String>)]
    pub secret_refs: serde_json::Value,
    #[schema(value_type = Vec<Workload>)]
    pub workloads: serde_json::Value,
    /// 1, 2, 3 … per environment; a version never changes.
    pub version: i32,
    pub declared_at: chrono::DateTime<Utc>,
}

impl From<specs::Model> for SpecificationView {
    fn from(m: specs::Model) -> Self {
        Self {
            specification_id: m.specification_id,
            tenant_id: m.tenant_id,
            project_id: m.project_id,
            environment_id: m.environment_id,
            kind: m.kind,
            program_ref: m.program_ref,
            program_version: m.program_version,
            release_id: m.release_id,
            strategy: m.strategy,
            config_refs: m.config_refs,
            secret_refs: m.secret_refs,
            workloads: m.workloads,
            version: m.version,
            declared_at: m.declared_at,
        }
    }
}

/// A secret reference names where the value lives (`secretbroker://payments/db-password`),
/// never the value itself. Anything that does not look like a reference is refused, and the
/// error never repeats it.
fn is_reference(v: &str) -> bool {
    match v.split_once("://") {
        Some((scheme, rest)) => {
            !scheme.is_empty()
                && scheme.chars().all(|c| {
                    c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '+' | '-' | '.')
                })
                && !rest.is_empty()
                && !rest.chars().any(char::is_whitespace)
        }
        None => false,
    }
}

fn check_refs(what: &str, refs: &Refs) -> Result<(), Error> {
    for (name, reference) in refs {
        if !is_reference(reference) {
            return Err(Error::Unprocessable(format!(
                "{what}.{name} must be a reference such as `secretbroker://path/key`; values are never accepted"
            )));
        }
    }
    Ok(())
}

fn validate(body: &DeclareSpecification) -> Result<(), Error> {
    valid_id("environmentId", &body.environment_id)?;
    if body.program_ref.trim().is_empty() || body.program_version.trim().is_empty() {
        return Err(Error::Unprocessable(
            "programRef and programVersion are required".into(),
        ));
    }
    check_refs("configRefs", &body.config_refs)?;
    check_refs("secretRefs", &body.secret_refs)?;
    let mut names = BTreeSet::new();
    for w in &body.workloads {
        valid_id("workloads[].name", &w.name)?;
        if !names.insert(w.name.as_str()) {
            return Err(Error::Unprocessable(format!(
                "workload `{}` is declared twice",
                w.name
            )));
        }
        if w.kind.trim().is_empty() || w.version.trim().is_empty() {
            return Err(Error::Unprocessable(format!(
                "workload `{}` needs a kind and a version",
                w.name
            )));
        }
        check_refs(&format!("workloads.{}.configRefs", w.name), &w.config_refs)?;
        check_refs(&format!("workloads.{}.secretRefs", w.name), &w.secret_refs)?;
    }
    Ok(())
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
    validate(&body)?;
    let env = require_environment(&state, auth.tenant(), &body.environment_id).await?;
    let row = store::declare_specification(
        &state.db,
        NewSpecification {
            tenant_id: auth.tenant().to_owned(),
            project_id: env.project_id,
            environment_id: body.environment_id,
            kind: body.kind,
            program_ref: body.program_ref,
            program_version: body.program_version,
            release_id: body.release_id.map(|u| u.to_string()),
            strategy: body.strategy,
            config_refs: body.config_refs,
            secret_refs: body.secret_refs,
            workloads: body.workloads,
        },
    )
    .await
    .map_err(Error::internal)?;
    Ok((StatusCode::CREATED, axum::Json(row.into())))
}

/// `?environmentId=…&cursor=…&limit=…`.
#[derive(Debug, Deserialize, IntoParams)]
#[serde(rename_all = "camelCase")]
#[into_params(parameter_in = Query)]
struct ListQuery {
    /// Only this environment's versions.
    environment_id: Option<String>,
    /// The `nextCursor` of the previous page.
    cursor: Option<String>,
    /// 1–200, default 50.
    #[param(minimum = 1, maximum = 200)]
    limit: Option<u64>,
}

/// Specification versions, newest first, a page at a time.
#[utoipa::path(operation_id = "listSpecifications", get, path = "/factory/provisioning/specifications", tag = "specifications",
    security(("bearer" = ["factory.provisioning.read"])),
    params(ListQuery),
    responses(
        (status = 200, description = "A page of versions", body = Paged<SpecificationView>),
        Problems<400>, Problems<401>, Problems<403>, Problems<500>,
    ))]
async fn list(
    State(state): State<AppState>,
    auth: Scoped<ProvisioningRead>,
    Query(q): Query<ListQuery>,
) -> Result<axum::Json<Paged<SpecificationView>>, Error> {
    let mut select = specs::Entity::find().filter(specs::Column::TenantId.eq(auth.tenant()));
    if let Some(env) = &q.environment_id {
        select = select.filter(specs::Column::EnvironmentId.eq(env));
    }
    let page = Page {
        cursor: q.cursor,
        limit: q.limit,
    };
    let paged = page
        .fetch(
            &state.db,
            select,
            specs::Column::SpecificationId,
            SpecificationView::from,
            |s| &s.specification_id,
        )
        .await?;
    Ok(axum::Json(paged))
}

#[cfg(test)]
mod tests {
    use super::is_reference;

    #[test]
    fn references_are_uris_and_values_are_not() {
        assert!(is_reference("secretbroker://payments/db-password"));
        assert!(is_reference("kv://vault-1/app#key"));
        assert!(!is_reference("hunter2"));
        assert!(!is_reference("postgres password with spaces://x"));
        assert!(!is_reference("secretbroker://"));
    }
}
