//! `change_windows`: an environment's change windows and its tenant's defaults
//! ([`runtime_cloud_models::windows`]). A run reads the gate they make before it applies.

use crate::decode::At;
use crate::entities::change_windows as rows;
use crate::scope::{self, scope};
use crate::{Error, Page};
use chrono::Utc;
use runtime_cloud_models::windows::{ChangeWindow, WindowSpec};
use sea_orm::{
    ActiveModelTrait, ActiveValue::Set, ColumnTrait, Condition, ConnectionTrait, EntityTrait,
    QueryFilter, QueryOrder,
};
use uuid::Uuid;

fn read(m: rows::Model) -> Result<ChangeWindow, Error> {
    let at = At {
        table: "change_windows",
        row: &m.window_id,
    };
    Ok(ChangeWindow {
        spec: WindowSpec {
            kind: at.wire("kind", &m.kind)?,
            schedule: m.schedule,
            duration: m.duration,
            time_zone: m.time_zone,
            reason: m.reason,
        },
        window_id: m.window_id,
        tenant_id: m.tenant_id,
        environment_id: m.environment_id,
        created_by: m.created_by,
        created_at: m.created_at,
    })
}

/// Records a window of the tenant (of one environment, or a default without one).
pub async fn create(
    db: &impl ConnectionTrait,
    tenant_id: &str,
    environment_id: Option<&str>,
    spec: WindowSpec,
    created_by: &str,
) -> Result<ChangeWindow, Error> {
    let row = rows::ActiveModel {
        window_id: Set(Uuid::now_v7().to_string()),
        tenant_id: Set(tenant_id.to_owned()),
        environment_id: Set(environment_id.map(str::to_owned)),
        kind: Set(spec.kind.as_str().to_owned()),
        schedule: Set(spec.schedule),
        duration: Set(spec.duration),
        time_zone: Set(spec.time_zone),
        reason: Set(spec.reason),
        created_by: Set(created_by.to_owned()),
        created_at: Set(Utc::now()),
    }
    .insert(db)
    .await?;
    read(row)
}

async fn find(
    db: &impl ConnectionTrait,
    tenant_id: &str,
    condition: Condition,
    page: Option<&Page>,
) -> Result<Vec<ChangeWindow>, Error> {
    let select = rows::Entity::find()
        .filter(rows::Column::TenantId.eq(tenant_id))
        .filter(condition);
    let select = match page {
        Some(page) => page.ascending(select, rows::Column::WindowId),
        None => select.order_by_asc(rows::Column::WindowId),
    };
    select.all(db).await?.into_iter().map(read).collect()
}

/// The windows of one environment only (`Some`), or the tenant's defaults only (`None`).
pub async fn list(
    db: &impl ConnectionTrait,
    tenant_id: &str,
    environment_id: Option<&str>,
    page: &Page,
) -> Result<Vec<ChangeWindow>, Error> {
    find(
        db,
        tenant_id,
        scope(rows::Column::EnvironmentId, environment_id),
        Some(page),
    )
    .await
}

/// The windows that apply to an environment: its own and its tenant's defaults.
pub async fn applying(
    db: &impl ConnectionTrait,
    tenant_id: &str,
    environment_id: &str,
) -> Result<Vec<ChangeWindow>, Error> {
    find(
        db,
        tenant_id,
        scope::applying(rows::Column::EnvironmentId, environment_id),
        None,
    )
    .await
}

/// Removes a window in the given scope; false when there is none by that id there.
pub async fn delete(
    db: &impl ConnectionTrait,
    tenant_id: &str,
    environment_id: Option<&str>,
    window_id: &str,
) -> Result<bool, Error> {
    let done = rows::Entity::delete_many()
        .filter(rows::Column::TenantId.eq(tenant_id))
        .filter(scope(rows::Column::EnvironmentId, environment_id))
        .filter(rows::Column::WindowId.eq(window_id))
        .exec(db)
        .await?;
    Ok(done.rows_affected > 0)
}
