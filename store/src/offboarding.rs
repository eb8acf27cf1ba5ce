//! `offboarding_orders`: an instance's off-boarding order (`models::offboarding`), placed with
//! `OffboardingOrdered`, moved by its workflow (exported with its verified archive, then
//! decommissioning with its run), and ended completed (the environment `offboarded`, with
//! `InstanceOffboarded`) or failed (with `OffboardingFailed`), each in one transaction. Also
//! the instance's whole record, read for its archive.

use crate::decode::{At, to_json};
use crate::entities::environments as env_rows;
use crate::entities::offboarding_orders as rows;
use crate::environments::{self, Environment};
use crate::page::Page;
use crate::{Error, begin_write, outbox};
use chrono::{DateTime, Utc};
use runtime_cloud_models::events::{InstanceOffboarded, OffboardingFailed, OffboardingOrdered};
use runtime_cloud_models::lifetime::EnvironmentState;
use runtime_cloud_models::offboarding::{Manifest, OrderState};
use runtime_cloud_models::validation::Invalid;
use sea_orm::{
    ActiveModelTrait, ActiveValue::Set, ColumnTrait, ConnectionTrait, DatabaseConnection,
    EntityTrait, PaginatorTrait, QueryFilter,
};

const TABLE: &str = "offboarding_orders";

/// An off-boarding order, as the API shows it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Order {
    pub order_id: String,
    pub tenant_id: String,
    pub environment_id: String,
    pub state: OrderState,
    pub reason: String,
    pub requested_by: String,
    /// Where the archive is kept, once exported and verified.
    pub archive_key: Option<String>,
    /// `sha256:` of the whole archive.
    pub archive_sha256: Option<String>,
    pub archive_bytes: Option<i64>,
    /// The archive's manifest: every file with its checksum and the records it holds.
    pub manifest: Option<Manifest>,
    pub exported_at: Option<DateTime<Utc>>,
    /// The decommission run, once recorded.
    pub provisioning_run_id: Option<String>,
    /// Why a failed order failed.
    pub failure: Option<String>,
    pub created_at: DateTime<Utc>,
    pub completed_at: Option<DateTime<Utc>>,
}

fn read(m: rows::Model) -> Result<Order, Error> {
    let at = At {
        table: TABLE,
        row: &m.order_id,
    };
    Ok(Order {
        state: at.wire("state", &m.state)?,
        manifest: m
            .manifest
            .as_ref()
            .map(|v| at.json("manifest", v))
            .transpose()?,
        order_id: m.order_id,
        tenant_id: m.tenant_id,
        environment_id: m.environment_id,
        reason: m.reason,
        requested_by: m.requested_by,
        archive_key: m.archive_key,
        archive_sha256: m.archive_sha256,
        archive_bytes: m.archive_bytes,
        exported_at: m.exported_at,
        provisioning_run_id: m.provisioning_run_id,
        failure: m.failure,
        created_at: m.created_at,
        completed_at: m.completed_at,
    })
}

/// What placing an order found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Placed {
    /// Placed now, with `OffboardingOrdered`.
    New(Order),
    /// The instance has an order under way or done: that one.
    Existing(Order),
}

fn open_for(tenant_id: &str, environment_id: &str) -> sea_orm::Select<rows::Entity> {
    rows::Entity::find()
        .filter(rows::Column::TenantId.eq(tenant_id))
        .filter(rows::Column::EnvironmentId.eq(environment_id))
        .filter(rows::Column::State.ne(OrderState::Failed.as_str()))
}

/// Places an off-boarding order for `env` (active; the caller checked), unless it has one
/// under way or done. [`Error::Duplicate`] when another request placed one in between.
pub async fn place(
    db: &DatabaseConnection,
    env: &Environment,
    reason: &str,
    by: &str,
) -> Result<Placed, Error> {
    let txn = begin_write(db).await?;
    if let Some(row) = open_for(&env.tenant_id, &env.environment_id)
        .one(&txn)
        .await?
    {
        return Ok(Placed::Existing(read(row)?));
    }
    let now = Utc::now();
    let row = rows::ActiveModel {
        order_id: Set(uuid::Uuid::now_v7().to_string()),
        tenant_id: Set(env.tenant_id.clone()),
        environment_id: Set(env.environment_id.clone()),
        state: Set(OrderState::Exporting.as_str().to_owned()),
        reason: Set(reason.to_owned()),
        requested_by: Set(by.to_owned()),
        archive_key: Set(None),
        archive_sha256: Set(None),
        archive_bytes: Set(None),
        manifest: Set(None),
        exported_at: Set(None),
        provisioning_run_id: Set(None),
        failure: Set(None),
        created_at: Set(now),
        updated_at: Set(now),
        completed_at: Set(None),
    }
    .insert(&txn)
    .await
    .map_err(Error::on_insert(TABLE))?;
    let order = read(row)?;
    let event = OffboardingOrdered {
        order_id: order.order_id.clone(),
        tenant_id: order.tenant_id.clone(),
        environment_id: order.environment_id.clone(),
        requested_by: by.to_owned(),
        reason: reason.to_owned(),
    };
    let id = outbox::event_id(&order.order_id, "OffboardingOrdered");
    outbox::append(&txn, &order.tenant_id, event.into(), id).await?;
    txn.commit().await?;
    Ok(Placed::New(order))
}

/// One order of the tenant.
pub async fn find(
    db: &impl ConnectionTrait,
    tenant_id: &str,
    order_id: &str,
) -> Result<Option<Order>, Error> {
    rows::Entity::find_by_id(order_id.to_owned())
        .filter(rows::Column::TenantId.eq(tenant_id))
        .one(db)
        .await?
        .map(read)
        .transpose()
}

async fn row(db: &impl ConnectionTrait, order_id: &str) -> Result<rows::Model, Error> {
    rows::Entity::find_by_id(order_id.to_owned())
        .one(db)
        .await?
        .ok_or_else(|| Error::Missing {
            what: "off-boarding order",
            id: order_id.to_owned(),
        })
}

/// The order `order_id` (its workflow knows no tenant but the order's).
pub async fn get(db: &impl ConnectionTrait, order_id: &str) -> Result<Order, Error> {
    read(row(db, order_id).await?)
}

/// A page of the tenant's orders, newest first.
pub async fn list(
    db: &impl ConnectionTrait,
    tenant_id: &str,
    environment_id: Option<&str>,
    state: Option<OrderState>,
    page: &Page,
) -> Result<Vec<Order>, Error> {
    let mut select = rows::Entity::find().filter(rows::Column::TenantId.eq(tenant_id));
    if let Some(env) = environment_id {
        select = select.filter(rows::Column::EnvironmentId.eq(env));
    }
    if let Some(state) = state {
        select = select.filter(rows::Column::State.eq(state.as_str()));
    }
    page.apply(select, rows::Column::OrderId)
        .all(db)
        .await?
        .into_iter()
        .map(read)
        .collect()
}

/// The archive an order's record was exported to, verified.
#[derive(Debug, Clone)]
pub struct Archive {
    pub key: String,
    pub sha256: String,
    pub bytes: i64,
    pub manifest: Manifest,
}

/// Records the order `exported` with its verified archive. Only from `exporting`: a retry
/// after the order went on changes nothing.
pub async fn mark_exported(
    db: &DatabaseConnection,
    order_id: &str,
    archive: &Archive,
) -> Result<(), Error> {
    let txn = begin_write(db).await?;
    let row = row(&txn, order_id).await?;
    if row.state != OrderState::Exporting.as_str() {
        return Ok(());
    }
    let now = Utc::now();
    let mut active: rows::ActiveModel = row.into();
    active.state = Set(OrderState::Exported.as_str().to_owned());
    active.archive_key = Set(Some(archive.key.clone()));
    active.archive_sha256 = Set(Some(archive.sha256.clone()));
    active.archive_bytes = Set(Some(archive.bytes));
    active.manifest = Set(Some(to_json(&archive.manifest)?));
    active.exported_at = Set(Some(now));
    active.updated_at = Set(now);
    active.update(&txn).await?;
    txn.commit().await?;
    Ok(())
}

/// In the transaction `txn` that records the order's decommission run `run_id` (none: nothing
/// was ever declared, the environment was retired without one): the order `decommissioning`.
/// Only from `exported`: nothing is destroyed before the archive is verified.
pub async fn mark_decommissioning_in(
    txn: &impl ConnectionTrait,
    order_id: &str,
    run_id: Option<&str>,
) -> Result<(), Error> {
    let row = row(txn, order_id).await?;
    let state: OrderState = At {
        table: TABLE,
        row: order_id,
    }
    .wire("state", &row.state)?;
    match state {
        OrderState::Exported => {}
        OrderState::Decommissioning | OrderState::Completed => return Ok(()),
        other => {
            return Err(Error::Invalid(Invalid(format!(
                "off-boarding order {order_id} is {other}: it is decommissioned only once exported"
            ))));
        }
    }
    let mut active: rows::ActiveModel = row.into();
    active.state = Set(OrderState::Decommissioning.as_str().to_owned());
    active.provisioning_run_id = Set(run_id.map(str::to_owned));
    active.updated_at = Set(Utc::now());
    active.update(txn).await?;
    Ok(())
}

/// Ends the order `completed`, the environment `offboarded`, with `InstanceOffboarded`; a
/// retry after it ended changes nothing.
pub async fn complete(db: &DatabaseConnection, order_id: &str) -> Result<(), Error> {
    let txn = begin_write(db).await?;
    let row = row(&txn, order_id).await?;
    let order = read(row.clone())?;
    if order.state.ended() {
        return Ok(());
    }
    let now = Utc::now();
    let mut active: rows::ActiveModel = row.into();
    active.state = Set(OrderState::Completed.as_str().to_owned());
    active.completed_at = Set(Some(now));
    active.updated_at = Set(now);
    active.update(&txn).await?;
    environments::offboard_in(&txn, &order.tenant_id, &order.environment_id).await?;
    let event = InstanceOffboarded {
        order_id: order.order_id.clone(),
        tenant_id: order.tenant_id.clone(),
        environment_id: order.environment_id.clone(),
        archive_key: order.archive_key.unwrap_or_default(),
        archive_sha256: order.archive_sha256.unwrap_or_default(),
        provisioning_run_id: order.provisioning_run_id,
    };
    let id = outbox::event_id(&order.order_id, "InstanceOffboarded");
    outbox::append(&txn, &order.tenant_id, event.into(), id).await?;
    txn.commit().await?;
    Ok(())
}

/// Ends the order `failed` with `reason`, with `OffboardingFailed`; its archive (if exported)
/// stays. A retry after it ended changes nothing.
pub async fn fail(db: &DatabaseConnection, order_id: &str, reason: &str) -> Result<(), Error> {
    let txn = begin_write(db).await?;
    let row = row(&txn, order_id).await?;
    let order = read(row.clone())?;
    if order.state.ended() {
        return Ok(());
    }
    let now = Utc::now();
    let mut active: rows::ActiveModel = row.into();
    active.state = Set(OrderState::Failed.as_str().to_owned());
    active.failure = Set(Some(reason.to_owned()));
    active.completed_at = Set(Some(now));
    active.updated_at = Set(now);
    active.update(&txn).await?;
    let event = OffboardingFailed {
        order_id: order.order_id.clone(),
        tenant_id: order.tenant_id.clone(),
        environment_id: order.environment_id.clone(),
        reason: reason.to_owned(),
    };
    let id = outbox::event_id(&order.order_id, "OffboardingFailed");
    outbox::append(&txn, &order.tenant_id, event.into(), id).await?;
    txn.commit().await?;
    Ok(())
}

/// How many of the tenant's instances were off-boarded.
pub async fn count_offboarded(db: &impl ConnectionTrait, tenant_id: &str) -> Result<u64, Error> {
    Ok(env_rows::Entity::find()
        .filter(env_rows::Column::TenantId.eq(tenant_id))
        .filter(env_rows::Column::State.eq(EnvironmentState::Offboarded.as_str()))
        .count(db)
        .await?)
}

/// Every tenant's orders that have not ended, oldest first (the workers start their workflows
/// as they start, a start finding a running one and leaving it).
pub async fn unended(db: &impl ConnectionTrait) -> Result<Vec<Order>, Error> {
    use sea_orm::QueryOrder;
    let ended = [OrderState::Completed.as_str(), OrderState::Failed.as_str()];
    rows::Entity::find()
        .filter(rows::Column::State.is_not_in(ended))
        .order_by_asc(rows::Column::OrderId)
        .all(db)
        .await?
        .into_iter()
        .map(read)
        .collect()
}

/// The instance's order under way or done, if it has one (a failed one aside).
pub async fn open_order_of(
    db: &impl ConnectionTrait,
    tenant_id: &str,
    environment_id: &str,
) -> Result<Option<Order>, Error> {
    open_for(tenant_id, environment_id)
        .one(db)
        .await?
        .map(read)
        .transpose()
}
