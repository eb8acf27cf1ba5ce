//! `/factory/environments/{environmentId}/change-windows` and `/factory/change-windows` (a
//! tenant's defaults, for every environment): when the product may change an environment. A
//! run plans at any time, and waits before it applies while the windows are closed
//! (`waitingForWindow`), unless an Operator breaks glass (`POST …/runs/{id}/break-glass`).

use super::pagination::{Page, Paged};
use crate::auth::{PRODUCTION_DECIDERS, ProvisioningApply, ProvisioningRead, Scoped};
use crate::json::Json;
use crate::openapi::Problems;
use crate::query::Query;
use crate::tenancy::require_environment;
use crate::{AppState, Error};
use axum::extract::{Path, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use runtime_cloud_models::windows::{ChangeWindow, WindowSpec};
use runtime_cloud_store::windows;
use utoipa_axum::{router::OpenApiRouter, routes};

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(list_for_environment, create_for_environment))
        .routes(routes!(delete_for_environment))
        .routes(routes!(list_defaults, create_default))
        .routes(routes!(delete_default))
}

/// Creates a window in a scope, after checking the caller may and the window reads.
async fn create(
    state: &AppState,
    auth: &Scoped<ProvisioningApply>,
    environment_id: Option<&str>,
    spec: WindowSpec,
) -> Result<Response, Error> {
    auth.require_role(PRODUCTION_DECIDERS)?;
    if let Some(env) = environment_id {
        require_environment(&state.db, auth.tenant(), env).await?;
    }
    let problems = spec.problems();
    if !problems.is_empty() {
        return Err(Error::Unprocessable(problems.join("; ")));
    }
    let window = windows::create(
        &state.db,
        auth.tenant(),
        environment_id,
        spec,
        auth.subject(),
    )
    .await?;
    tracing::info!(window_id = %window.window_id, kind = %window.spec.kind, "change window created");
    let location = match environment_id {
        Some(env) => format!(
            "/factory/environments/{env}/change-windows/{}",
            window.window_id
        ),
        None => format!("/factory/change-windows/{}", window.window_id),
    };
    Ok((
        StatusCode::CREATED,
        [(header::LOCATION, location)],
        axum::Json(window),
    )
        .into_response())
}

/// Removes a window of a scope.
async fn delete(
    state: &AppState,
    auth: &Scoped<ProvisioningApply>,
    environment_id: Option<&str>,
    window_id: &str,
) -> Result<StatusCode, Error> {
    auth.require_role(PRODUCTION_DECIDERS)?;
    if let Some(env) = environment_id {
        require_environment(&state.db, auth.tenant(), env).await?;
    }
    match windows::delete(&state.db, auth.tenant(), environment_id, window_id).await? {
        true => Ok(StatusCode::NO_CONTENT),
        false => Err(Error::NotFound(format!(
            "change window `{window_id}` not found"
        ))),
    }
}

/// The environment's own change windows (its tenant's defaults are at
/// `/factory/change-windows`).
#[utoipa::path(operation_id = "listChangeWindows", get, path = "/factory/environments/{environmentId}/change-windows", tag = "environments",
    security(("bearer" = ["factory.provisioning.read"])),
    params(("environmentId" = String, Path, description = "The environment id"), Page),
    responses(
        (status = 200, description = "A page of windows, oldest first", body = Paged<ChangeWindow>),
        Problems<400>, Problems<401>, Problems<403>, Problems<404>, Problems<500>,
    ))]
async fn list_for_environment(
    State(state): State<AppState>,
    auth: Scoped<ProvisioningRead>,
    Path(environment_id): Path<String>,
    Query(page): Query<Page>,
) -> Result<axum::Json<Paged<ChangeWindow>>, Error> {
    require_environment(&state.db, auth.tenant(), &environment_id).await?;
    let (rows, limit) = page.rows()?;
    let items = windows::list(&state.db, auth.tenant(), Some(&environment_id), &rows).await?;
    Ok(axum::Json(Paged::from_rows(
        items,
        limit,
        |i: &ChangeWindow| &i.window_id,
    )))
}

/// Creates a change window of the environment: `{kind: allow|deny, schedule, duration,
/// timeZone?, reason?}`. Needs the `Operator` (or `PlatformAdmin`) role.
#[utoipa::path(operation_id = "createChangeWindow", post, path = "/factory/environments/{environmentId}/change-windows", tag = "environments",
    security(("bearer" = ["factory.provisioning.apply"])),
    params(("environmentId" = String, Path, description = "The environment id")),
    request_body = WindowSpec,
    responses(
        (status = 201, description = "Created; `Location` names it", body = ChangeWindow,
            headers(("Location" = String, description = "The window's URL"))),
        Problems<400>, Problems<401>, Problems<403>, Problems<404>, Problems<413>, Problems<415>, Problems<422>, Problems<500>,
    ))]
#[tracing::instrument(skip_all, fields(tenant_id = %auth.tenant(), environment_id = %environment_id))]
async fn create_for_environment(
    State(state): State<AppState>,
    auth: Scoped<ProvisioningApply>,
    Path(environment_id): Path<String>,
    Json(spec): Json<WindowSpec>,
) -> Result<Response, Error> {
    create(&state, &auth, Some(&environment_id), spec).await
}

/// Removes one of the environment's change windows.
#[utoipa::path(operation_id = "deleteChangeWindow", delete, path = "/factory/environments/{environmentId}/change-windows/{windowId}", tag = "environments",
    security(("bearer" = ["factory.provisioning.apply"])),
    params(("environmentId" = String, Path, description = "The environment id"),
           ("windowId" = String, Path, description = "The window id")),
    responses(
        (status = 204, description = "Removed"),
        Problems<401>, Problems<403>, Problems<404>, Problems<500>,
    ))]
async fn delete_for_environment(
    State(state): State<AppState>,
    auth: Scoped<ProvisioningApply>,
    Path((environment_id, window_id)): Path<(String, String)>,
) -> Result<StatusCode, Error> {
    delete(&state, &auth, Some(&environment_id), &window_id).await
}

/// The tenant's default change windows, which apply to every environment of the tenant.
#[utoipa::path(operation_id = "listDefaultChangeWindows", get, path = "/factory/change-windows", tag = "environments",
    security(("bearer" = ["factory.provisioning.read"])),
    params(Page),
    responses(
        (status = 200, description = "A page of windows, oldest first", body = Paged<ChangeWindow>),
        Problems<400>, Problems<401>, Problems<403>, Problems<500>,
    ))]
async fn list_defaults(
    State(state): State<AppState>,
    auth: Scoped<ProvisioningRead>,
    Query(page): Query<Page>,
) -> Result<axum::Json<Paged<ChangeWindow>>, Error> {
    let (rows, limit) = page.rows()?;
    let items = windows::list(&state.db, auth.tenant(), None, &rows).await?;
    Ok(axum::Json(Paged::from_rows(
        items,
        limit,
        |i: &ChangeWindow| &i.window_id,
    )))
}

/// Creates a default change window of the tenant (every environment).
#[utoipa::path(operation_id = "createDefaultChangeWindow", post, path = "/factory/change-windows", tag = "environments",
    security(("bearer" = ["factory.provisioning.apply"])),
    request_body = WindowSpec,
    responses(
        (status = 201, description = "Created; `Location` names it", body = ChangeWindow,
            headers(("Location" = String, description = "The window's URL"))),
        Problems<400>, Problems<401>, Problems<403>, Problems<413>, Problems<415>, Problems<422>, Problems<500>,
    ))]
#[tracing::instrument(skip_all, fields(tenant_id = %auth.tenant()))]
async fn create_default(
    State(state): State<AppState>,
    auth: Scoped<ProvisioningApply>,
    Json(spec): Json<WindowSpec>,
) -> Result<Response, Error> {
    create(&state, &auth, None, spec).await
}

/// Removes a default change window of the tenant.
#[utoipa::path(operation_id = "deleteDefaultChangeWindow", delete, path = "/factory/change-windows/{windowId}", tag = "environments",
    security(("bearer" = ["factory.provisioning.apply"])),
    params(("windowId" = String, Path, description = "The window id")),
    responses(
        (status = 204, description = "Removed"),
        Problems<401>, Problems<403>, Problems<404>, Problems<500>,
    ))]
async fn delete_default(
    State(state): State<AppState>,
    auth: Scoped<ProvisioningApply>,
    Path(window_id): Path<String>,
) -> Result<StatusCode, Error> {
    delete(&state, &auth, None, &window_id).await
}
