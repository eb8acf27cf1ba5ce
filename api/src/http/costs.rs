//! Cost from what is observed (`models::cost`): a tenant's price table (`/factory/prices`) and
//! what its fleet costs an hour, by instance, product and customer tenant (`/fleet/costs`). No
//! price table, no cost: the routes say so instead of showing a number.

use super::pagination::{Page, Paged};
use crate::auth::{FleetOperate, MetaRead, Scoped};
use crate::json::Json;
use crate::openapi::Problems;
use crate::query::Query;
use crate::{AppState, Error};
use axum::extract::State;
use runtime_cloud_models::EnvironmentClass;
use runtime_cloud_models::cost::{Cost, PriceTable};
use runtime_cloud_store::fleet;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::{router::OpenApiRouter, routes};

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(get_prices, put_prices))
        .routes(routes!(costs))
}

/// What the routes answer for a tenant without prices.
const NO_PRICES: &str =
    "the tenant has no price table: PUT /factory/prices to price what its environments run";

/// The tenant's price table; 404 (saying how to set one) when it has none.
#[utoipa::path(operation_id = "getPrices", get, path = "/factory/prices", tag = "fleet",
    security(("bearer" = ["factory.meta.read"])),
    responses(
        (status = 200, description = "The tenant's prices", body = PriceTable),
        Problems<401>, Problems<403>, Problems<404>, Problems<500>,
    ))]
async fn get_prices(
    State(state): State<AppState>,
    auth: Scoped<MetaRead>,
) -> Result<axum::Json<PriceTable>, Error> {
    runtime_cloud_store::prices::get(&state.db, auth.tenant())
        .await?
        .map(axum::Json)
        .ok_or_else(|| Error::NotFound(NO_PRICES.into()))
}

/// Sets the tenant's price table, replacing any it had, and prices every one of its
/// environments' last observations with it at once.
#[utoipa::path(operation_id = "putPrices", put, path = "/factory/prices", tag = "fleet",
    security(("bearer" = ["factory.fleet.operate"])),
    request_body = PriceTable,
    responses(
        (status = 200, description = "The prices set", body = PriceTable),
        Problems<400>, Problems<401>, Problems<403>, Problems<413>, Problems<415>, Problems<422>, Problems<500>,
    ))]
async fn put_prices(
    State(state): State<AppState>,
    auth: Scoped<FleetOperate>,
    Json(table): Json<PriceTable>,
) -> Result<axum::Json<PriceTable>, Error> {
    let problems = table.problems();
    if !problems.is_empty() {
        return Err(Error::Unprocessable(problems.join("; ")));
    }
    runtime_cloud_transactions::set_prices(&state.db, auth.tenant(), &table, auth.subject())
        .await?;
    Ok(axum::Json(table))
}

/// `?productId=&class=&labelSelector=&customerTenantId=&cursor=&limit=`.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(rename_all = "camelCase")]
struct CostFilter {
    /// Only this product's instances.
    product_id: Option<String>,
    /// `production` or `non-production`.
    class: Option<String>,
    /// Only instances with these labels: `region=eu,tier=gold`.
    label_selector: Option<String>,
    /// Only this customer tenant's instances.
    customer_tenant_id: Option<String>,
    /// The `nextCursor` of the previous page.
    cursor: Option<String>,
    /// 1–200, default 50.
    #[param(minimum = 1, maximum = 200)]
    limit: Option<u64>,
}

/// One instance's hourly cost.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct InstanceCost {
    pub environment_id: String,
    pub product_id: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub customer_tenant_id: Option<String>,
    pub class: EnvironmentClass,
    /// As last priced; none before its first observation since the tenant has prices.
    pub cost: Option<Cost>,
}

/// `GET /fleet/costs`: the selected instances' costs a page at a time, and their totals.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct FleetCosts {
    /// Whether the tenant has a price table; without one every cost is none, and `reason`
    /// says why.
    pub priced: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The price table's currency.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub currency: Option<String>,
    /// Every selected instance's hourly cost summed (not only this page's).
    pub hourly: f64,
    /// Selected instances priced, and not (never observed since the tenant has prices).
    pub instances_priced: u64,
    pub instances_unpriced: u64,
    /// Hourly cost by product, and by customer tenant (for the instances that name one).
    pub by_product: BTreeMap<String, f64>,
    pub by_customer_tenant: BTreeMap<String, f64>,
    #[serde(flatten)]
    pub page: Paged<InstanceCost>,
}

/// What the tenant's active instances cost an hour, from what their last observations show
/// (each workload's requested CPU and memory times its replicas, each resource of a runner's
/// state by type) at the tenant's prices: by instance a page at a time, with the totals of
/// every selected instance by product and customer tenant.
#[utoipa::path(operation_id = "fleetCosts", get, path = "/fleet/costs", tag = "fleet",
    security(("bearer" = ["factory.meta.read"])),
    params(CostFilter),
    responses(
        (status = 200, description = "Costs, and why there are none when there are none", body = FleetCosts),
        Problems<400>, Problems<401>, Problems<403>, Problems<500>,
    ))]
async fn costs(
    State(state): State<AppState>,
    auth: Scoped<MetaRead>,
    Query(q): Query<CostFilter>,
) -> Result<axum::Json<FleetCosts>, Error> {
    let tenant = auth.tenant();
    let filter = super::fleet::selection(
        q.product_id,
        q.class.as_deref(),
        q.label_selector.as_deref(),
        q.customer_tenant_id,
    )?;
    let (rows, limit) = Page {
        cursor: q.cursor,
        limit: q.limit,
    }
    .rows()?;
    let prices = runtime_cloud_store::prices::get(&state.db, tenant).await?;
    let totals = fleet::cost_totals(&state.db, tenant, &filter).await?;
    let items = fleet::page(&state.db, tenant, &filter, &rows)
        .await?
        .into_iter()
        .map(|o| InstanceCost {
            environment_id: o.environment.environment_id,
            product_id: o.environment.project_id,
            customer_tenant_id: o.environment.customer_tenant_id,
            class: o.environment.class,
            // Always the current table's: setting one prices every inventory again.
            cost: o.cost,
        })
        .collect();
    Ok(axum::Json(FleetCosts {
        priced: prices.is_some(),
        reason: prices.is_none().then(|| NO_PRICES.to_owned()),
        currency: prices.map(|p| p.currency),
        hourly: totals.hourly,
        instances_priced: totals.priced,
        instances_unpriced: totals.unpriced,
        by_product: totals.by_product,
        by_customer_tenant: totals.by_customer_tenant,
        page: Paged::from_rows(items, limit, |i: &InstanceCost| &i.environment_id),
    }))
}
