//! The fleet as observation sees it: a tenant's instances (environments) with the release,
//! specification version and health their last observation shows, never what was declared.
//! A product is a project. Three queries per read, whatever the fleet's size; a page of
//! instances reads its own environments' rows only.

use crate::entities::{drift_findings, environments as env_rows, runtime_inventories as inv};
use crate::{Error, Page, environments::Environment};
use chrono::{DateTime, Utc};
use runtime_cloud_models::EnvironmentClass;
use runtime_cloud_models::environments::{Labels, selects};
use runtime_cloud_models::lifetime::EnvironmentState;
use runtime_cloud_models::observation::ObservedWorkload;
use sea_orm::{ColumnTrait, ConnectionTrait, EntityTrait, QueryFilter, QueryOrder, QuerySelect};
use std::collections::HashMap;

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
}

/// Which instances a page of the fleet holds: a product, a class, labels (every pair must
/// match); none narrows nothing.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct InstanceFilter {
    pub project_id: Option<String>,
    pub class: Option<EnvironmentClass>,
    pub labels: Labels,
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
        let mut select = env_rows::Entity::find().filter(env_rows::Column::TenantId.eq(tenant_id));
        if let Some(project) = &filter.project_id {
            select = select.filter(env_rows::Column::ProjectId.eq(project.as_str()));
        }
        if let Some(class) = filter.class {
            select = select.filter(env_rows::Column::Class.eq(class.as_str()));
        }
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
            Ok(Observed {
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
