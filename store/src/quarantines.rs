//! `quarantines`: workload versions refused fleet-wide for a tenant. Placed by a rollout's
//! rollback or an Operator, lifted by an Operator; each with its event, in the same
//! transaction. The gates read the tenant's quarantines in force (`models::quarantine`).

use crate::decode::At;
use crate::entities::quarantines as rows;
use crate::page::Page;
use crate::{Error, begin_write, outbox};
use chrono::{DateTime, Utc};
use runtime_cloud_models::events::{QuarantineLifted, ReconciliationHeld, VersionQuarantined};
use runtime_cloud_models::quarantine::{QuarantineSource, QuarantineState, Quarantined, refusal};
use sea_orm::sea_query::Expr;
use sea_orm::{
    ActiveModelTrait, ActiveValue::Set, ColumnTrait, ConnectionTrait, DatabaseConnection,
    EntityTrait, QueryFilter, QueryOrder,
};

const TABLE: &str = "quarantines";

/// A quarantine, as the API shows it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Quarantine {
    pub quarantine_id: String,
    pub tenant_id: String,
    pub workload: String,
    pub version: String,
    /// `in-force` until an Operator lifts it.
    pub state: QuarantineState,
    pub source: QuarantineSource,
    pub reason: String,
    /// The rollout whose rollback placed it.
    pub rollout_id: Option<String>,
    pub quarantined_by: String,
    pub quarantined_at: DateTime<Utc>,
    pub lifted_by: Option<String>,
    pub lift_reason: Option<String>,
    pub lifted_at: Option<DateTime<Utc>>,
}

fn read(m: rows::Model) -> Result<Quarantine, Error> {
    let at = At {
        table: TABLE,
        row: &m.quarantine_id,
    };
    Ok(Quarantine {
        source: at.wire("source", &m.source)?,
        state: if m.lifted_at.is_some() {
            QuarantineState::Lifted
        } else {
            QuarantineState::InForce
        },
        quarantine_id: m.quarantine_id,
        tenant_id: m.tenant_id,
        workload: m.workload,
        version: m.version,
        reason: m.reason,
        rollout_id: m.rollout_id,
        quarantined_by: m.quarantined_by,
        quarantined_at: m.quarantined_at,
        lifted_by: m.lifted_by,
        lift_reason: m.lift_reason,
        lifted_at: m.lifted_at,
    })
}

/// A quarantine to place.
#[derive(Debug, Clone)]
pub struct NewQuarantine {
    pub tenant_id: String,
    pub workload: String,
    pub version: String,
    pub source: QuarantineSource,
    pub reason: String,
    pub rollout_id: Option<String>,
    pub by: String,
}

/// What placing a quarantine found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Placed {
    /// Placed now, with its `VersionQuarantined`.
    New(Quarantine),
    /// The version was in quarantine already: that one, unchanged.
    Already(Quarantine),
}

impl Placed {
    pub fn quarantine(&self) -> &Quarantine {
        match self {
            Placed::New(q) | Placed::Already(q) => q,
        }
    }
}

fn in_force_of(tenant_id: &str) -> sea_orm::Select<rows::Entity> {
    rows::Entity::find()
        .filter(rows::Column::TenantId.eq(tenant_id))
        .filter(rows::Column::LiftedAt.is_null())
}

async fn in_force_for(
    db: &impl ConnectionTrait,
    tenant_id: &str,
    workload: &str,
    version: &str,
) -> Result<Option<rows::Model>, Error> {
    Ok(in_force_of(tenant_id)
        .filter(rows::Column::Workload.eq(workload))
        .filter(rows::Column::Version.eq(version))
        .one(db)
        .await?)
}

/// Places each quarantine of `new` unless its version is in quarantine already, with their
/// events, in one transaction (a rollback's retry places nothing twice).
pub async fn place(db: &DatabaseConnection, new: &[NewQuarantine]) -> Result<Vec<Placed>, Error> {
    let txn = begin_write(db).await?;
    let mut placed = Vec::with_capacity(new.len());
    for q in new {
        placed.push(place_one(&txn, q).await?);
    }
    txn.commit().await?;
    Ok(placed)
}

async fn place_one(txn: &impl ConnectionTrait, new: &NewQuarantine) -> Result<Placed, Error> {
    if let Some(row) = in_force_for(txn, &new.tenant_id, &new.workload, &new.version).await? {
        return Ok(Placed::Already(read(row)?));
    }
    let row = rows::ActiveModel {
        quarantine_id: Set(uuid::Uuid::now_v7().to_string()),
        tenant_id: Set(new.tenant_id.clone()),
        workload: Set(new.workload.clone()),
        version: Set(new.version.clone()),
        source: Set(new.source.as_str().to_owned()),
        reason: Set(new.reason.clone()),
        rollout_id: Set(new.rollout_id.clone()),
        quarantined_by: Set(new.by.clone()),
        quarantined_at: Set(Utc::now()),
        lifted_by: Set(None),
        lift_reason: Set(None),
        lifted_at: Set(None),
    }
    .insert(txn)
    .await
    .map_err(Error::on_insert(TABLE))?;
    let q = read(row)?;
    let event = VersionQuarantined {
        quarantine_id: q.quarantine_id.clone(),
        tenant_id: q.tenant_id.clone(),
        workload: q.workload.clone(),
        version: q.version.clone(),
        source: q.source.as_str().to_owned(),
        reason: q.reason.clone(),
        rollout_id: q.rollout_id.clone(),
        quarantined_by: q.quarantined_by.clone(),
    };
    let id = outbox::event_id(&q.quarantine_id, "VersionQuarantined");
    outbox::append(txn, &q.tenant_id, event.into(), id).await?;
    Ok(Placed::New(q))
}

/// Places one quarantine; two Operators at once on PostgreSQL meet at the unique index, and
/// the second finds the first's.
pub async fn place_one_of(db: &DatabaseConnection, new: NewQuarantine) -> Result<Placed, Error> {
    match place(db, std::slice::from_ref(&new)).await {
        Err(Error::Duplicate { .. }) => {
            match in_force_for(db, &new.tenant_id, &new.workload, &new.version).await? {
                Some(row) => read(row).map(Placed::Already),
                // Lifted in between: the caller may place it again.
                None => Err(Error::Duplicate { table: TABLE }),
            }
        }
        other => other.map(|mut placed| placed.remove(0)),
    }
}

/// What lifting a quarantine found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Lifted {
    /// Lifted now, with its `QuarantineLifted`.
    Now(Quarantine),
    /// Lifted before: left as it was.
    Before(Quarantine),
}

/// Lifts quarantine `id` of the tenant, recording who and why, with its event; `None` when the
/// tenant has none by that id.
pub async fn lift(
    db: &DatabaseConnection,
    tenant_id: &str,
    quarantine_id: &str,
    by: &str,
    reason: &str,
) -> Result<Option<Lifted>, Error> {
    let txn = begin_write(db).await?;
    let Some(row) = rows::Entity::find_by_id(quarantine_id.to_owned())
        .filter(rows::Column::TenantId.eq(tenant_id))
        .one(&txn)
        .await?
    else {
        return Ok(None);
    };
    if row.lifted_at.is_some() {
        return read(row).map(|q| Some(Lifted::Before(q)));
    }
    // Only while in force: of two lifts at once on PostgreSQL, the second changes nothing and
    // answers the first's.
    let lifted = rows::Entity::update_many()
        .col_expr(rows::Column::LiftedBy, Expr::value(by))
        .col_expr(rows::Column::LiftReason, Expr::value(reason))
        .col_expr(rows::Column::LiftedAt, Expr::value(Utc::now()))
        .filter(rows::Column::QuarantineId.eq(quarantine_id))
        .filter(rows::Column::LiftedAt.is_null())
        .exec(&txn)
        .await?;
    let row = rows::Entity::find_by_id(quarantine_id.to_owned())
        .one(&txn)
        .await?
        .ok_or_else(|| Error::Missing {
            what: "quarantine",
            id: quarantine_id.to_owned(),
        })?;
    let q = read(row)?;
    if lifted.rows_affected == 0 {
        return Ok(Some(Lifted::Before(q)));
    }
    let event = QuarantineLifted {
        quarantine_id: q.quarantine_id.clone(),
        tenant_id: q.tenant_id.clone(),
        workload: q.workload.clone(),
        version: q.version.clone(),
        lifted_by: by.to_owned(),
        reason: reason.to_owned(),
    };
    let id = outbox::event_id(&q.quarantine_id, "QuarantineLifted");
    outbox::append(&txn, tenant_id, event.into(), id).await?;
    txn.commit().await?;
    Ok(Some(Lifted::Now(q)))
}

/// Records that the GitOps reconciler held `environment_id`'s specification `version` back
/// because of `hits` (`ReconciliationHeld`): once per version and set of quarantines, however
/// often the reconciler passes.
pub async fn record_held(
    db: &impl ConnectionTrait,
    tenant_id: &str,
    environment_id: &str,
    version: i32,
    hits: &[&Quarantined],
) -> Result<(), Error> {
    let ids: Vec<&str> = hits.iter().map(|q| q.quarantine_id.as_str()).collect();
    let event = ReconciliationHeld {
        tenant_id: tenant_id.to_owned(),
        environment_id: environment_id.to_owned(),
        specification_version: version,
        quarantines: hits.iter().map(|q| q.named()).collect(),
        reason: refusal(hits),
    };
    let aggregate = format!("{environment_id}/{version}/{}", ids.join(","));
    let id = outbox::event_id(&aggregate, "ReconciliationHeld");
    outbox::append(db, tenant_id, event.into(), id).await
}

/// The tenant's quarantines in force, as the gates weigh them.
pub async fn in_force(
    db: &impl ConnectionTrait,
    tenant_id: &str,
) -> Result<Vec<Quarantined>, Error> {
    Ok(in_force_of(tenant_id)
        .order_by_asc(rows::Column::QuarantineId)
        .all(db)
        .await?
        .into_iter()
        .map(|m| Quarantined {
            quarantine_id: m.quarantine_id,
            workload: m.workload,
            version: m.version,
            reason: m.reason,
        })
        .collect())
}

/// One quarantine of the tenant.
pub async fn find(
    db: &impl ConnectionTrait,
    tenant_id: &str,
    quarantine_id: &str,
) -> Result<Option<Quarantine>, Error> {
    rows::Entity::find_by_id(quarantine_id.to_owned())
        .filter(rows::Column::TenantId.eq(tenant_id))
        .one(db)
        .await?
        .map(read)
        .transpose()
}

/// Narrows a list of quarantines.
#[derive(Debug, Clone, Default)]
pub struct Filter {
    pub state: Option<QuarantineState>,
    pub workload: Option<String>,
}

/// A page of the tenant's quarantines, newest first.
pub async fn list(
    db: &impl ConnectionTrait,
    tenant_id: &str,
    filter: &Filter,
    page: &Page,
) -> Result<Vec<Quarantine>, Error> {
    let mut select = rows::Entity::find().filter(rows::Column::TenantId.eq(tenant_id));
    select = match filter.state {
        Some(QuarantineState::InForce) => select.filter(rows::Column::LiftedAt.is_null()),
        Some(QuarantineState::Lifted) => select.filter(rows::Column::LiftedAt.is_not_null()),
        None => select,
    };
    if let Some(workload) = &filter.workload {
        select = select.filter(rows::Column::Workload.eq(workload.as_str()));
    }
    page.apply(select, rows::Column::QuarantineId)
        .all(db)
        .await?
        .into_iter()
        .map(read)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures;

    /// The fixtures' tenant.
    const TENANT: &str = "acme";

    fn operator(workload: &str, version: &str) -> NewQuarantine {
        NewQuarantine {
            tenant_id: TENANT.into(),
            workload: workload.into(),
            version: version.into(),
            source: QuarantineSource::Operator,
            reason: "crashes on start".into(),
            rollout_id: None,
            by: "alice".into(),
        }
    }

    async fn events(db: &DatabaseConnection, event_type: &str) -> usize {
        crate::entities::outbox_events::Entity::find()
            .filter(crate::entities::outbox_events::Column::EventType.eq(event_type))
            .all(db)
            .await
            .unwrap()
            .len()
    }

    /// A version is quarantined once however often it is placed; lifted, it leaves the gates
    /// and may be quarantined again. Each change has its event, once.
    async fn a_version_is_quarantined_once_and_lifted_on(db: DatabaseConnection) {
        let first = place_one_of(&db, operator("api", "2.0.0")).await.unwrap();
        let Placed::New(q) = &first else {
            panic!("{first:?}")
        };
        let again = place(
            &db,
            &[operator("api", "2.0.0"), operator("worker", "1.1.0")],
        )
        .await
        .unwrap();
        assert_eq!(again[0], Placed::Already(q.clone()));
        assert!(matches!(again[1], Placed::New(_)));
        assert_eq!(events(&db, "VersionQuarantined").await, 2);
        let held = in_force(&db, TENANT).await.unwrap();
        assert_eq!(held.len(), 2);
        assert!(in_force(&db, "another-tenant").await.unwrap().is_empty());

        let lifted = lift(&db, TENANT, &q.quarantine_id, "bob", "fixed in 2.0.1")
            .await
            .unwrap();
        let Some(Lifted::Now(lifted)) = lifted else {
            panic!("{lifted:?}")
        };
        assert_eq!(lifted.state, QuarantineState::Lifted);
        assert_eq!(lifted.lifted_by.as_deref(), Some("bob"));
        let twice = lift(&db, TENANT, &q.quarantine_id, "carol", "again")
            .await
            .unwrap();
        assert!(
            matches!(twice, Some(Lifted::Before(ref l)) if l.lifted_by.as_deref() == Some("bob"))
        );
        assert_eq!(events(&db, "QuarantineLifted").await, 1);
        assert_eq!(in_force(&db, TENANT).await.unwrap().len(), 1);
        assert!(
            lift(&db, "another-tenant", &q.quarantine_id, "eve", "x")
                .await
                .unwrap()
                .is_none()
        );

        let anew = place_one_of(&db, operator("api", "2.0.0")).await.unwrap();
        assert!(matches!(anew, Placed::New(ref n) if n.quarantine_id != q.quarantine_id));
        let lifted_only = Filter {
            state: Some(QuarantineState::Lifted),
            workload: None,
        };
        let page = Page {
            after: None,
            rows: 10,
        };
        let listed = list(&db, TENANT, &lifted_only, &page).await.unwrap();
        assert_eq!(listed.len(), 1);
        assert_eq!(listed[0].quarantine_id, q.quarantine_id);
    }

    fixtures::on_both_databases!(
        a_version_is_quarantined_once_and_lifted_sqlite,
        a_version_is_quarantined_once_and_lifted_postgres,
        a_version_is_quarantined_once_and_lifted_on
    );
}
