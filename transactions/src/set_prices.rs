//! A tenant's prices set: the table recorded and every one of its inventories priced again
//! with it, in one transaction, so `GET /fleet/costs` never mixes two tables.

use chrono::Utc;
use runtime_cloud_models::cost::PriceTable;
use runtime_cloud_models::observation::ObservedWorkload;
use runtime_cloud_store::decode::{At, to_json};
use runtime_cloud_store::entities::runtime_inventories as rows;
use runtime_cloud_store::{DatabaseConnection, Error, environments, prices};
use sea_orm::sea_query::Expr;
use sea_orm::{ColumnTrait, EntityTrait, QueryFilter};
use std::collections::{BTreeMap, HashMap};

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
    let inventories = rows::Entity::find()
        .filter(rows::Column::TenantId.eq(tenant_id))
        .all(&txn)
        .await?;
    let mut priced = 0;
    for row in inventories {
        let Some(env) = envs.get(&row.environment_id) else {
            continue;
        };
        let at = At {
            table: "runtime_inventories",
            row: &row.id,
        };
        let workloads: Vec<ObservedWorkload> = at.json("workloads", &row.workloads)?;
        let types: BTreeMap<String, u32> = at.json("resource_types", &row.resource_types)?;
        let cost = crate::record_observation::priced(env, &workloads, &types, table);
        rows::Entity::update_many()
            .col_expr(rows::Column::Cost, Expr::value(Some(to_json(&cost)?)))
            .col_expr(rows::Column::HourlyCost, Expr::value(Some(cost.hourly)))
            .col_expr(rows::Column::UpdatedAt, Expr::value(Utc::now()))
            .filter(rows::Column::Id.eq(&row.id))
            .exec(&txn)
            .await?;
        priced += 1;
    }
    txn.commit().await?;
    Ok(priced)
}
