//! The fleet as observation sees it: a tenant's instances (environments) with the release,
//! specification version and health their last observation shows, never what was declared.
//! A product is a project. Three queries per read, whatever the fleet's size; a page of
//! instances reads its own environments' rows only.

use crate::entities::{drift_findings, environments as env_rows, runtime_inventories as inv};
use crate::{Error, Page, environments::Environment};
use chrono::{DateTime, Utc};
use runtime_cloud_models::EnvironmentClass;
use runtime_cloud_models::cost::Cost;
use runtime_cloud_models::environments::{Labels, selects};
use runtime_cloud_models::lifetime::EnvironmentState;
use runtime_cloud_models::observation::ObservedWorkload;
use sea_orm::{ColumnTrait, ConnectionTrait, EntityTrait, QueryFilter, QueryOrder, QuerySelect};
use std::collections::{BTreeMap, HashMap};

/// One instance and what its last observation shows.
#[derive(Debug, Clone, PartialEq)]
pub struct Observed {
    pub environment: Environment,
    /// None before the first observation.
    pub release_id: Option<String>,
    pub specification_version: Option<i32>,
    pub observed_at: Option<DateTime<Utc>>,
    /// Flagged stale by a failed observation or the sweep.
    pub flagged_stale: bool,
    pub workloads: Vec<ObservedWorkload>,
    /// Open findings, suppressed ones aside.
    pub open_drift: u64,
    /// What it costs an hour as last priced; none without a price table or an observation.
    pub cost: Option<Cost>,
}

/// The hourly costs of the instances a filter selects, summed.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CostTotals {
    /// Every priced instance's.
    pub hourly: f64,
    /// Instances priced, and not (never observed, or observed before a price table).
    pub priced: u64,
    pub unpriced: u64,
    pub by_product: BTreeMap<String, f64>,
    /// By customer tenant, for the instances that name one.
    pub by_customer_tenant: BTreeMap<String, f64>,
}

/// Which instances a page of the fleet holds: a product, a class, labels (every pair must
/// match); none narrows nothing.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct InstanceFilter {
    pub project_id: Option<String>,
    pub class: Option<EnvironmentClass>,
    pub labels: Labels,
    /// The customer tenant inside the product.
    pub customer_tenant_id: Option<String>,
}

/// Environments read at a time while a label selector skips some.
const SELECTION_BATCH: u64 = 500;

/// How many of the tenant's active environments each (class, project) pair has: one grouped read of
/// the tenant's rows, for the fleet's summary (which no longer reads every instance's
/// observation: the staleness and drift it counts are the kept counts of `GET /metrics`).
pub async fn classes_and_projects(
    db: &impl ConnectionTrait,
    tenant_id: &str,
) -> Result<Vec<(String, String, u64)>, Error> {
    let rows: Vec<(String, String, i64)> = env_rows::Entity::find()
        .select_only()
        .column(env_rows::Column::Class)
        .column(env_rows::Column::ProjectId)
        .column_as(env_rows::Column::Id.count(), "n")
        .filter(env_rows::Column::TenantId.eq(tenant_id))
        // Retired and off-boarded instances left operation (the summary counts the latter
        // on their own).
        .filter(env_rows::Column::State.eq(EnvironmentState::Active.as_str()))
        .group_by(env_rows::Column::Class)
        .group_by(env_rows::Column::ProjectId)
        .into_tuple()
        .all(db)
        .await?;
    Ok(rows
        .into_iter()
        .map(|(class, project, n)| (class, project, u64::try_from(n).unwrap_or(0)))
        .collect())
}

/// The tenant's environments `filter` selects by column (its labels are matched after
/// reading: they are one JSON column).
fn columns_selected(tenant_id: &str, filter: &InstanceFilter) -> sea_orm::Select<env_rows::Entity> {
    let mut select = env_rows::Entity::find().filter(env_rows::Column::TenantId.eq(tenant_id));
    if let Some(project) = &filter.project_id {
        select = select.filter(env_rows::Column::ProjectId.eq(project.as_str()));
    }
    if let Some(class) = filter.class {
        select = select.filter(env_rows::Column::Class.eq(class.as_str()));
    }
    if let Some(customer) = &filter.customer_tenant_id {
        select = select.filter(env_rows::Column::CustomerTenantId.eq(customer.as_str()));
    }
    select
}

/// A page of the tenant's instances that `filter` selects, by environment id: at most
/// `page.rows` of them, after `page.after`. The product and the class narrow the query; labels
/// (a JSON column) are matched here, reading the environments in batches until the page is
/// full, so a selective selector never loads the whole fleet at once.
pub async fn page(
    db: &impl ConnectionTrait,
    tenant_id: &str,
    filter: &InstanceFilter,
    page: &Page,
) -> Result<Vec<Observed>, Error> {
    let mut selected: Vec<Environment> = Vec::new();
    let mut after = page.after.clone();
    while (selected.len() as u64) < page.rows {
        let batch = Page {
            after: after.clone(),
            rows: SELECTION_BATCH.max(page.rows - selected.len() as u64),
        };
        let select = columns_selected(tenant_id, filter);
        let rows = batch
            .ascending(select, env_rows::Column::EnvironmentId)
            .all(db)
            .await?;
        let exhausted = (rows.len() as u64) < batch.rows;
        after = rows.last().map(|r| r.environment_id.clone());
        for row in rows {
            let env = Environment::read(row)?;
            if selects(&filter.labels, &env.labels) && (selected.len() as u64) < page.rows {
                selected.push(env);
            }
        }
        if exhausted || after.is_none() {
            break;
        }
    }
    observe(db, tenant_id, selected).await
}

/// Every instance of these products (a page of products: its counts need all of them).
pub async fn instances_of(
    db: &impl ConnectionTrait,
    tenant_id: &str,
    project_ids: &[String],
) -> Result<Vec<Observed>, Error> {
    let envs = env_rows::Entity::find()
        .filter(env_rows::Column::TenantId.eq(tenant_id))
        .filter(env_rows::Column::ProjectId.is_in(project_ids.iter().cloned()))
        .order_by_asc(env_rows::Column::EnvironmentId)
        .all(db)
        .await?
        .into_iter()
        .map(Environment::read)
        .collect::<Result<Vec<_>, _>>()?;
    observe(db, tenant_id, envs).await
}

/// Environments up to which [`observe`] reads their own rows by id; past it, the tenant's
/// whole (cheaper than a list of thousands of bound ids, and within every database's limit).
const BY_ID_UP_TO: usize = 500;

/// Each environment with its last observation and open findings.
async fn observe(
    db: &impl ConnectionTrait,
    tenant_id: &str,
    envs: Vec<Environment>,
) -> Result<Vec<Observed>, Error> {
    if envs.is_empty() {
        return Ok(Vec::new());
    }
    let only_these = envs.len() <= BY_ID_UP_TO;
    let ids: Vec<String> = envs.iter().map(|e| e.environment_id.clone()).collect();
    let mut inventories = inv::Entity::find().filter(inv::Column::TenantId.eq(tenant_id));
    if only_these {
        inventories = inventories.filter(inv::Column::EnvironmentId.is_in(ids.clone()));
    }
    let inventories: HashMap<String, inv::Model> = inventories
        .all(db)
        .await?
        .into_iter()
        .map(|i| (i.environment_id.clone(), i))
        .collect();
    let mut open = drift_findings::Entity::find()
        .select_only()
        .column(drift_findings::Column::EnvironmentId)
        .column_as(drift_findings::Column::FindingId.count(), "open")
        .filter(drift_findings::Column::TenantId.eq(tenant_id))
        .filter(drift_findings::Column::ResolvedAt.is_null())
        .filter(drift_findings::Column::SuppressedBy.is_null());
    if only_these {
        open = open.filter(drift_findings::Column::EnvironmentId.is_in(ids));
    }
    let open: Vec<(String, i64)> = open
        .group_by(drift_findings::Column::EnvironmentId)
        .into_tuple()
        .all(db)
        .await?;
    let open: HashMap<String, u64> = open.into_iter().map(|(e, n)| (e, n as u64)).collect();
    envs.into_iter()
        .map(|environment| {
            let id = environment.environment_id.clone();
            let inventory = inventories.get(&id);
            let workloads: Vec<ObservedWorkload> = match inventory {
                Some(i) => crate::decode::At {
                    table: "runtime_inventories",
                    row: &i.id,
                }
                .json("workloads", &i.workloads)?,
                None => Vec::new(),
            };
            let at = crate::decode::At {
                table: "runtime_inventories",
                row: &id,
            };
            let cost = inventory.and_then(|i| i.cost.as_ref());
            Ok(Observed {
                cost: cost.map(|c| at.json("cost", c)).transpose()?,
                release_id: inventory.and_then(|i| i.current_release_id.clone()),
                specification_version: inventory.and_then(|i| i.specification_version),
                observed_at: inventory.and_then(|i| i.observed_at),
                flagged_stale: inventory.is_none_or(|i| i.stale),
                workloads,
                open_drift: open.get(&id).copied().unwrap_or(0),
                environment,
            })
        })
        .collect()
}

/// The hourly costs of the tenant's active instances that `filter` selects, summed by product and customer tenant: two reads of narrow columns, whatever the
/// fleet's size (no workload is read).
pub async fn cost_totals(
    db: &impl ConnectionTrait,
    tenant_id: &str,
    filter: &InstanceFilter,
) -> Result<CostTotals, Error> {
    let envs = columns_selected(tenant_id, filter)
        .filter(env_rows::Column::State.eq(EnvironmentState::Active.as_str()))
        .all(db)
        .await?;
    let hourly: Vec<(String, Option<f64>)> = inv::Entity::find()
        .select_only()
        .column(inv::Column::EnvironmentId)
        .column(inv::Column::HourlyCost)
        .filter(inv::Column::TenantId.eq(tenant_id))
        .into_tuple()
        .all(db)
        .await?;
    let hourly: HashMap<String, Option<f64>> = hourly.into_iter().collect();
    let mut totals = CostTotals::default();
    for row in envs {
        let env = Environment::read(row)?;
        if !selects(&filter.labels, &env.labels) {
            continue;
        }
        let Some(cost) = hourly.get(&env.environment_id).copied().flatten() else {
            totals.unpriced += 1;
            continue;
        };
        totals.priced += 1;
        totals.hourly += cost;
        *totals.by_product.entry(env.project_id).or_default() += cost;
        if let Some(customer) = env.customer_tenant_id {
            *totals.by_customer_tenant.entry(customer).or_default() += cost;
        }
    }
    let round = runtime_cloud_models::cost::round;
    totals.hourly = round(totals.hourly);
    totals.by_product.values_mut().for_each(|v| *v = round(*v));
    totals
        .by_customer_tenant
        .values_mut()
        .for_each(|v| *v = round(*v));
    Ok(totals)
}

/// The tenant's hourly cost as last priced, summed in the database (its summary).
pub async fn hourly_cost(db: &impl ConnectionTrait, tenant_id: &str) -> Result<f64, Error> {
    let sum: Option<Option<f64>> = inv::Entity::find()
        .select_only()
        .column_as(inv::Column::HourlyCost.sum(), "hourly")
        .filter(inv::Column::TenantId.eq(tenant_id))
        .into_tuple()
        .one(db)
        .await?;
    Ok(runtime_cloud_models::cost::round(
        sum.flatten().unwrap_or(0.0),
    ))
}

/// Every tenant's hourly cost by project (the metrics' gauge), summed in the database.
pub async fn hourly_cost_by_project(
    db: &impl ConnectionTrait,
) -> Result<Vec<(String, String, f64)>, Error> {
    let rows: Vec<(String, String, Option<f64>)> = inv::Entity::find()
        .select_only()
        .column(inv::Column::TenantId)
        .column(inv::Column::ProjectId)
        .column_as(inv::Column::HourlyCost.sum(), "hourly")
        .filter(inv::Column::HourlyCost.is_not_null())
        .group_by(inv::Column::TenantId)
        .group_by(inv::Column::ProjectId)
        .into_tuple()
        .all(db)
        .await?;
    Ok(rows
        .into_iter()
        .map(|(t, p, h)| (t, p, runtime_cloud_models::cost::round(h.unwrap_or(0.0))))
        .collect())
}

/// A page of the tenant's products (its projects that have environments), by id.
pub async fn products(
    db: &impl ConnectionTrait,
    tenant_id: &str,
    page: &Page,
) -> Result<Vec<String>, Error> {
    let mut select = env_rows::Entity::find()
        .select_only()
        .column(env_rows::Column::ProjectId)
        .distinct()
        .filter(env_rows::Column::TenantId.eq(tenant_id));
    if let Some(after) = &page.after {
        select = select.filter(env_rows::Column::ProjectId.gt(after.as_str()));
    }
    Ok(select
        .order_by_asc(env_rows::Column::ProjectId)
        .limit(page.rows)
        .into_tuple()
        .all(db)
        .await?)
}
