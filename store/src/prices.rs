//! `price_tables`: each tenant's prices ([`runtime_cloud_models::cost::PriceTable`]), which
//! price what its environments are observed to run (`transactions::record_observation` prices
//! each observation; `transactions::set_prices` prices every inventory again).

use crate::decode::{At, to_json};
use crate::entities::price_tables as rows;
use crate::{Error, put};
use chrono::Utc;
use runtime_cloud_models::cost::PriceTable;
use sea_orm::{ActiveValue::Set, ColumnTrait, ConnectionTrait, EntityTrait, QueryFilter};
use std::collections::HashMap;

const TABLE: &str = "price_tables";

fn read(m: rows::Model) -> Result<(String, PriceTable), Error> {
    let at = At {
        table: TABLE,
        row: &m.tenant_id,
    };
    Ok((m.tenant_id.clone(), at.json("prices", &m.prices)?))
}

/// The tenant's prices, if it has set any.
pub async fn get(db: &impl ConnectionTrait, tenant_id: &str) -> Result<Option<PriceTable>, Error> {
    Ok(of_tenants(db, &[tenant_id.to_owned()])
        .await?
        .remove(tenant_id))
}

/// The prices of those of `tenants` that have set any, in one query.
pub async fn of_tenants(
    db: &impl ConnectionTrait,
    tenants: &[String],
) -> Result<HashMap<String, PriceTable>, Error> {
    rows::Entity::find()
        .filter(rows::Column::TenantId.is_in(tenants.iter().cloned()))
        .all(db)
        .await?
        .into_iter()
        .map(read)
        .collect()
}

/// Records the tenant's prices, replacing any it had.
pub async fn put_table(
    db: &impl ConnectionTrait,
    tenant_id: &str,
    prices: &PriceTable,
    set_by: &str,
) -> Result<(), Error> {
    let existed = rows::Entity::find_by_id(tenant_id).one(db).await?.is_some();
    let row = rows::ActiveModel {
        tenant_id: Set(tenant_id.to_owned()),
        prices: Set(to_json(prices)?),
        set_by: Set(set_by.to_owned()),
        updated_at: Set(Utc::now()),
    };
    put(db, row, !existed).await
}
