//! `/fleet`: fleet operations (spec 004, FleetOperationsHost), a module of the same binary. The
//! inventory is derived from what observation keeps — products (a project is a product), their
//! instances (environments) with the release, specification version and health their last
//! observation shows — never declared by hand. Plus the fleet's health, its summary, and
//! incidents.

use super::pagination::{Page, Paged};
use crate::auth::{FleetOperate, HealthRead, MetaRead, Scoped};
use crate::json::Json;
use crate::openapi::Problems;
use crate::query::Query;
use crate::tenancy::require_environment;
use crate::{AppState, Error};
use axum::extract::{Path, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use chrono::{DateTime, Utc};
use runtime_cloud_models::EnvironmentClass;
use runtime_cloud_models::fleet::{FleetSummary, IncidentSource, IncidentState, instance_health};
use runtime_cloud_store::incidents::{self, Incident, NewIncident};
use runtime_cloud_store::{fleet, metrics};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::{router::OpenApiRouter, routes};

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(health))
        .routes(routes!(summary))
        .routes(routes!(products))
        .routes(routes!(instances))
        .routes(routes!(list_incidents, open_incident))
        .routes(routes!(resolve_incident))
}

/// One instance of a product, as observed.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Instance {
    pub environment_id: String,
    /// The product (its project).
    pub product_id: String,
    pub class: EnvironmentClass,
    /// `active`, `retired` (decommissioned) or `offboarded` (left operation through an
    /// off-boarding order).
    pub state: runtime_cloud_models::lifetime::EnvironmentState,
    /// The release its last observation shows; none before the first.
    pub release_id: Option<String>,
    /// The specification version last applied to it.
    pub specification_version: Option<i32>,
    /// `healthy`, `progressing`, `degraded`, `unavailable` (its worst workload), `empty`
    /// (it runs nothing) or `unknown` (never observed).
    pub health: String,
    /// Workloads observed, and how many run every replica ready.
    pub workloads: usize,
    pub workloads_ready: usize,
    pub stale: bool,
    pub observed_at: Option<DateTime<Utc>>,
    /// Open drift findings.
    pub open_drift: u64,
    /// What rollouts select it by.
    #[schema(value_type = std::collections::BTreeMap<String, String>)]
    pub labels: runtime_cloud_models::environments::Labels,
    /// The customer tenant inside the product, where given.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub customer_tenant_id: Option<String>,
}

/// What an instance's observation shows, staleness judged now.
fn as_instances(
    state: &AppState,
    observed: Vec<runtime_cloud_store::fleet::Observed>,
) -> Vec<Instance> {
    let now = Utc::now();
    observed
        .into_iter()
        .map(|o| {
            let stale = state
                .inventory
                .is_stale(o.flagged_stale, o.observed_at, now);
            let health = match o.observed_at {
                None => "unknown".to_owned(),
                Some(_) => {
                    instance_health(o.workloads.iter().map(|w| w.health.as_str())).to_owned()
                }
            };
            Instance {
                environment_id: o.environment.environment_id,
                product_id: o.environment.project_id,
                class: o.environment.class,
                state: o.environment.state,
                release_id: o.release_id,
                specification_version: o.specification_version,
                health,
                workloads: o.workloads.len(),
                workloads_ready: o
                    .workloads
                    .iter()
                    .filter(|w| w.replicas_desired > 0 && w.replicas_ready >= w.replicas_desired)
                    .count(),
                stale,
                observed_at: o.observed_at,
                open_drift: o.open_drift,
                labels: o.environment.labels,
                customer_tenant_id: o.environment.customer_tenant_id,
            }
        })
        .collect()
}

/// `?productId=&class=&labelSelector=&cursor=&limit=`.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(rename_all = "camelCase")]
struct InstanceFilter {
    /// Only this product's instances.
    product_id: Option<String>,
    /// `production` or `non-production`.
    class: Option<String>,
    /// Only instances with these labels: `region=eu,tier=gold`.
    label_selector: Option<String>,
    /// The `nextCursor` of the previous page.
    cursor: Option<String>,
    /// 1–200, default 50.
    #[param(minimum = 1, maximum = 200)]
    limit: Option<u64>,
}

/// The instances a fleet query selects: by product, class (`production`, `non-production`),
/// label selector (`region=eu,tier=gold`) and customer tenant; 400 for a class or selector
/// that does not read.
pub(crate) fn selection(
    product_id: Option<String>,
    class: Option<&str>,
    label_selector: Option<&str>,
    customer_tenant_id: Option<String>,
) -> Result<runtime_cloud_store::fleet::InstanceFilter, Error> {
    let labels = label_selector
        .map(runtime_cloud_models::environments::parse_selector)
        .transpose()
        .map_err(Error::BadRequest)?
        .unwrap_or_default();
    Ok(runtime_cloud_store::fleet::InstanceFilter {
        project_id: product_id,
        class: crate::query::optional::<EnvironmentClass>(class)?,
        labels,
        customer_tenant_id,
    })
}

/// The tenant's instances with what their last observation shows, by environment id, a page
/// at a time.
#[utoipa::path(operation_id = "listFleetInstances", get, path = "/fleet/instances", tag = "fleet",
    security(("bearer" = ["factory.meta.read"])),
    params(InstanceFilter),
    responses(
        (status = 200, description = "A page of instances", body = Paged<Instance>),
        Problems<400>, Problems<401>, Problems<403>, Problems<500>,
    ))]
async fn instances(
    State(state): State<AppState>,
    auth: Scoped<MetaRead>,
    Query(q): Query<InstanceFilter>,
) -> Result<axum::Json<Paged<Instance>>, Error> {
    let filter = selection(
        q.product_id,
        q.class.as_deref(),
        q.label_selector.as_deref(),
        None,
    )?;
    let page = Page {
        cursor: q.cursor,
        limit: q.limit,
    };
    let (rows, limit) = page.rows()?;
    let observed =
        runtime_cloud_store::fleet::page(&state.db, auth.tenant(), &filter, &rows).await?;
    Ok(axum::Json(Paged::from_rows(
        as_instances(&state, observed),
        limit,
        |i: &Instance| &i.environment_id,
    )))
}

/// A product and its instances.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Product {
    pub product_id: String,
    pub instances: usize,
    /// Instances by class.
    pub instances_by_class: BTreeMap<String, usize>,
    /// Releases observed, with how many instances run each (`none` before any).
    pub releases: BTreeMap<String, usize>,
    /// Instances whose health is not `healthy`.
    pub unhealthy: usize,
}

/// The tenant's products (a project is a product), with their instances as observed, by id,
/// a page at a time.
#[utoipa::path(operation_id = "listFleetProducts", get, path = "/fleet/products", tag = "fleet",
    security(("bearer" = ["factory.meta.read"])),
    params(Page),
    responses(
        (status = 200, description = "A page of products", body = Paged<Product>),
        Problems<400>, Problems<401>, Problems<403>, Problems<500>,
    ))]
async fn products(
    State(state): State<AppState>,
    auth: Scoped<MetaRead>,
    Query(page): Query<Page>,
) -> Result<axum::Json<Paged<Product>>, Error> {
    let (rows, limit) = page.rows()?;
    let ids = runtime_cloud_store::fleet::products(&state.db, auth.tenant(), &rows).await?;
    let observed = runtime_cloud_store::fleet::instances_of(&state.db, auth.tenant(), &ids).await?;
    let mut by_product: BTreeMap<String, Product> = ids
        .iter()
        .map(|id| {
            let product = Product {
                product_id: id.clone(),
                instances: 0,
                instances_by_class: BTreeMap::new(),
                releases: BTreeMap::new(),
                unhealthy: 0,
            };
            (id.clone(), product)
        })
        .collect();
    for i in as_instances(&state, observed) {
        let Some(p) = by_product.get_mut(&i.product_id) else {
            continue;
        };
        p.instances += 1;
        *p.instances_by_class
            .entry(i.class.as_str().to_owned())
            .or_default() += 1;
        *p.releases
            .entry(i.release_id.clone().unwrap_or_else(|| "none".into()))
            .or_default() += 1;
        if i.health != "healthy" {
            p.unhealthy += 1;
        }
    }
    Ok(axum::Json(Paged::from_rows(
        by_product.into_values().collect(),
        limit,
        |p: &Product| &p.product_id,
    )))
}

/// Fleet-wide counts of the tenant: operated products, instances by environment class, stale
/// instances, open drift, open incidents, active rollouts.
#[utoipa::path(operation_id = "fleetSummary", get, path = "/fleet/meta/summary", tag = "fleet",
    security(("bearer" = ["factory.meta.read"])),
    responses(
        (status = 200, description = "Counts", body = FleetSummary),
        Problems<401>, Problems<403>, Problems<500>,
    ))]
async fn summary(
    State(state): State<AppState>,
    auth: Scoped<MetaRead>,
) -> Result<axum::Json<FleetSummary>, Error> {
    let tenant = auth.tenant();
    let mut by_class: BTreeMap<String, u64> = [
        (EnvironmentClass::Production.as_str().to_owned(), 0),
        (EnvironmentClass::NonProduction.as_str().to_owned(), 0),
    ]
    .into();
    let mut products = std::collections::BTreeSet::new();
    for (class, project, n) in fleet::classes_and_projects(&state.db, tenant).await? {
        *by_class.entry(class).or_default() += n;
        products.insert(project);
    }
    // Staleness and drift as `GET /metrics` counts them: kept counts, not a read of every
    // instance's observation (which grew with the fleet: 10,000 inventories a request).
    let counts = metrics::fleet_counts(&state.db, tenant, Utc::now(), &state.inventory).await?;
    Ok(axum::Json(FleetSummary {
        operated_products: products.len() as u64,
        instances_by_class: by_class,
        stale_instances: counts.stale_environments,
        open_drift: counts.open_drift,
        open_incidents: incidents::count_open(&state.db, tenant).await?,
        active_rollouts: runtime_cloud_store::rollouts::count_active(&state.db, tenant).await?,
        offboarded_instances: runtime_cloud_store::offboarding::count_offboarded(&state.db, tenant)
            .await?,
        observation_age: metrics::observation_ages(&state.db, Utc::now(), Some(tenant))
            .await?
            .remove(tenant),
        hourly_cost: match runtime_cloud_store::prices::get(&state.db, tenant).await? {
            Some(prices) => Some(runtime_cloud_models::fleet::HourlyCost {
                currency: prices.currency,
                hourly: fleet::hourly_cost(&state.db, tenant).await?,
            }),
            None => None,
        },
    }))
}

/// One dependency's health.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Dependency {
    /// `readStore`, `temporal`, `nats`.
    pub name: &'static str,
    /// `ok` or `unavailable`.
    pub status: &'static str,
}

/// An inbound consumer's backlog.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ConsumerLag {
    pub consumer: &'static str,
    /// Events received and not yet handled.
    pub pending: i64,
}

/// `GET /fleet/health`.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct FleetHealth {
    /// Always `ok` when this answers.
    pub liveness: &'static str,
    /// `ok` when every dependency is, else `unavailable`.
    pub readiness: &'static str,
    pub dependencies: Vec<Dependency>,
    /// Each inbound consumer's backlog (when NATS is configured).
    pub inbox_lag: Vec<ConsumerLag>,
}

fn status(ok: bool) -> &'static str {
    if ok { "ok" } else { "unavailable" }
}

/// Liveness, readiness and each dependency's health: the read store, Temporal, and (when
/// configured) NATS with the inbound consumer's backlog. 503 when a dependency is unavailable.
#[utoipa::path(operation_id = "fleetHealth", get, path = "/fleet/health", tag = "fleet",
    security(("bearer" = ["factory.health.read"])),
    responses(
        (status = 200, description = "Every dependency answers", body = FleetHealth),
        (status = 503, description = "A dependency does not answer; `dependencies` says which", body = FleetHealth),
        Problems<401>, Problems<403>, Problems<500>,
    ))]
async fn health(
    State(state): State<AppState>,
    _auth: Scoped<HealthRead>,
) -> (StatusCode, axum::Json<FleetHealth>) {
    let (db, temporal) = super::health::dependencies(&state).await;
    let mut dependencies = vec![
        Dependency {
            name: "readStore",
            status: status(db),
        },
        Dependency {
            name: "temporal",
            status: status(temporal),
        },
    ];
    let lag = state.inbox_lag.load(std::sync::atomic::Ordering::Relaxed);
    let mut inbox_lag = Vec::new();
    if lag >= 0 {
        // The consumer has fetched from NATS at least once (it stays -1 until then).
        dependencies.push(Dependency {
            name: "nats",
            status: "ok",
        });
        inbox_lag.push(ConsumerLag {
            consumer: crate::inbound::names::CONSUMER,
            pending: lag,
        });
    }
    let ok = dependencies.iter().all(|d| d.status == "ok");
    let code = if ok {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    (
        code,
        axum::Json(FleetHealth {
            liveness: "ok",
            readiness: status(ok),
            dependencies,
            inbox_lag,
        }),
    )
}

/// `?state=open|resolved&cursor=&limit=`.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
struct IncidentQuery {
    /// `open` or `resolved`.
    state: Option<String>,
    cursor: Option<String>,
    limit: Option<u64>,
}

/// The tenant's incidents, newest first, a page at a time.
#[utoipa::path(operation_id = "listIncidents", get, path = "/fleet/incidents", tag = "fleet",
    security(("bearer" = ["factory.meta.read"])),
    params(IncidentQuery),
    responses(
        (status = 200, description = "A page of incidents", body = Paged<Incident>),
        Problems<400>, Problems<401>, Problems<403>, Problems<500>,
    ))]
async fn list_incidents(
    State(state): State<AppState>,
    auth: Scoped<MetaRead>,
    Query(q): Query<IncidentQuery>,
) -> Result<axum::Json<Paged<Incident>>, Error> {
    let incident_state = crate::query::optional::<IncidentState>(q.state.as_deref())?;
    let page = Page {
        cursor: q.cursor,
        limit: q.limit,
    };
    let (rows, limit) = page.rows()?;
    let items = incidents::list(&state.db, auth.tenant(), incident_state, &rows).await?;
    Ok(axum::Json(Paged::from_rows(
        items,
        limit,
        |i: &Incident| &i.incident_id,
    )))
}

/// `POST /fleet/incidents`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct OpenIncident {
    title: String,
    /// The instance it is about, if one.
    environment_id: Option<String>,
}

/// Opens an incident by hand.
#[utoipa::path(operation_id = "openIncident", post, path = "/fleet/incidents", tag = "fleet",
    security(("bearer" = ["factory.fleet.operate"])),
    request_body = OpenIncident,
    responses(
        (status = 201, description = "Opened; `Location` names it", body = Incident,
            headers(("Location" = String, description = "The incident's URL"))),
        Problems<400>, Problems<401>, Problems<403>, Problems<404>, Problems<413>, Problems<415>, Problems<422>, Problems<500>,
    ))]
async fn open_incident(
    State(state): State<AppState>,
    auth: Scoped<FleetOperate>,
    Json(body): Json<OpenIncident>,
) -> Result<Response, Error> {
    if body.title.trim().is_empty() {
        return Err(Error::Unprocessable("title must say what is wrong".into()));
    }
    if let Some(env) = &body.environment_id {
        require_environment(&state.db, auth.tenant(), env).await?;
    }
    let incident = incidents::open(
        &state.db,
        NewIncident {
            tenant_id: auth.tenant().to_owned(),
            title: body.title,
            source: IncidentSource::Operator,
            environment_id: body.environment_id,
            rollout_id: None,
            opened_by: auth.subject().to_owned(),
        },
    )
    .await?;
    let location = format!("/fleet/incidents/{}", incident.incident_id);
    Ok((
        StatusCode::CREATED,
        [(header::LOCATION, location)],
        axum::Json(incident),
    )
        .into_response())
}

/// `POST /fleet/incidents/{incidentId}/resolve`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct ResolveIncident {
    /// What was done.
    resolution: String,
}

/// Resolves an open incident with what was done; 409 when it is resolved already.
#[utoipa::path(operation_id = "resolveIncident", post, path = "/fleet/incidents/{incidentId}/resolve", tag = "fleet",
    security(("bearer" = ["factory.fleet.operate"])),
    params(("incidentId" = String, Path, description = "The incident id")),
    request_body = ResolveIncident,
    responses(
        (status = 200, description = "Resolved", body = Incident),
        Problems<400>, Problems<401>, Problems<403>, Problems<404>, Problems<409>, Problems<413>, Problems<415>, Problems<422>, Problems<500>,
    ))]
async fn resolve_incident(
    State(state): State<AppState>,
    auth: Scoped<FleetOperate>,
    Path(id): Path<String>,
    Json(body): Json<ResolveIncident>,
) -> Result<axum::Json<Incident>, Error> {
    if body.resolution.trim().is_empty() {
        return Err(Error::Unprocessable(
            "resolution must say what was done".into(),
        ));
    }
    match incidents::resolve(
        &state.db,
        auth.tenant(),
        &id,
        auth.subject(),
        &body.resolution,
    )
    .await?
    {
        None => Err(Error::NotFound(format!("incident `{id}` not found"))),
        Some((_, false)) => Err(Error::Conflict(format!(
            "incident `{id}` is resolved already"
        ))),
        Some((incident, true)) => Ok(axum::Json(incident)),
    }
}
