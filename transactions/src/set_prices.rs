//! A tenant's prices set: the table recorded and every one of its inventories priced again
//! with it, in one transaction, so `GET /fleet/costs` never mixes two tables.

use chrono::Utc;
use runtime_cloud_models::cost::PriceTable;
use runtime_cloud_models::observation::ObservedWorkload;
use runtime_cloud_store::decode::{At, to_json};
use runtime_cloud_store::entities::runtime_inventories as rows;
use runtime_cloud_store::{DatabaseConnection, Error, environments, prices};
use sea_orm::prelude::Json;
use sea_orm::sea_query::Expr;
use sea_orm::{ColumnTrait, EntityTrait, QueryFilter, QueryOrder, QuerySelect};
use std::collections::{BTreeMap, HashMap};

/// Inventories priced per read.
const PAGE: u64 = 500;

/// Records `table` as the tenant's prices (by `set_by`) and prices each of its inventories
/// again; answers how many.
pub async fn set_prices(
    db: &DatabaseConnection,
    tenant_id: &str,
    table: &PriceTable,
    set_by: &str,
) -> Result<u64, Error> {
    let txn = runtime_cloud_store::begin_write(db).await?;
    prices::put_table(&txn, tenant_id, table, set_by).await?;
    let envs: HashMap<String, _> = environments::all(&txn, tenant_id)
        .await?
        .into_iter()
        .map(|e| (e.environment_id.clone(), e))
        .collect();
    // A page of inventories at a time, only the columns pricing reads: a fleet's workloads
    // held at once would take the API gigabytes (10,000 environments × 20 workloads).
    let mut after = String::new();
    let mut priced = 0;
    loop {
        let page: Vec<(String, String, Json, Json)> = rows::Entity::find()
            .select_only()
            .columns([
                rows::Column::Id,
                rows::Column::EnvironmentId,
                rows::Column::Workloads,
                rows::Column::ResourceTypes,
            ])
            .filter(rows::Column::TenantId.eq(tenant_id))
            .filter(rows::Column::Id.gt(after.as_str()))
            .order_by_asc(rows::Column::Id)
            .limit(PAGE)
            .into_tuple()
            .all(&txn)
            .await?;
        let Some((last, ..)) = page.last() else {
            break;
        };
        after = last.clone();
        for (id, environment_id, workloads, types) in page {
            let Some(env) = envs.get(&environment_id) else {
                continue;
            };
            let at = At {
                table: "runtime_inventories",
                row: &id,
            };
            let workloads: Vec<ObservedWorkload> = at.json("workloads", &workloads)?;
            let types: BTreeMap<String, u32> = at.json("resource_types", &types)?;
            let cost = crate::record_observation::priced(env, &workloads, &types, table);
            rows::Entity::update_many()
                .col_expr(rows::Column::Cost, Expr::value(Some(to_json(&cost)?)))
                .col_expr(rows::Column::HourlyCost, Expr::value(Some(cost.hourly)))
                .col_expr(rows::Column::UpdatedAt, Expr::value(Utc::now()))
                .filter(rows::Column::Id.eq(&id))
                .exec(&txn)
                .await?;
            priced += 1;
        }
    }
    txn.commit().await?;
    Ok(priced)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record_observation::record_observations;
    use runtime_cloud_models::EnvironmentClass;
    use runtime_cloud_models::cost::Requests;
    use runtime_cloud_models::inventory::RecordRequest;
    use runtime_cloud_models::observation::Observation;
    use runtime_cloud_store::fixtures::{self, observed, workload};
    use runtime_cloud_store::inventory;
    use runtime_cloud_store::proposals::Acceptance;

    /// More inventories than one page: each is priced again, at the new table.
    #[tokio::test]
    async fn every_inventory_of_the_tenant_is_priced_again_page_by_page() {
        let db = fixtures::sqlite().await;
        let n = PAGE as usize + 3;
        let mut reqs = Vec::new();
        for i in 0..n {
            let env = format!("e{i:04}");
            fixtures::environment(&db, &env, EnvironmentClass::NonProduction).await;
            let mut api = observed(&workload("api", "1.0.0", 2));
            api.requests = Some(Requests {
                cpu_millis: 500,
                memory_bytes: 1 << 30,
            });
            let req = RecordRequest {
                tenant_id: "acme".into(),
                environment_id: env,
                observation: Observation::Observed {
                    workloads: vec![api],
                    resources: Vec::new(),
                    posture: Vec::new(),
                    resource_types: Default::default(),
                    observed_at: Some(Utc::now()),
                },
                proposal_id: format!("p{i}"),
            };
            reqs.push((req, Acceptance::default()));
        }
        record_observations(&db, &reqs).await.unwrap();
        let table = |cpu: f64| PriceTable {
            currency: "EUR".into(),
            cpu_hour: cpu,
            memory_gb_hour: 0.01,
            resource_types: Default::default(),
            regions: Default::default(),
        };
        assert_eq!(
            set_prices(&db, "acme", &table(0.04), "op").await.unwrap(),
            n as u64
        );
        assert_eq!(
            set_prices(&db, "acme", &table(0.08), "op").await.unwrap(),
            n as u64
        );
        for env in ["e0000", &format!("e{:04}", n - 1)] {
            let cost = inventory::find(&db, "acme", env)
                .await
                .unwrap()
                .unwrap()
                .cost;
            // 2 replicas × (0.5 cores × 0.08 + 1 GB × 0.01).
            assert_eq!(cost.map(|c| c.hourly), Some(0.1), "{env}");
        }
    }
}
