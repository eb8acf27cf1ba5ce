//! Execution capacity (spec 003): a tenant's worker pools, its projects' quotas and the
//! capacity leases its runs hold. Lists are newest first by their UUIDv7 ids, a page at a time.

use crate::Error;
use crate::decode::At;
use crate::entities::{
    capacity_leases as lease_rows, provisioning_runs as runs, quotas as quota_rows,
    worker_pools as pool_rows,
};
use crate::page::Page;
use chrono::{DateTime, Utc};
use runtime_cloud_models::capacity::{
    LeaseState, MinutesSpent, PoolKind, PoolState, QuotaLimits, check_minutes, day_started_at,
};
use sea_orm::{
    ActiveModelTrait, ActiveValue::Set, ColumnTrait, ConnectionTrait, EntityTrait, QueryFilter,
    QuerySelect, sea_query::Expr,
};

/// A worker pool as recorded (the API adds its size and utilisation, read from Temporal).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Pool {
    /// Surrogate key (the order pages walk in); not shown.
    #[serde(skip)]
    pub id: String,
    pub pool_id: String,
    pub tenant_id: String,
    pub kind: PoolKind,
    pub security_boundary: String,
    pub region: String,
    pub node_profile: String,
    pub min_size: u32,
    pub max_size: u32,
    pub state: PoolState,
    pub created_at: DateTime<Utc>,
}

fn read_pool(m: pool_rows::Model) -> Result<Pool, Error> {
    let at = At {
        table: "worker_pools",
        row: &m.id,
    };
    Ok(Pool {
        kind: at.wire("kind", &m.kind)?,
        state: at.wire("state", &m.state)?,
        min_size: u32::try_from(m.min_size).unwrap_or(0),
        max_size: u32::try_from(m.max_size).unwrap_or(0),
        id: m.id,
        pool_id: m.pool_id,
        tenant_id: m.tenant_id,
        security_boundary: m.security_boundary,
        region: m.region,
        node_profile: m.node_profile,
        created_at: m.created_at,
    })
}

/// A pool to create.
#[derive(Debug, Clone)]
pub struct NewPool {
    pub pool_id: String,
    pub tenant_id: String,
    pub kind: PoolKind,
    pub security_boundary: String,
    pub region: String,
    pub node_profile: String,
    pub min_size: u32,
    pub max_size: u32,
}

/// Creates a pool, `active`. [`Error::Duplicate`] when a pool has that id (in any tenant: the
/// id names its task queue).
pub async fn create_pool(db: &impl ConnectionTrait, new: NewPool) -> Result<Pool, Error> {
    let now = Utc::now();
    let row = pool_rows::ActiveModel {
        id: Set(uuid::Uuid::now_v7().to_string()),
        pool_id: Set(new.pool_id),
        tenant_id: Set(new.tenant_id),
        kind: Set(new.kind.as_str().to_owned()),
        security_boundary: Set(new.security_boundary),
        region: Set(new.region),
        node_profile: Set(new.node_profile),
        min_size: Set(i32::try_from(new.min_size).unwrap_or(i32::MAX)),
        max_size: Set(i32::try_from(new.max_size).unwrap_or(i32::MAX)),
        state: Set(PoolState::Active.as_str().to_owned()),
        created_at: Set(now),
        updated_at: Set(now),
    }
    .insert(db)
    .await
    .map_err(Error::on_insert("worker_pools"))?;
    read_pool(row)
}

/// The tenant's pool `pool_id`.
pub async fn find_pool(
    db: &impl ConnectionTrait,
    tenant_id: &str,
    pool_id: &str,
) -> Result<Option<Pool>, Error> {
    pool_rows::Entity::find()
        .filter(pool_rows::Column::TenantId.eq(tenant_id))
        .filter(pool_rows::Column::PoolId.eq(pool_id))
        .one(db)
        .await?
        .map(read_pool)
        .transpose()
}

/// The tenant's pools, newest first, a page at a time.
pub async fn pools(
    db: &impl ConnectionTrait,
    tenant_id: &str,
    page: &Page,
) -> Result<Vec<Pool>, Error> {
    let select = pool_rows::Entity::find().filter(pool_rows::Column::TenantId.eq(tenant_id));
    page.apply(select, pool_rows::Column::Id)
        .all(db)
        .await?
        .into_iter()
        .map(read_pool)
        .collect()
}

/// Sets the state of the tenant's pool `pool_id`; None when it has no such pool.
pub async fn set_pool_state(
    db: &impl ConnectionTrait,
    tenant_id: &str,
    pool_id: &str,
    state: PoolState,
) -> Result<Option<Pool>, Error> {
    let done = pool_rows::Entity::update_many()
        .col_expr(pool_rows::Column::State, state.as_str().into())
        .col_expr(pool_rows::Column::UpdatedAt, Utc::now().into())
        .filter(pool_rows::Column::TenantId.eq(tenant_id))
        .filter(pool_rows::Column::PoolId.eq(pool_id))
        .exec(db)
        .await?;
    if done.rows_affected == 0 {
        return Ok(None);
    }
    find_pool(db, tenant_id, pool_id).await
}

/// A project's quota, as the API shows it.
#[derive(Debug, Clone, PartialEq, serde::Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Quota {
    /// None for the default quota of a project without one.
    pub quota_id: Option<String>,
    pub tenant_id: String,
    pub project_id: String,
    #[serde(flatten)]
    pub limits: QuotaLimits,
    /// Where it comes from: `default` when none is recorded, else what the PlatformAdmin who
    /// set it said (`manual` unless told).
    pub source: String,
    pub set_by: Option<String>,
    pub updated_at: Option<DateTime<Utc>>,
}

fn read_quota(m: quota_rows::Model) -> Quota {
    let whole = |v: i32| u32::try_from(v).unwrap_or(0);
    Quota {
        limits: QuotaLimits {
            concurrent_runs: whole(m.concurrent_runs),
            concurrent_sandboxes: whole(m.concurrent_sandboxes),
            cpu_per_attempt: m.cpu_per_attempt,
            memory_gb_per_attempt: m.memory_gb_per_attempt,
            execution_minutes_per_day: whole(m.execution_minutes_per_day),
        },
        quota_id: Some(m.quota_id),
        tenant_id: m.tenant_id,
        project_id: m.project_id,
        source: m.source,
        set_by: Some(m.set_by),
        updated_at: Some(m.updated_at),
    }
}

/// Sets the quota of the tenant's project: creates it, or replaces its limits (one upsert, so
/// two PlatformAdmins setting it at once leave one quota, the later one's).
pub async fn set_quota(
    db: &impl ConnectionTrait,
    tenant_id: &str,
    project_id: &str,
    limits: &QuotaLimits,
    source: &str,
    set_by: &str,
) -> Result<Quota, Error> {
    use quota_rows::Column as C;
    use sea_orm::sea_query::OnConflict;
    let int = |v: u32| i32::try_from(v).unwrap_or(i32::MAX);
    let row = quota_rows::ActiveModel {
        quota_id: Set(uuid::Uuid::now_v7().to_string()),
        tenant_id: Set(tenant_id.to_owned()),
        project_id: Set(project_id.to_owned()),
        concurrent_runs: Set(int(limits.concurrent_runs)),
        concurrent_sandboxes: Set(int(limits.concurrent_sandboxes)),
        cpu_per_attempt: Set(limits.cpu_per_attempt),
        memory_gb_per_attempt: Set(limits.memory_gb_per_attempt),
        execution_minutes_per_day: Set(int(limits.execution_minutes_per_day)),
        source: Set(source.to_owned()),
        set_by: Set(set_by.to_owned()),
        updated_at: Set(Utc::now()),
    };
    quota_rows::Entity::insert(row)
        .on_conflict(
            OnConflict::columns([C::TenantId, C::ProjectId])
                .update_columns([
                    C::ConcurrentRuns,
                    C::ConcurrentSandboxes,
                    C::CpuPerAttempt,
                    C::MemoryGbPerAttempt,
                    C::ExecutionMinutesPerDay,
                    C::Source,
                    C::SetBy,
                    C::UpdatedAt,
                ])
                .to_owned(),
        )
        .exec_without_returning(db)
        .await?;
    quota(db, tenant_id, project_id).await
}

/// The quota that applies to the tenant's project: the recorded one, else the default.
pub async fn quota(
    db: &impl ConnectionTrait,
    tenant_id: &str,
    project_id: &str,
) -> Result<Quota, Error> {
    let recorded = quota_rows::Entity::find()
        .filter(quota_rows::Column::TenantId.eq(tenant_id))
        .filter(quota_rows::Column::ProjectId.eq(project_id))
        .one(db)
        .await?;
    Ok(match recorded {
        Some(m) => read_quota(m),
        None => Quota {
            quota_id: None,
            tenant_id: tenant_id.to_owned(),
            project_id: project_id.to_owned(),
            limits: QuotaLimits::default(),
            source: "default".into(),
            set_by: None,
            updated_at: None,
        },
    })
}

/// The tenant's recorded quotas, newest first, a page at a time.
pub async fn quotas(
    db: &impl ConnectionTrait,
    tenant_id: &str,
    page: &Page,
) -> Result<Vec<Quota>, Error> {
    let select = quota_rows::Entity::find().filter(quota_rows::Column::TenantId.eq(tenant_id));
    Ok(page
        .apply(select, quota_rows::Column::QuotaId)
        .all(db)
        .await?
        .into_iter()
        .map(read_quota)
        .collect())
}

/// A capacity lease, as the API shows it.
#[derive(Debug, Clone, PartialEq, serde::Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Lease {
    pub lease_id: String,
    pub tenant_id: String,
    pub project_id: String,
    pub run_id: String,
    pub attempt_id: String,
    pub holder_kind: String,
    pub holder_id: String,
    pub pool_id: String,
    pub cpu: f64,
    pub memory_gb: f64,
    pub state: LeaseState,
    pub requested_at: DateTime<Utc>,
    pub granted_at: Option<DateTime<Utc>>,
    pub expires_at: Option<DateTime<Utc>>,
    pub released_at: Option<DateTime<Utc>>,
}

fn read_lease(m: lease_rows::Model) -> Result<Lease, Error> {
    let at = At {
        table: "capacity_leases",
        row: &m.lease_id,
    };
    Ok(Lease {
        state: at.wire("state", &m.state)?,
        lease_id: m.lease_id,
        tenant_id: m.tenant_id,
        project_id: m.project_id,
        run_id: m.run_id,
        attempt_id: m.attempt_id,
        holder_kind: m.holder_kind,
        holder_id: m.holder_id,
        pool_id: m.pool_id,
        cpu: m.cpu,
        memory_gb: m.memory_gb,
        requested_at: m.requested_at,
        granted_at: m.granted_at,
        expires_at: m.expires_at,
        released_at: m.released_at,
    })
}

/// The tenant's leases (of one state, of one run, when given), newest first, a page at a time.
pub async fn leases(
    db: &impl ConnectionTrait,
    tenant_id: &str,
    state: Option<LeaseState>,
    run_id: Option<&str>,
    page: &Page,
) -> Result<Vec<Lease>, Error> {
    let mut select = lease_rows::Entity::find().filter(lease_rows::Column::TenantId.eq(tenant_id));
    if let Some(state) = state {
        select = select.filter(lease_rows::Column::State.eq(state.as_str()));
    }
    if let Some(run_id) = run_id {
        select = select.filter(lease_rows::Column::RunId.eq(run_id));
    }
    page.apply(select, lease_rows::Column::LeaseId)
        .all(db)
        .await?
        .into_iter()
        .map(read_lease)
        .collect()
}

/// A lease a run asks for, `waiting` until its semaphore grants it.
#[derive(Debug, Clone)]
pub struct NewLease {
    /// Chosen by the run's workflow, so a retried request records one lease.
    pub lease_id: String,
    pub tenant_id: String,
    pub project_id: String,
    pub run_id: String,
    pub attempt_id: String,
    pub holder_kind: String,
    pub holder_id: String,
    pub pool_id: String,
    pub cpu: f64,
    pub memory_gb: f64,
}

/// Records `new` as `waiting`; a lease already recorded with its id is left as it is but for
/// its attempt (a deferred run's lease is recorded before its workflow runs).
pub async fn request_lease(
    db: &impl ConnectionTrait,
    new: NewLease,
    at: DateTime<Utc>,
) -> Result<(), Error> {
    let row = lease_rows::ActiveModel {
        lease_id: Set(new.lease_id),
        tenant_id: Set(new.tenant_id),
        project_id: Set(new.project_id),
        run_id: Set(new.run_id),
        attempt_id: Set(new.attempt_id),
        holder_kind: Set(new.holder_kind),
        holder_id: Set(new.holder_id),
        pool_id: Set(new.pool_id),
        cpu: Set(new.cpu),
        memory_gb: Set(new.memory_gb),
        state: Set(LeaseState::Waiting.as_str().to_owned()),
        requested_at: Set(at),
        granted_at: Set(None),
        expires_at: Set(None),
        released_at: Set(None),
    };
    lease_rows::Entity::insert(row)
        .on_conflict(
            sea_orm::sea_query::OnConflict::column(lease_rows::Column::LeaseId)
                .update_column(lease_rows::Column::AttemptId)
                .to_owned(),
        )
        .exec_without_returning(db)
        .await?;
    Ok(())
}

/// Moves lease `lease_id` to `to` at `at`, from the states that may move there (`granted` from
/// `waiting`; `released` from `waiting` or `granted`). A lease already past them is left as it
/// is, so a retried move changes nothing.
pub async fn move_lease(
    db: &impl ConnectionTrait,
    lease_id: &str,
    to: LeaseState,
    at: DateTime<Utc>,
) -> Result<(), Error> {
    let mut update = lease_rows::Entity::update_many()
        .col_expr(lease_rows::Column::State, to.as_str().into())
        .filter(lease_rows::Column::LeaseId.eq(lease_id));
    update = match to {
        LeaseState::Waiting => return Ok(()),
        LeaseState::Granted => update
            .col_expr(lease_rows::Column::GrantedAt, at.into())
            .filter(lease_rows::Column::State.eq(LeaseState::Waiting.as_str())),
        LeaseState::Released => update
            .col_expr(lease_rows::Column::ReleasedAt, at.into())
            .filter(lease_rows::Column::State.is_in(HELD)),
        LeaseState::Expired => update
            .col_expr(lease_rows::Column::ExpiresAt, at.into())
            .filter(lease_rows::Column::State.is_in(HELD)),
    };
    update.exec(db).await?;
    Ok(())
}

/// Grants the `waiting` leases of `holders`, whose semaphore granted them a slot
/// (`semaphores`, in the same transaction).
pub async fn grant_leases(
    db: &impl ConnectionTrait,
    holders: &[String],
    at: DateTime<Utc>,
) -> Result<(), Error> {
    if holders.is_empty() {
        return Ok(());
    }
    lease_rows::Entity::update_many()
        .col_expr(
            lease_rows::Column::State,
            LeaseState::Granted.as_str().into(),
        )
        .col_expr(lease_rows::Column::GrantedAt, at.into())
        .filter(lease_rows::Column::HolderId.is_in(holders.iter().cloned()))
        .filter(lease_rows::Column::State.eq(LeaseState::Waiting.as_str()))
        .exec(db)
        .await?;
    Ok(())
}

/// Releases every lease `holder_id` still holds or waits for, whose semaphore let it go
/// (`semaphores`, in the same transaction).
pub async fn release_leases(
    db: &impl ConnectionTrait,
    holder_id: &str,
    at: DateTime<Utc>,
) -> Result<(), Error> {
    let query = end_held(
        holder_id,
        LeaseState::Released,
        lease_rows::Column::ReleasedAt,
        at,
    );
    query.exec(db).await?;
    Ok(())
}

/// The states of a lease still counted against its quota.
const HELD: [&str; 2] = ["waiting", "granted"];

/// Marks every lease `holder_id` still holds or waits for as `expired` at `at`: its holder
/// vanished (terminated by hand) and its semaphore took the slot back.
pub async fn expire_leases(
    db: &impl ConnectionTrait,
    holder_id: &str,
    at: DateTime<Utc>,
) -> Result<u64, Error> {
    let query = end_held(
        holder_id,
        LeaseState::Expired,
        lease_rows::Column::ExpiresAt,
        at,
    );
    let done = query.exec(db).await?;
    Ok(done.rows_affected)
}

/// The update that moves every lease `holder_id` still holds or waits for to `to`, stamping
/// `stamped` with `at`. Found by the holder's index (`ix_capacity_leases_holder`), not among
/// every tenant's held leases.
fn end_held(
    holder_id: &str,
    to: LeaseState,
    stamped: lease_rows::Column,
    at: DateTime<Utc>,
) -> sea_orm::UpdateMany<lease_rows::Entity> {
    lease_rows::Entity::update_many()
        .col_expr(lease_rows::Column::State, to.as_str().into())
        .col_expr(stamped, at.into())
        .filter(lease_rows::Column::HolderId.eq(holder_id))
        .filter(lease_rows::Column::State.is_in(HELD))
}

/// The apply minutes the project's runs completed since `since` counted.
pub async fn minutes_used(
    db: &impl ConnectionTrait,
    tenant_id: &str,
    project_id: &str,
    since: DateTime<Utc>,
) -> Result<u32, Error> {
    let sum: Option<Option<i64>> = minutes_query(tenant_id, project_id, since)
        .into_tuple()
        .one(db)
        .await?;
    Ok(u32::try_from(sum.flatten().unwrap_or(0)).unwrap_or(u32::MAX))
}

/// The sum of [`minutes_used`], read from the index alone
/// (`ix_provisioning_runs_project_minutes`): every run's start asks it, over as many runs as its
/// project completed that day.
fn minutes_query(
    tenant_id: &str,
    project_id: &str,
    since: DateTime<Utc>,
) -> sea_orm::Select<runs::Entity> {
    runs::Entity::find()
        .select_only()
        .column_as(
            Expr::col(runs::Column::ApplyMinutes)
                .sum()
                .cast_as("BIGINT"),
            "used",
        )
        .filter(runs::Column::TenantId.eq(tenant_id))
        .filter(runs::Column::ProjectId.eq(project_id))
        .filter(runs::Column::CompletedAt.gte(since))
}

/// The project's quota, and whether its day's execution minutes are spent at `now` (then no
/// new run may start; the API answers 429 and a run that starts anyway ends unplanned).
pub async fn minutes_spent(
    db: &impl ConnectionTrait,
    tenant_id: &str,
    project_id: &str,
    now: DateTime<Utc>,
) -> Result<(Quota, Option<MinutesSpent>), Error> {
    let quota = quota(db, tenant_id, project_id).await?;
    let used = minutes_used(db, tenant_id, project_id, day_started_at(now)).await?;
    let spent = check_minutes(project_id, used, &quota.limits, now).err();
    Ok((quota, spent))
}

/// How many leases of the tenant's project are held or waited for now.
pub async fn held_leases(
    db: &impl ConnectionTrait,
    tenant_id: &str,
    project_id: &str,
) -> Result<u64, Error> {
    use sea_orm::PaginatorTrait;
    Ok(lease_rows::Entity::find()
        .filter(lease_rows::Column::TenantId.eq(tenant_id))
        .filter(lease_rows::Column::ProjectId.eq(project_id))
        .filter(lease_rows::Column::State.is_in(HELD))
        .count(db)
        .await?)
}

/// How many leases of the tenant's pool `pool_id` are granted now.
pub async fn granted_in_pool(
    db: &impl ConnectionTrait,
    tenant_id: &str,
    pool_id: &str,
) -> Result<u64, Error> {
    use sea_orm::PaginatorTrait;
    Ok(lease_rows::Entity::find()
        .filter(lease_rows::Column::TenantId.eq(tenant_id))
        .filter(lease_rows::Column::PoolId.eq(pool_id))
        .filter(lease_rows::Column::State.eq(LeaseState::Granted.as_str()))
        .count(db)
        .await?)
}

/// The granted leases, as (tenant, run) pairs: what works now (admission's backlog share,
/// `transactions::admit_run::admit_deferred`).
pub async fn granted(db: &impl ConnectionTrait) -> Result<Vec<(String, String)>, Error> {
    Ok(lease_rows::Entity::find()
        .select_only()
        .column(lease_rows::Column::TenantId)
        .column(lease_rows::Column::RunId)
        .filter(lease_rows::Column::State.eq(LeaseState::Granted.as_str()))
        .into_tuple()
        .all(db)
        .await?)
}

/// How many leases are held and waiting, per tenant, pool and state: the capacity gauges.
pub async fn lease_counts(
    db: &impl ConnectionTrait,
) -> Result<Vec<(String, String, LeaseState, u64)>, Error> {
    let rows: Vec<(String, String, String, i64)> = lease_rows::Entity::find()
        .select_only()
        .column(lease_rows::Column::TenantId)
        .column(lease_rows::Column::PoolId)
        .column(lease_rows::Column::State)
        .column_as(Expr::col(lease_rows::Column::LeaseId).count(), "n")
        .filter(lease_rows::Column::State.is_in(HELD))
        .group_by(lease_rows::Column::TenantId)
        .group_by(lease_rows::Column::PoolId)
        .group_by(lease_rows::Column::State)
        .into_tuple()
        .all(db)
        .await?;
    rows.into_iter()
        .map(|(tenant, pool, state, n)| {
            let at = At {
                table: "capacity_leases",
                row: &tenant,
            };
            Ok((
                tenant.clone(),
                pool,
                at.wire("state", &state)?,
                u64::try_from(n).unwrap_or(0),
            ))
        })
        .collect()
}

/// What one project uses of its quota now: runs holding a lease, and apply minutes since
/// `since` (the day's start), with the limits in force.
#[derive(Debug, Clone, PartialEq)]
pub struct QuotaUse {
    pub tenant_id: String,
    pub project_id: String,
    pub leases_granted: u64,
    pub minutes_used: u64,
    pub limits: QuotaLimits,
}

/// The limits of every recorded quota, by (tenant, project).
pub async fn recorded_limits(
    db: &impl ConnectionTrait,
) -> Result<std::collections::BTreeMap<(String, String), QuotaLimits>, Error> {
    Ok(quota_rows::Entity::find()
        .all(db)
        .await?
        .into_iter()
        .map(read_quota)
        .map(|q| ((q.tenant_id, q.project_id), q.limits))
        .collect())
}

/// The quota use of every project with a granted lease or apply minutes since `since`.
pub async fn quota_use(
    db: &impl ConnectionTrait,
    since: DateTime<Utc>,
) -> Result<Vec<QuotaUse>, Error> {
    use std::collections::BTreeMap;
    let granted: Vec<(String, String, i64)> = lease_rows::Entity::find()
        .select_only()
        .column(lease_rows::Column::TenantId)
        .column(lease_rows::Column::ProjectId)
        .column_as(Expr::col(lease_rows::Column::LeaseId).count(), "n")
        .filter(lease_rows::Column::State.eq(LeaseState::Granted.as_str()))
        .group_by(lease_rows::Column::TenantId)
        .group_by(lease_rows::Column::ProjectId)
        .into_tuple()
        .all(db)
        .await?;
    let minutes: Vec<(String, String, Option<i64>)> = runs::Entity::find()
        .select_only()
        .column(runs::Column::TenantId)
        .column(runs::Column::ProjectId)
        .column_as(
            Expr::col(runs::Column::ApplyMinutes)
                .sum()
                .cast_as("BIGINT"),
            "m",
        )
        .filter(runs::Column::CompletedAt.gte(since))
        .filter(runs::Column::ApplyMinutes.is_not_null())
        .group_by(runs::Column::TenantId)
        .group_by(runs::Column::ProjectId)
        .into_tuple()
        .all(db)
        .await?;
    let mut uses: BTreeMap<(String, String), (u64, u64)> = BTreeMap::new();
    for (tenant, project, n) in granted {
        uses.entry((tenant, project)).or_default().0 = u64::try_from(n).unwrap_or(0);
    }
    for (tenant, project, m) in minutes {
        uses.entry((tenant, project)).or_default().1 = u64::try_from(m.unwrap_or(0)).unwrap_or(0);
    }
    let recorded = recorded_limits(db).await?;
    Ok(uses
        .into_iter()
        .map(
            |((tenant_id, project_id), (leases_granted, minutes_used))| QuotaUse {
                limits: recorded
                    .get(&(tenant_id.clone(), project_id.clone()))
                    .cloned()
                    .unwrap_or_default(),
                tenant_id,
                project_id,
                leases_granted,
                minutes_used,
            },
        )
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures;

    fn pool(id: &str, tenant: &str) -> NewPool {
        NewPool {
            pool_id: id.into(),
            tenant_id: tenant.into(),
            kind: PoolKind::Dedicated,
            security_boundary: "customer-isolated".into(),
            region: "eu-west-1".into(),
            node_profile: "c6i.large".into(),
            min_size: 1,
            max_size: 4,
        }
    }

    async fn pools_and_quotas_on(db: sea_orm::DatabaseConnection) {
        let page = Page {
            after: None,
            rows: 10,
        };
        create_pool(&db, pool("eu-prod", "acme")).await.unwrap();
        create_pool(&db, pool("eu-dev", "acme")).await.unwrap();
        let taken = create_pool(&db, pool("eu-prod", "globex"))
            .await
            .unwrap_err();
        assert!(
            matches!(
                taken,
                Error::Duplicate {
                    table: "worker_pools"
                }
            ),
            "{taken:?}"
        );
        let listed: Vec<String> = pools(&db, "acme", &page)
            .await
            .unwrap()
            .into_iter()
            .map(|p| p.pool_id)
            .collect();
        assert_eq!(listed, ["eu-dev", "eu-prod"], "newest first");
        assert!(pools(&db, "globex", &page).await.unwrap().is_empty());
        assert_eq!(find_pool(&db, "globex", "eu-prod").await.unwrap(), None);

        let default = quota(&db, "acme", "shop").await.unwrap();
        assert_eq!(
            (default.source.as_str(), default.quota_id),
            ("default", None)
        );
        let limits = QuotaLimits {
            concurrent_runs: 2,
            ..Default::default()
        };
        let set = set_quota(&db, "acme", "shop", &limits, "manual", "admin")
            .await
            .unwrap();
        let again = set_quota(
            &db,
            "acme",
            "shop",
            &QuotaLimits {
                concurrent_runs: 3,
                ..limits
            },
            "plan:pro",
            "admin",
        )
        .await
        .unwrap();
        assert_eq!(again.quota_id, set.quota_id, "one quota per project");
        assert_eq!(
            quota(&db, "acme", "shop")
                .await
                .unwrap()
                .limits
                .concurrent_runs,
            3
        );
        assert_eq!(quotas(&db, "acme", &page).await.unwrap().len(), 1);
        assert!(quotas(&db, "globex", &page).await.unwrap().is_empty());
        assert!(
            leases(&db, "acme", None, None, &page)
                .await
                .unwrap()
                .is_empty()
        );
    }

    fn lease(id: &str, run: &str) -> NewLease {
        NewLease {
            lease_id: id.into(),
            tenant_id: "acme".into(),
            project_id: "shop".into(),
            run_id: run.into(),
            attempt_id: "attempt-1".into(),
            holder_kind: "provisioning-run".into(),
            holder_id: format!("provisioning-run/{run}"),
            pool_id: "default".into(),
            cpu: 2.0,
            memory_gb: 4.0,
        }
    }

    async fn leases_move_only_forward_on(db: sea_orm::DatabaseConnection) {
        let page = Page {
            after: None,
            rows: 10,
        };
        let at = Utc::now();
        request_lease(&db, lease("l1", "r1"), at).await.unwrap();
        request_lease(&db, lease("l1", "r1"), at).await.unwrap();
        request_lease(&db, lease("l2", "r2"), at).await.unwrap();
        let state_of =
            |leases: &[Lease], id: &str| leases.iter().find(|l| l.lease_id == id).map(|l| l.state);
        let listed = leases(&db, "acme", None, None, &page).await.unwrap();
        assert_eq!(listed.len(), 2, "a retried request records one lease");
        move_lease(&db, "l1", LeaseState::Granted, at)
            .await
            .unwrap();
        move_lease(&db, "l1", LeaseState::Released, at)
            .await
            .unwrap();
        // A retried grant after the release changes nothing.
        move_lease(&db, "l1", LeaseState::Granted, at)
            .await
            .unwrap();
        move_lease(&db, "l2", LeaseState::Granted, at)
            .await
            .unwrap();
        assert_eq!(
            lease_counts(&db).await.unwrap(),
            vec![("acme".into(), "default".into(), LeaseState::Granted, 1)]
        );
        assert_eq!(
            expire_leases(&db, "provisioning-run/r1", at).await.unwrap(),
            0
        );
        assert_eq!(
            expire_leases(&db, "provisioning-run/r2", at).await.unwrap(),
            1
        );
        let listed = leases(&db, "acme", None, None, &page).await.unwrap();
        assert_eq!(state_of(&listed, "l1"), Some(LeaseState::Released));
        assert_eq!(state_of(&listed, "l2"), Some(LeaseState::Expired));
        let l1 = listed.iter().find(|l| l.lease_id == "l1").unwrap();
        assert!(l1.granted_at.is_some() && l1.released_at.is_some() && l1.expires_at.is_none());
        assert!(lease_counts(&db).await.unwrap().is_empty());
        assert_eq!(
            leases(&db, "acme", Some(LeaseState::Expired), None, &page)
                .await
                .unwrap()
                .len(),
            1
        );
        assert_eq!(minutes_used(&db, "acme", "shop", at).await.unwrap(), 0);
    }

    /// A run's ending finds its leases by its holder's index, not by walking every tenant's
    /// held leases.
    #[tokio::test]
    async fn a_holders_leases_are_found_by_its_index_on_sqlite() {
        let db = fixtures::sqlite().await;
        let query = end_held(
            "run-1",
            LeaseState::Released,
            lease_rows::Column::ReleasedAt,
            Utc::now(),
        );
        let plan = fixtures::sqlite_plan(&db, &query).await;
        assert!(plan.contains("ix_capacity_leases_holder"), "{plan}");
    }

    /// Every run's start sums its project's minutes of the day: from the index alone, not a
    /// read of each completed run's row.
    #[tokio::test]
    async fn the_days_minutes_are_summed_from_an_index_alone_on_sqlite() {
        let db = fixtures::sqlite().await;
        let plan = fixtures::sqlite_plan(&db, &minutes_query("acme", "shop", Utc::now())).await;
        assert!(
            plan.contains("COVERING INDEX ix_provisioning_runs_project_minutes"),
            "{plan}"
        );
    }

    fixtures::on_both_databases!(
        leases_move_only_forward_sqlite,
        leases_move_only_forward_postgres,
        leases_move_only_forward_on
    );

    fixtures::on_both_databases!(
        pools_and_quotas_are_kept_per_tenant_sqlite,
        pools_and_quotas_are_kept_per_tenant_postgres,
        pools_and_quotas_on
    );
}
