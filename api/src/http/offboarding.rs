//! `/fleet/offboarding-orders`: an instance leaving operation. An order exports the instance's
//! record as one archive with a manifest and checksums, verifies it, then decommissions the
//! instance and marks it `offboarded` (workflow `offboarding-order/{orderId}`,
//! `models::offboarding`). The archive is downloaded with its own scope.

use super::pagination::{Page, Paged};
use crate::auth::{FleetExport, FleetOperate, MetaRead, PRODUCTION_DECIDERS, Scoped};
use crate::json::Json;
use crate::openapi::Problems;
use crate::query::Query;
use crate::tenancy::require_active_environment;
use crate::{AppState, Error};
use axum::extract::{Path, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use object_store::path::Path as Key;
use runtime_cloud_models::offboarding::{OrderState, checksum};
use runtime_cloud_store::offboarding::{self as orders, Order, Placed};
use runtime_cloud_workflows::contracts::OrderInput;
use runtime_cloud_workflows::ids::offboarding_order_id;
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::{router::OpenApiRouter, routes};

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(list, place))
        .routes(routes!(read))
        .routes(routes!(archive))
}

/// `POST /fleet/offboarding-orders`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct PlaceOrder {
    /// The instance (environment) leaving operation.
    environment_id: String,
    /// Why (a contract ended …).
    reason: String,
}

/// An order, with its workflow.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
struct OrderView {
    /// `offboarding-order/{orderId}`.
    workflow_id: String,
    #[serde(flatten)]
    order: Order,
}

impl From<Order> for OrderView {
    fn from(order: Order) -> Self {
        Self {
            workflow_id: offboarding_order_id(&order.order_id),
            order,
        }
    }
}

/// `?environmentId=&state=&cursor=&limit=`.
#[derive(Debug, Deserialize, IntoParams)]
#[serde(rename_all = "camelCase")]
#[into_params(parameter_in = Query, rename_all = "camelCase")]
struct OrderQuery {
    /// Only this instance's.
    environment_id: Option<String>,
    /// `exporting`, `exported`, `decommissioning`, `completed` or `failed`.
    state: Option<String>,
    cursor: Option<String>,
    limit: Option<u64>,
}

/// Orders an instance off-boarded: its record is exported and verified, then it is
/// decommissioned (in production the run waits for an approval like any apply) and counted
/// `offboarded`. Needs the `Operator` (or `PlatformAdmin`) role. An instance with an order
/// under way or done answers that order (200), starting its workflow if it had not started.
#[utoipa::path(operation_id = "placeOffboardingOrder", post, path = "/fleet/offboarding-orders", tag = "fleet",
    security(("bearer" = ["factory.fleet.operate"])),
    request_body = PlaceOrder,
    responses(
        (status = 202, description = "Placed; `Location` names it", body = OrderView,
            headers(("Location" = String, description = "The order's URL"))),
        (status = 200, description = "The instance's order under way or done", body = OrderView),
        Problems<400>, Problems<401>, Problems<403>, Problems<404>, Problems<409>, Problems<413>, Problems<415>, Problems<422>, Problems<500>, Problems<503>,
    ))]
#[tracing::instrument(skip_all, fields(tenant_id = %auth.tenant(), environment_id = %body.environment_id))]
async fn place(
    State(state): State<AppState>,
    auth: Scoped<FleetOperate>,
    Json(body): Json<PlaceOrder>,
) -> Result<Response, Error> {
    auth.require_role(PRODUCTION_DECIDERS)?;
    if body.reason.trim().is_empty() {
        return Err(Error::Unprocessable(
            "reason must say why the instance leaves operation".into(),
        ));
    }
    let env = match orders::open_order_of(&state.db, auth.tenant(), &body.environment_id).await? {
        // Placed before: the environment may be retired by it since.
        Some(order) => return answer_existing(&state, order).await,
        None => require_active_environment(&state.db, auth.tenant(), &body.environment_id).await?,
    };
    let placed = match orders::place(&state.db, &env, &body.reason, auth.subject()).await {
        Ok(placed) => placed,
        Err(runtime_cloud_store::Error::Duplicate { .. }) => {
            let order = orders::open_order_of(&state.db, auth.tenant(), &body.environment_id)
                .await?
                .ok_or_else(|| Error::internal(anyhow::anyhow!("an order vanished")))?;
            return answer_existing(&state, order).await;
        }
        Err(e) => return Err(e.into()),
    };
    let order = match placed {
        Placed::New(order) => order,
        Placed::Existing(order) => return answer_existing(&state, order).await,
    };
    start(&state, &order).await?;
    tracing::warn!(order_id = %order.order_id, by = %auth.subject(), "off-boarding ordered");
    let location = format!("/fleet/offboarding-orders/{}", order.order_id);
    Ok((
        StatusCode::ACCEPTED,
        [(header::LOCATION, location)],
        axum::Json(OrderView::from(order)),
    )
        .into_response())
}

/// Starts the order's workflow (a start finds a running one and leaves it). The order is
/// recorded: when Temporal cannot start it, the same request again starts it, and so does
/// every worker as it starts.
async fn start(state: &AppState, order: &Order) -> Result<(), Error> {
    let input = OrderInput {
        order_id: order.order_id.clone(),
        tenant_id: order.tenant_id.clone(),
        environment_id: order.environment_id.clone(),
    };
    let started =
        runtime_cloud_temporal::offboarding::start(&state.temporal, &state.task_queue, input);
    runtime_cloud_temporal::in_current_span(started)
        .await
        .map_err(|e| {
            tracing::error!(error = %e, "cannot start the off-boarding order");
            Error::Unavailable(
                "the order is recorded but the workflow service did not start it: send the \
                 same request again"
                    .into(),
            )
        })
}

async fn answer_existing(state: &AppState, order: Order) -> Result<Response, Error> {
    if !order.state.ended() {
        start(state, &order).await?;
    }
    Ok((StatusCode::OK, axum::Json(OrderView::from(order))).into_response())
}

/// The tenant's off-boarding orders, newest first, a page at a time.
#[utoipa::path(operation_id = "listOffboardingOrders", get, path = "/fleet/offboarding-orders", tag = "fleet",
    security(("bearer" = ["factory.meta.read"])),
    params(OrderQuery),
    responses(
        (status = 200, description = "A page of orders", body = Paged<OrderView>),
        Problems<400>, Problems<401>, Problems<403>, Problems<500>,
    ))]
async fn list(
    State(state): State<AppState>,
    auth: Scoped<MetaRead>,
    Query(q): Query<OrderQuery>,
) -> Result<axum::Json<Paged<OrderView>>, Error> {
    let order_state = crate::query::optional::<OrderState>(q.state.as_deref())?;
    let page = Page {
        cursor: q.cursor,
        limit: q.limit,
    };
    let (rows, limit) = page.rows()?;
    let items = orders::list(
        &state.db,
        auth.tenant(),
        q.environment_id.as_deref(),
        order_state,
        &rows,
    )
    .await?;
    let views = items.into_iter().map(OrderView::from).collect();
    Ok(axum::Json(Paged::from_rows(
        views,
        limit,
        |o: &OrderView| &o.order.order_id,
    )))
}

async fn find(state: &AppState, tenant: &str, id: &str) -> Result<Order, Error> {
    orders::find(&state.db, tenant, id)
        .await?
        .ok_or_else(|| Error::NotFound(format!("off-boarding order `{id}` not found")))
}

/// One off-boarding order: its state, its archive (key, checksum, manifest) once verified, its
/// decommission run, why it failed.
#[utoipa::path(operation_id = "getOffboardingOrder", get, path = "/fleet/offboarding-orders/{orderId}", tag = "fleet",
    security(("bearer" = ["factory.meta.read"])),
    params(("orderId" = String, Path, description = "The order id")),
    responses(
        (status = 200, description = "The order", body = OrderView),
        Problems<401>, Problems<403>, Problems<404>, Problems<500>,
    ))]
async fn read(
    State(state): State<AppState>,
    auth: Scoped<MetaRead>,
    Path(id): Path<String>,
) -> Result<axum::Json<OrderView>, Error> {
    Ok(axum::Json(find(&state, auth.tenant(), &id).await?.into()))
}

/// The order's archive (`application/x-tar`: `manifest.json` and every file it lists), once
/// exported and verified; its checksum is checked again as it is read (`ETag`: the
/// `sha256:`). 404 before it is verified.
#[utoipa::path(operation_id = "getOffboardingArchive", get, path = "/fleet/offboarding-orders/{orderId}/archive", tag = "fleet",
    security(("bearer" = ["factory.fleet.export"])),
    params(("orderId" = String, Path, description = "The order id")),
    responses(
        (status = 200, description = "The archive", content_type = "application/x-tar", body = Vec<u8>),
        Problems<401>, Problems<403>, Problems<404>, Problems<500>,
    ))]
async fn archive(
    State(state): State<AppState>,
    auth: Scoped<FleetExport>,
    Path(id): Path<String>,
) -> Result<Response, Error> {
    let order = find(&state, auth.tenant(), &id).await?;
    let (Some(key), Some(sha256)) = (&order.archive_key, &order.archive_sha256) else {
        return Err(Error::NotFound(format!(
            "off-boarding order `{id}` has no verified archive yet (it is {})",
            order.state
        )));
    };
    let location = Key::parse(key).map_err(|e| Error::Internal(e.into()))?;
    let bytes = match state.artifacts.get(&location).await {
        Ok(got) => got.bytes().await.map_err(|e| Error::Internal(e.into()))?,
        Err(object_store::Error::NotFound { .. }) => {
            return Err(Error::internal(anyhow::anyhow!(
                "the archive of order {id} is missing from the artifact store"
            )));
        }
        Err(e) => return Err(Error::Internal(e.into())),
    };
    if checksum(&bytes) != *sha256 {
        return Err(Error::internal(anyhow::anyhow!(
            "the archive of order {id} does not match its recorded checksum"
        )));
    }
    let filename = format!("{}-{}.tar", order.environment_id, order.order_id);
    Ok((
        [
            (header::CONTENT_TYPE, "application/x-tar".to_owned()),
            (
                header::CONTENT_DISPOSITION,
                format!("attachment; filename=\"{filename}\""),
            ),
            (header::ETAG, format!("\"{sha256}\"")),
        ],
        bytes.to_vec(),
    )
        .into_response())
}
