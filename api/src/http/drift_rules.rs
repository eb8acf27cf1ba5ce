//! `/factory/environments/{environmentId}/drift-rules` and `/factory/drift-rules` (a tenant's
//! defaults, for every environment): differences an operator expects. A finding a rule matches
//! is recorded suppressed by the next observation (`?state=suppressed` on `…/drift`), never
//! proposed; it reopens at the first observation after the rule expires or is removed.

use super::pagination::{Page, Paged};
use crate::auth::{RuntimeOperate, RuntimeRead, Scoped};
use crate::json::Json;
use crate::openapi::Problems;
use crate::query::Query;
use crate::tenancy::require_environment;
use crate::{AppState, Error};
use axum::extract::{Path, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use chrono::{DateTime, Utc};
use runtime_cloud_models::drift_rules::{DriftRule, RuleMatch};
use runtime_cloud_store::drift_rules::{self, NewRule};
use serde::Deserialize;
use utoipa::ToSchema;
use utoipa_axum::{router::OpenApiRouter, routes};

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(list_for_environment, create_for_environment))
        .routes(routes!(delete_for_environment))
        .routes(routes!(list_defaults, create_default))
        .routes(routes!(delete_default))
}

/// A rule to create.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct CreateRule {
    #[serde(flatten)]
    matcher: RuleMatch,
    /// Who answers for it.
    owner: String,
    /// Why the difference is expected.
    reason: String,
    /// When it stops suppressing; none: until removed (required for kind `posture`).
    expires_at: Option<DateTime<Utc>>,
}

impl CreateRule {
    fn into_new(
        self,
        auth: &Scoped<RuntimeOperate>,
        environment_id: Option<String>,
    ) -> Result<NewRule, Error> {
        let mut problems = self.matcher.problems();
        if self.owner.trim().is_empty() {
            problems.push("owner must name who answers for the rule".into());
        }
        if self.reason.trim().is_empty() {
            problems.push("reason must say why the difference is expected".into());
        }
        problems.extend(self.matcher.expiry_problem(self.expires_at));
        if let Some(at) = self.expires_at.filter(|at| *at <= Utc::now()) {
            problems.push(format!("expiresAt {at} is not in the future"));
        }
        if !problems.is_empty() {
            return Err(Error::Unprocessable(problems.join("; ")));
        }
        Ok(NewRule {
            tenant_id: auth.tenant().to_owned(),
            environment_id,
            matcher: self.matcher,
            owner: self.owner,
            reason: self.reason,
            expires_at: self.expires_at,
            created_by: auth.subject().to_owned(),
        })
    }
}

fn created(rule: DriftRule, location: String) -> Response {
    (
        StatusCode::CREATED,
        [(header::LOCATION, location)],
        axum::Json(rule),
    )
        .into_response()
}

/// The environment's own rules (its tenant's defaults are at `/factory/drift-rules`), oldest
/// first, expired ones included.
#[utoipa::path(operation_id = "listDriftRules", get, path = "/factory/environments/{environmentId}/drift-rules", tag = "inventory",
    security(("bearer" = ["factory.runtime.read"])),
    params(("environmentId" = String, Path, description = "The environment id"), Page),
    responses(
        (status = 200, description = "A page of rules, oldest first", body = Paged<DriftRule>),
        Problems<400>, Problems<401>, Problems<403>, Problems<404>, Problems<500>,
    ))]
async fn list_for_environment(
    State(state): State<AppState>,
    auth: Scoped<RuntimeRead>,
    Path(environment_id): Path<String>,
    Query(page): Query<Page>,
) -> Result<axum::Json<Paged<DriftRule>>, Error> {
    require_environment(&state.db, auth.tenant(), &environment_id).await?;
    let (rows, limit) = page.rows()?;
    let items = drift_rules::list(&state.db, auth.tenant(), Some(&environment_id), &rows).await?;
    Ok(axum::Json(Paged::from_rows(
        items,
        limit,
        |i: &DriftRule| &i.rule_id,
    )))
}

/// Creates a rule for the environment; findings it matches are suppressed from its next
/// observation on.
#[utoipa::path(operation_id = "createDriftRule", post, path = "/factory/environments/{environmentId}/drift-rules", tag = "inventory",
    security(("bearer" = ["factory.runtime.operate"])),
    params(("environmentId" = String, Path, description = "The environment id")),
    request_body = CreateRule,
    responses(
        (status = 201, description = "Created; `Location` names it", body = DriftRule,
            headers(("Location" = String, description = "The rule's URL"))),
        Problems<400>, Problems<401>, Problems<403>, Problems<404>, Problems<413>, Problems<415>, Problems<422>, Problems<500>,
    ))]
#[tracing::instrument(skip_all, fields(tenant_id = %auth.tenant(), environment_id = %environment_id))]
async fn create_for_environment(
    State(state): State<AppState>,
    auth: Scoped<RuntimeOperate>,
    Path(environment_id): Path<String>,
    Json(body): Json<CreateRule>,
) -> Result<Response, Error> {
    require_environment(&state.db, auth.tenant(), &environment_id).await?;
    let new = body.into_new(&auth, Some(environment_id.clone()))?;
    let rule = drift_rules::create(&state.db, new).await?;
    tracing::info!(rule_id = %rule.rule_id, "drift rule created");
    let location = format!(
        "/factory/environments/{environment_id}/drift-rules/{}",
        rule.rule_id
    );
    Ok(created(rule, location))
}

/// Removes one of the environment's rules; the findings it suppressed reopen at the next
/// observation.
#[utoipa::path(operation_id = "deleteDriftRule", delete, path = "/factory/environments/{environmentId}/drift-rules/{ruleId}", tag = "inventory",
    security(("bearer" = ["factory.runtime.operate"])),
    params(("environmentId" = String, Path, description = "The environment id"),
           ("ruleId" = String, Path, description = "The rule id")),
    responses(
        (status = 204, description = "Removed"),
        Problems<401>, Problems<403>, Problems<404>, Problems<500>,
    ))]
async fn delete_for_environment(
    State(state): State<AppState>,
    auth: Scoped<RuntimeOperate>,
    Path((environment_id, rule_id)): Path<(String, String)>,
) -> Result<StatusCode, Error> {
    require_environment(&state.db, auth.tenant(), &environment_id).await?;
    match drift_rules::delete(&state.db, auth.tenant(), Some(&environment_id), &rule_id).await? {
        true => Ok(StatusCode::NO_CONTENT),
        false => Err(Error::NotFound(format!(
            "drift rule `{rule_id}` of `{environment_id}` not found"
        ))),
    }
}

/// The tenant's default rules, which apply to every environment of the tenant.
#[utoipa::path(operation_id = "listDefaultDriftRules", get, path = "/factory/drift-rules", tag = "inventory",
    security(("bearer" = ["factory.runtime.read"])),
    params(Page),
    responses(
        (status = 200, description = "A page of rules, oldest first", body = Paged<DriftRule>),
        Problems<400>, Problems<401>, Problems<403>, Problems<500>,
    ))]
async fn list_defaults(
    State(state): State<AppState>,
    auth: Scoped<RuntimeRead>,
    Query(page): Query<Page>,
) -> Result<axum::Json<Paged<DriftRule>>, Error> {
    let (rows, limit) = page.rows()?;
    let items = drift_rules::list(&state.db, auth.tenant(), None, &rows).await?;
    Ok(axum::Json(Paged::from_rows(
        items,
        limit,
        |i: &DriftRule| &i.rule_id,
    )))
}

/// Creates a default rule of the tenant (every environment).
#[utoipa::path(operation_id = "createDefaultDriftRule", post, path = "/factory/drift-rules", tag = "inventory",
    security(("bearer" = ["factory.runtime.operate"])),
    request_body = CreateRule,
    responses(
        (status = 201, description = "Created; `Location` names it", body = DriftRule,
            headers(("Location" = String, description = "The rule's URL"))),
        Problems<400>, Problems<401>, Problems<403>, Problems<413>, Problems<415>, Problems<422>, Problems<500>,
    ))]
#[tracing::instrument(skip_all, fields(tenant_id = %auth.tenant()))]
async fn create_default(
    State(state): State<AppState>,
    auth: Scoped<RuntimeOperate>,
    Json(body): Json<CreateRule>,
) -> Result<Response, Error> {
    let new = body.into_new(&auth, None)?;
    let rule = drift_rules::create(&state.db, new).await?;
    tracing::info!(rule_id = %rule.rule_id, "default drift rule created");
    let location = format!("/factory/drift-rules/{}", rule.rule_id);
    Ok(created(rule, location))
}

/// Removes a default rule of the tenant.
#[utoipa::path(operation_id = "deleteDefaultDriftRule", delete, path = "/factory/drift-rules/{ruleId}", tag = "inventory",
    security(("bearer" = ["factory.runtime.operate"])),
    params(("ruleId" = String, Path, description = "The rule id")),
    responses(
        (status = 204, description = "Removed"),
        Problems<401>, Problems<403>, Problems<404>, Problems<500>,
    ))]
async fn delete_default(
    State(state): State<AppState>,
    auth: Scoped<RuntimeOperate>,
    Path(rule_id): Path<String>,
) -> Result<StatusCode, Error> {
    match drift_rules::delete(&state.db, auth.tenant(), None, &rule_id).await? {
        true => Ok(StatusCode::NO_CONTENT),
        false => Err(Error::NotFound(format!(
            "default drift rule `{rule_id}` not found"
        ))),
    }
}
