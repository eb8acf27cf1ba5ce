//! `runtime_inventories` and `observed_workloads`: the observed state of each environment.
//! Recording an observation is [`crate::observations`]'s.

use crate::decode::At;
use crate::entities::runtime_inventories as rows;
use crate::{Error, outbox};
use chrono::{DateTime, Utc};
use runtime_cloud_models::cost::Cost;
use runtime_cloud_models::events::ObservedStateChanged;
use runtime_cloud_models::observation::ObservedWorkload;
use runtime_cloud_models::posture::Violation;
use sea_orm::{
    ActiveModelTrait, ActiveValue::Set, ColumnTrait, ConnectionTrait, DatabaseConnection,
    EntityTrait, QueryFilter, QuerySelect,
};
use std::collections::BTreeMap;

const TABLE: &str = "runtime_inventories";

/// The observed state of one environment.
#[derive(Debug, Clone, PartialEq)]
pub struct Inventory {
    pub id: String,
    pub tenant_id: String,
    pub environment_id: String,
    pub project_id: String,
    /// The observed workloads (bindings by reference).
    pub workloads: Vec<ObservedWorkload>,
    pub current_release_id: Option<String>,
    /// The declared version last applied.
    pub specification_version: Option<i32>,
    /// Null until the first successful observation.
    pub observed_at: Option<DateTime<Utc>>,
    /// The last observation failed, or a sweep found none within `StalenessMinutes`.
    pub stale: bool,
    /// Why the last observation failed, if it did.
    pub last_error: Option<String>,
    /// The security posture rules the last observation found broken (`models::posture`).
    pub posture: Vec<Violation>,
    /// The runner state's resources by type, as the last observation counted them.
    pub resource_types: BTreeMap<String, u32>,
    /// What it costs an hour, priced when it was last observed (or its tenant's prices last
    /// changed); none without a price table.
    pub cost: Option<Cost>,
}

impl Inventory {
    pub(crate) fn read(m: rows::Model) -> Result<Self, Error> {
        let at = At {
            table: TABLE,
            row: &m.id,
        };
        Ok(Self {
            workloads: at.json("workloads", &m.workloads)?,
            posture: at.json("posture", &m.posture)?,
            resource_types: at.json("resource_types", &m.resource_types)?,
            cost: m.cost.as_ref().map(|c| at.json("cost", c)).transpose()?,
            id: m.id,
            tenant_id: m.tenant_id,
            environment_id: m.environment_id,
            project_id: m.project_id,
            current_release_id: m.current_release_id,
            specification_version: m.specification_version,
            observed_at: m.observed_at,
            stale: m.stale,
            last_error: m.last_error,
        })
    }
}

pub(crate) async fn find_row(
    db: &impl ConnectionTrait,
    tenant_id: &str,
    environment_id: &str,
) -> Result<Option<rows::Model>, Error> {
    Ok(rows::Entity::find()
        .filter(rows::Column::TenantId.eq(tenant_id))
        .filter(rows::Column::EnvironmentId.eq(environment_id))
        .one(db)
        .await?)
}

/// The inventory rows of those of the environments `keys` that have one, in one query,
/// without their posture (`posture` an empty list): an observation's record writes it and
/// never reads it (its comparison key covers it), and a namespace's is kilobytes of JSON.
pub async fn find_rows_to_record(
    db: &impl ConnectionTrait,
    keys: &[crate::scope::EnvKey],
) -> Result<Vec<rows::Model>, Error> {
    use crate::scope::of_environments;
    use sea_orm::sea_query::Expr;
    use sea_orm::{Iterable, QuerySelect};
    let unread = serde_json::json!([]);
    Ok(rows::Entity::find()
        .select_only()
        .columns(rows::Column::iter().filter(|c| !matches!(c, rows::Column::Posture)))
        .column_as(Expr::value(unread), rows::Column::Posture)
        .filter(of_environments(
            rows::Column::TenantId,
            rows::Column::EnvironmentId,
            keys,
        ))
        .all(db)
        .await?)
}

/// The inventory of an environment, if it was ever observed (or marked stale).
pub async fn find(
    db: &impl ConnectionTrait,
    tenant_id: &str,
    environment_id: &str,
) -> Result<Option<Inventory>, Error> {
    find_row(db, tenant_id, environment_id)
        .await?
        .map(Inventory::read)
        .transpose()
}

/// Marks stale every inventory not observed since `cutoff`, each with
/// `ObservedStateChanged` (stale), in one transaction; returns how many. `window` (the sweep's)
/// keys the events, so a retried sweep writes none twice; an inventory already stale is
/// neither marked nor announced again.
pub async fn mark_stale(
    db: &DatabaseConnection,
    window: &str,
    cutoff: DateTime<Utc>,
) -> Result<u64, Error> {
    let txn = crate::begin_write(db).await?;
    let stale = rows::Entity::find()
        .filter(rows::Column::Stale.eq(false))
        .filter(rows::Column::ObservedAt.lt(cutoff))
        .all(&txn)
        .await?;
    let count = stale.len() as u64;
    for row in stale {
        let event = ObservedStateChanged {
            environment_id: row.environment_id.clone(),
            tenant_id: row.tenant_id.clone(),
            project_id: row.project_id.clone(),
            current_release_id: row.current_release_id.clone(),
            changes: serde_json::json!([]),
            stale: true,
        };
        let id = outbox::event_id(
            &format!("{}/{window}", row.id),
            "ObservedStateChanged/stale",
        );
        outbox::append(&txn, &row.tenant_id, event.into(), id).await?;
        let mut row: rows::ActiveModel = row.into();
        row.stale = Set(true);
        row.updated_at = Set(Utc::now());
        row.update(&txn).await?;
    }
    txn.commit().await?;
    Ok(count)
}

/// (tenant, environment id, stale flag, last observation) of every inventory (the metrics'
/// stale gauge).
pub async fn freshness(
    db: &impl ConnectionTrait,
) -> Result<Vec<(String, String, bool, Option<DateTime<Utc>>)>, Error> {
    use rows::Column as C;
    Ok(rows::Entity::find()
        .select_only()
        .columns([C::TenantId, C::EnvironmentId, C::Stale, C::ObservedAt])
        .into_tuple()
        .all(db)
        .await?)
}

/// (tenant, last successful observation) of every inventory observed at least once, or of
/// `tenant`'s only (the observation ages).
pub async fn observed_times(
    db: &impl ConnectionTrait,
    tenant: Option<&str>,
) -> Result<Vec<(String, DateTime<Utc>)>, Error> {
    use rows::Column as C;
    let mut select = rows::Entity::find()
        .select_only()
        .columns([C::TenantId, C::ObservedAt])
        .filter(C::ObservedAt.is_not_null());
    if let Some(t) = tenant {
        select = select.filter(C::TenantId.eq(t));
    }
    Ok(select.into_tuple().all(db).await?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures;

    async fn stale_inventory(db: &DatabaseConnection, env: &str, observed_minutes_ago: i64) {
        let now = Utc::now();
        rows::ActiveModel {
            id: Set(format!("inv-{env}")),
            tenant_id: Set("acme".into()),
            environment_id: Set(env.into()),
            project_id: Set("shop".into()),
            workloads: Set(serde_json::json!([])),
            current_release_id: Set(None),
            specification_version: Set(None),
            observed_at: Set(Some(now - chrono::Duration::minutes(observed_minutes_ago))),
            stale: Set(false),
            last_error: Set(None),
            compared_with: Set(None),
            posture: Set(serde_json::json!([])),
            resource_types: Set(serde_json::json!({})),
            cost: Set(None),
            hourly_cost: Set(None),
            created_at: Set(now),
            updated_at: Set(now),
        }
        .insert(db)
        .await
        .unwrap();
    }

    #[tokio::test]
    async fn mark_stale_marks_only_old_observations_once() {
        let db = fixtures::sqlite().await;
        stale_inventory(&db, "old", 20).await;
        stale_inventory(&db, "fresh", 5).await;
        let cutoff = Utc::now() - chrono::Duration::minutes(15);
        assert_eq!(mark_stale(&db, "w1", cutoff).await.unwrap(), 1);
        let rows = rows::Entity::find().all(&db).await.unwrap();
        let stale: Vec<_> = rows
            .iter()
            .filter(|r| r.stale)
            .map(|r| r.environment_id.as_str())
            .collect();
        assert_eq!(stale, ["old"]);
        let events = fixtures::events(&db, "ObservedStateChanged").await;
        assert_eq!(events.len(), 1);
        assert_eq!(events[0].payload["stale"], true);
        // Already stale: not marked (nor announced) again.
        assert_eq!(mark_stale(&db, "w2", cutoff).await.unwrap(), 0);
        assert_eq!(fixtures::events(&db, "ObservedStateChanged").await.len(), 1);
    }
}
