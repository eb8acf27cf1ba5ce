//! The fleet as observation sees it: a tenant's instances (environments) with the release,
//! specification version and health their last observation shows, never what was declared.
//! A product is a project. Three queries per read, whatever the fleet's size.

use crate::entities::{drift_findings, runtime_inventories as inv};
use crate::{Error, environments::Environment};
use chrono::{DateTime, Utc};
use runtime_cloud_models::observation::ObservedWorkload;
use sea_orm::{ColumnTrait, ConnectionTrait, EntityTrait, QueryFilter, QuerySelect};
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

/// Every instance of the tenant, by environment id.
pub async fn instances(db: &impl ConnectionTrait, tenant_id: &str) -> Result<Vec<Observed>, Error> {
    let envs = crate::environments::list(db, tenant_id).await?;
    let inventories: HashMap<String, inv::Model> = inv::Entity::find()
        .filter(inv::Column::TenantId.eq(tenant_id))
        .all(db)
        .await?
        .into_iter()
        .map(|i| (i.environment_id.clone(), i))
        .collect();
    let open: Vec<(String, i64)> = drift_findings::Entity::find()
        .select_only()
        .column(drift_findings::Column::EnvironmentId)
        .column_as(drift_findings::Column::FindingId.count(), "open")
        .filter(drift_findings::Column::TenantId.eq(tenant_id))
        .filter(drift_findings::Column::ResolvedAt.is_null())
        .filter(drift_findings::Column::SuppressedBy.is_null())
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
