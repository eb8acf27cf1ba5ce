//! `run_starts`: runs the API wrote whose workflow may not have started yet.
//!
//! A run's row and its workflow live in two systems, so no single write makes both. The API
//! writes the row and its start in one transaction (`transactions::admit_run::accept_run`), then starts the workflow
//! and forgets the start ([`started`]); a start Temporal refused takes the run back
//! ([`withdraw`]). A process killed between the two, or a withdrawal the database refused,
//! leaves the start here: the API's starter starts what is older than a grace period
//! ([`due`]) — a start is idempotent by the workflow's id — so no run's row is left without its
//! workflow, and a client that sends the same `Idempotency-Key` again has it started at once
//! ([`pending`]).
//!
//! Admission: a run accepted while its project's `concurrentRuns` are all in flight (or behind
//! runs deferred before it) is written with its start *deferred* and a `waiting` capacity
//! lease, and shows `waitingForCapacity`; no workflow is started for it, so a tenant's flood
//! costs the workflow service nothing past its quota and other tenants' runs do not queue
//! behind it there. When a lease of the project is released or expires (and on every round of
//! the API's starter, and when a quota changes) the oldest deferred starts that fit the free
//! slots are started (`transactions::admit_run::admit_deferred`, one admitter at a time). Admission only saves work: the project's capacity
//! semaphore still bounds the runs that start, so a start admitted early waits there.

use crate::decode::{At, to_json};
use crate::entities::run_starts as rows;
use crate::runs;
use crate::{Error, begin_write};
use chrono::{DateTime, Utc};
use runtime_cloud_models::RunInput;
use sea_orm::sea_query::Expr;
use sea_orm::{
    ActiveModelTrait, ActiveValue::Set, ColumnTrait, ConnectionTrait, EntityTrait, PaginatorTrait,
    QueryFilter, QueryOrder, QuerySelect,
};

const TABLE: &str = "run_starts";

/// Writes run `input`'s start, accepted at `accepted_at` (deferred or not), in the caller's
/// transaction (`transactions::admit_run` writes it with the run's row).
pub async fn insert(
    db: &impl ConnectionTrait,
    input: &RunInput,
    accepted_at: DateTime<Utc>,
    deferred: bool,
) -> Result<(), Error> {
    rows::ActiveModel {
        provisioning_run_id: Set(input.run_id.clone()),
        tenant_id: Set(input.tenant_id.clone()),
        input: Set(to_json(input)?),
        accepted_at: Set(accepted_at),
        project_id: Set(Some(input.project_id.clone())),
        deferred: Set(deferred),
    }
    .insert(db)
    .await
    .map_err(Error::on_insert(TABLE))?;
    Ok(())
}

/// How many starts of the tenant's project are deferred.
pub async fn deferred_count(
    db: &impl ConnectionTrait,
    tenant_id: &str,
    project_id: &str,
) -> Result<u64, Error> {
    Ok(deferred_of(tenant_id, project_id).count(db).await?)
}

fn deferred_of(tenant_id: &str, project_id: &str) -> sea_orm::Select<rows::Entity> {
    rows::Entity::find()
        .filter(rows::Column::Deferred.eq(true))
        .filter(rows::Column::TenantId.eq(tenant_id))
        .filter(rows::Column::ProjectId.eq(project_id))
}

/// Whether any start is deferred, of the project `only` or of any.
pub async fn any_deferred(
    db: &impl ConnectionTrait,
    only: Option<(&str, &str)>,
) -> Result<bool, Error> {
    let any = match only {
        Some((tenant_id, project_id)) => deferred_of(tenant_id, project_id),
        None => rows::Entity::find().filter(rows::Column::Deferred.eq(true)),
    };
    Ok(any.limit(1).one(db).await?.is_some())
}

/// The `limit` oldest deferred starts of the tenant's project.
pub async fn oldest_deferred(
    db: &impl ConnectionTrait,
    tenant_id: &str,
    project_id: &str,
    limit: u64,
) -> Result<Vec<RunInput>, Error> {
    deferred_of(tenant_id, project_id)
        .order_by_asc(rows::Column::AcceptedAt)
        .order_by_asc(rows::Column::ProvisioningRunId)
        .limit(limit)
        .all(db)
        .await?
        .into_iter()
        .map(read)
        .collect()
}

/// The starts of `run_ids` are admitted: no longer deferred, due to start.
pub async fn mark_admitted(db: &impl ConnectionTrait, run_ids: &[String]) -> Result<(), Error> {
    if run_ids.is_empty() {
        return Ok(());
    }
    rows::Entity::update_many()
        .col_expr(rows::Column::Deferred, Expr::value(false))
        .filter(rows::Column::ProvisioningRunId.is_in(run_ids.iter().cloned()))
        .exec(db)
        .await?;
    Ok(())
}

/// The (tenant, project) pairs with deferred starts.
pub async fn deferring_projects(db: &impl ConnectionTrait) -> Result<Vec<(String, String)>, Error> {
    let pairs: Vec<(String, String)> = rows::Entity::find()
        .select_only()
        .column(rows::Column::TenantId)
        .column(rows::Column::ProjectId)
        .filter(rows::Column::Deferred.eq(true))
        .distinct()
        .into_tuple()
        .all(db)
        .await?;
    Ok(pairs)
}

/// The run's workflow started: nothing is left to start.
pub async fn started(db: &impl ConnectionTrait, run_id: &str) -> Result<(), Error> {
    rows::Entity::delete_by_id(run_id.to_owned())
        .exec(db)
        .await?;
    Ok(())
}

/// Takes back a run whose workflow could not be started: its row and its start go together.
pub async fn withdraw(
    db: &sea_orm::DatabaseConnection,
    tenant_id: &str,
    run_id: &str,
) -> Result<(), Error> {
    let txn = begin_write(db).await?;
    started(&txn, run_id).await?;
    runs::delete(&txn, tenant_id, run_id).await?;
    // The events its row was written with (an Operator's `QuarantineOverridden`) go with it:
    // nothing reports a run that never existed.
    crate::outbox::withdraw(&txn, tenant_id, run_id).await?;
    txn.commit().await?;
    Ok(())
}

/// A run whose workflow may not have started.
#[derive(Debug, Clone, PartialEq)]
pub struct Pending {
    /// The workflow's input.
    pub input: RunInput,
    /// When the request wrote the run: until [`RUN_START_IN_FLIGHT`] after, it may still be
    /// starting it, or about to take it back.
    ///
    /// [`RUN_START_IN_FLIGHT`]: runtime_cloud_models::options::RUN_START_IN_FLIGHT
    pub accepted_at: DateTime<Utc>,
    /// Deferred until its project has a free slot: nobody is starting it.
    pub deferred: bool,
}

/// The tenant's run `run_id`, when its workflow may not have started.
pub async fn pending(
    db: &impl ConnectionTrait,
    tenant_id: &str,
    run_id: &str,
) -> Result<Option<Pending>, Error> {
    let Some(row) = rows::Entity::find_by_id(run_id.to_owned())
        .filter(rows::Column::TenantId.eq(tenant_id))
        .one(db)
        .await?
    else {
        return Ok(None);
    };
    let (accepted_at, deferred) = (row.accepted_at, row.deferred);
    Ok(Some(Pending {
        input: read(row)?,
        accepted_at,
        deferred,
    }))
}

/// Run `run_id`'s input, when its workflow may not have started: its start is deferred, or
/// admitted or accepted and not made yet (its caller checked the run's tenant).
pub async fn unstarted(db: &impl ConnectionTrait, run_id: &str) -> Result<Option<RunInput>, Error> {
    rows::Entity::find_by_id(run_id.to_owned())
        .one(db)
        .await?
        .map(read)
        .transpose()
}

/// Up to `limit` starts accepted before `before` and not deferred, oldest first: their
/// requests are over, so their workflows are started by nobody else.
pub async fn due(
    db: &impl ConnectionTrait,
    before: DateTime<Utc>,
    limit: u64,
) -> Result<Vec<RunInput>, Error> {
    rows::Entity::find()
        .filter(rows::Column::AcceptedAt.lt(before))
        .filter(rows::Column::Deferred.eq(false))
        .order_by_asc(rows::Column::AcceptedAt)
        .limit(limit)
        .all(db)
        .await?
        .into_iter()
        .map(read)
        .collect()
}

fn read(row: rows::Model) -> Result<RunInput, Error> {
    let at = At {
        table: TABLE,
        row: &row.provisioning_run_id,
    };
    at.json("input", &row.input)
}
