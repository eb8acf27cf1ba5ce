//! `incidents`: what an operator must look at. Opened by an operator, an SLO breach or a
//! halted rollout; resolved by an operator with a reason; newest first per tenant.

use crate::Error;
use crate::decode::At;
use crate::entities::incidents as rows;
use crate::page::Page;
use chrono::{DateTime, Utc};
use runtime_cloud_models::fleet::{IncidentSource, IncidentState};
use sea_orm::{
    ActiveModelTrait, ActiveValue::Set, ColumnTrait, ConnectionTrait, EntityTrait, PaginatorTrait,
    QueryFilter,
};

/// An incident, as the API shows it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Incident {
    pub incident_id: String,
    pub tenant_id: String,
    pub title: String,
    pub source: IncidentSource,
    pub environment_id: Option<String>,
    pub rollout_id: Option<String>,
    pub state: IncidentState,
    pub opened_by: String,
    pub opened_at: DateTime<Utc>,
    pub resolved_by: Option<String>,
    pub resolution: Option<String>,
    pub resolved_at: Option<DateTime<Utc>>,
}

fn read(m: rows::Model) -> Result<Incident, Error> {
    let at = At {
        table: "incidents",
        row: &m.incident_id,
    };
    Ok(Incident {
        source: at.wire("source", &m.source)?,
        state: at.wire("state", &m.state)?,
        incident_id: m.incident_id,
        tenant_id: m.tenant_id,
        title: m.title,
        environment_id: m.environment_id,
        rollout_id: m.rollout_id,
        opened_by: m.opened_by,
        opened_at: m.opened_at,
        resolved_by: m.resolved_by,
        resolution: m.resolution,
        resolved_at: m.resolved_at,
    })
}

/// An incident to open.
#[derive(Debug, Clone)]
pub struct NewIncident {
    pub tenant_id: String,
    pub title: String,
    pub source: IncidentSource,
    pub environment_id: Option<String>,
    pub rollout_id: Option<String>,
    pub opened_by: String,
}

/// Opens an incident.
pub async fn open(db: &impl ConnectionTrait, new: NewIncident) -> Result<Incident, Error> {
    let row = rows::ActiveModel {
        incident_id: Set(uuid::Uuid::now_v7().to_string()),
        tenant_id: Set(new.tenant_id),
        title: Set(new.title),
        source: Set(new.source.as_str().to_owned()),
        environment_id: Set(new.environment_id),
        rollout_id: Set(new.rollout_id),
        state: Set(IncidentState::Open.as_str().to_owned()),
        opened_by: Set(new.opened_by),
        opened_at: Set(Utc::now()),
        resolved_by: Set(None),
        resolution: Set(None),
        resolved_at: Set(None),
    }
    .insert(db)
    .await?;
    read(row)
}

/// The tenant's incidents (of one state, when given), newest first, a page at a time.
pub async fn list(
    db: &impl ConnectionTrait,
    tenant_id: &str,
    state: Option<IncidentState>,
    page: &Page,
) -> Result<Vec<Incident>, Error> {
    let mut select = rows::Entity::find().filter(rows::Column::TenantId.eq(tenant_id));
    if let Some(state) = state {
        select = select.filter(rows::Column::State.eq(state.as_str()));
    }
    page.apply(select, rows::Column::IncidentId)
        .all(db)
        .await?
        .into_iter()
        .map(read)
        .collect()
}

/// Resolves an open incident of the tenant: the incident and whether this call resolved it
/// (false: it was resolved already, and is left as it was); `Ok(None)` when there is none by
/// that id.
pub async fn resolve(
    db: &impl ConnectionTrait,
    tenant_id: &str,
    incident_id: &str,
    by: &str,
    resolution: &str,
) -> Result<Option<(Incident, bool)>, Error> {
    let Some(row) = rows::Entity::find_by_id(incident_id.to_owned())
        .filter(rows::Column::TenantId.eq(tenant_id))
        .one(db)
        .await?
    else {
        return Ok(None);
    };
    if row.state != IncidentState::Open.as_str() {
        return read(row).map(|i| Some((i, false)));
    }
    let mut active: rows::ActiveModel = row.into();
    active.state = Set(IncidentState::Resolved.as_str().to_owned());
    active.resolved_by = Set(Some(by.to_owned()));
    active.resolution = Set(Some(resolution.to_owned()));
    active.resolved_at = Set(Some(Utc::now()));
    read(active.update(db).await?).map(|i| Some((i, true)))
}

/// The tenant's open incidents.
pub async fn count_open(db: &impl ConnectionTrait, tenant_id: &str) -> Result<u64, Error> {
    Ok(rows::Entity::find()
        .filter(rows::Column::TenantId.eq(tenant_id))
        .filter(rows::Column::State.eq(IncidentState::Open.as_str()))
        .count(db)
        .await?)
}
