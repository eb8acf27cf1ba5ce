//! `environments`: a tenant's deployment targets and their class.

use crate::decode::At;
use crate::entities::environments as rows;
use crate::{Error, Page};
use chrono::{DateTime, Utc};
use runtime_cloud_models::EnvironmentClass;
use runtime_cloud_models::environments::{
    EnvironmentKey, EnvironmentMode, EnvironmentPage, Labels,
};
use runtime_cloud_models::events::{
    EnvironmentExpiring, EnvironmentExpiryExtended, EnvironmentModeChanged, EnvironmentRetired,
    EnvironmentTargetChanged,
};
use runtime_cloud_models::lifetime::EnvironmentState;
use runtime_cloud_models::targets::{KubernetesNamespace, ObserverTarget, Target};
use sea_orm::{
    ActiveModelTrait, ActiveValue::Set, ColumnTrait, ConnectionTrait, EntityTrait, QueryFilter,
    QueryOrder, QuerySelect,
};

/// One environment of a tenant, as the API shows it too.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Environment {
    /// Surrogate key (the order [`page`] walks in); not shown.
    #[serde(skip)]
    pub id: String,
    /// Owner tenant.
    pub tenant_id: String,
    /// The environment's id, unique within the tenant.
    pub environment_id: String,
    /// Owner project.
    pub project_id: String,
    /// Production runs wait for an operator's approval.
    pub class: EnvironmentClass,
    /// Where it runs: its runner and its observer.
    pub target: Target,
    /// How far the product goes on its own when it drifts.
    pub mode: EnvironmentMode,
    /// What fleet rollouts select it by.
    #[schema(value_type = std::collections::BTreeMap<String, String>)]
    pub labels: Labels,
    /// The customer tenant inside the product (not a Factory tenant), where given.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub customer_tenant_id: Option<String>,
    /// The worker pool whose workers plan and apply its runs; none for the default task queue.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pool_id: Option<String>,
    /// Where it is in its life: `active`, or `retired` once a decommission run destroyed
    /// what it ran.
    pub state: EnvironmentState,
    /// When an ephemeral environment is decommissioned; absent: it is not ephemeral.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<DateTime<Utc>>,
    /// When it was retired.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub retired_at: Option<DateTime<Utc>>,
    /// When it was registered.
    pub created_at: DateTime<Utc>,
}

impl Environment {
    /// Whether it is a production environment.
    pub fn production(&self) -> bool {
        self.class == EnvironmentClass::Production
    }

    /// Whether it was retired: it refuses new runs, observations and changes.
    pub fn retired(&self) -> bool {
        self.state.retired()
    }

    pub(crate) fn read(m: rows::Model) -> Result<Self, Error> {
        let at = At {
            table: "environments",
            row: &m.id,
        };
        let class = at.wire("class", &m.class)?;
        Ok(Self {
            mode: at
                .wire_opt("mode", m.mode.as_deref())?
                .unwrap_or(EnvironmentMode::default_for(class)),
            class,
            target: at.json_text("target", &m.target)?,
            labels: match &m.labels {
                Some(text) => at.json_text("labels", text)?,
                None => Labels::new(),
            },
            customer_tenant_id: m.customer_tenant_id,
            pool_id: m.pool_id,
            state: at.wire("state", &m.state)?,
            expires_at: m.expires_at,
            retired_at: m.retired_at,
            id: m.id,
            tenant_id: m.tenant_id,
            environment_id: m.environment_id,
            project_id: m.project_id,
            created_at: m.created_at,
        })
    }
}

/// An environment to register.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewEnvironment {
    pub tenant_id: String,
    pub environment_id: String,
    pub project_id: String,
    pub class: EnvironmentClass,
    pub target: Target,
    /// None: the class's default.
    pub mode: Option<EnvironmentMode>,
    pub labels: Labels,
    pub customer_tenant_id: Option<String>,
    pub pool_id: Option<String>,
    /// An ephemeral environment's expiry.
    pub expires_at: Option<DateTime<Utc>>,
}

/// Registers an environment. [`Error::Duplicate`] when the tenant already has one with this id.
pub async fn register(
    db: &impl ConnectionTrait,
    new: NewEnvironment,
) -> Result<Environment, Error> {
    let now = Utc::now();
    let row = rows::ActiveModel {
        id: Set(uuid::Uuid::now_v7().to_string()),
        tenant_id: Set(new.tenant_id),
        environment_id: Set(new.environment_id),
        project_id: Set(new.project_id),
        class: Set(new.class.as_str().to_owned()),
        target: Set(target_json(&new.target)?),
        mode: Set(Some(
            new.mode
                .unwrap_or(EnvironmentMode::default_for(new.class))
                .as_str()
                .to_owned(),
        )),
        labels: Set((!new.labels.is_empty())
            .then(|| serde_json::to_string(&new.labels))
            .transpose()?),
        customer_tenant_id: Set(new.customer_tenant_id),
        pool_id: Set(new.pool_id),
        state: Set(EnvironmentState::Active.as_str().to_owned()),
        expires_at: Set(new.expires_at),
        warned_for: Set(None),
        retired_at: Set(None),
        created_at: Set(now),
        updated_at: Set(now),
    }
    .insert(db)
    .await
    .map_err(Error::on_insert("environments"))?;
    Environment::read(row)
}

/// Binds the tenant's environment to worker pool `pool_id` (none: the shared task queue).
/// [`Error::Missing`] when there is no such environment. Runs already past their capacity step
/// keep the pool they were given.
pub async fn bind_pool(
    db: &impl ConnectionTrait,
    tenant_id: &str,
    environment_id: &str,
    pool_id: Option<String>,
) -> Result<Environment, Error> {
    let done = rows::Entity::update_many()
        .col_expr(rows::Column::PoolId, pool_id.into())
        .col_expr(rows::Column::UpdatedAt, Utc::now().into())
        .filter(rows::Column::TenantId.eq(tenant_id))
        .filter(rows::Column::EnvironmentId.eq(environment_id))
        .exec(db)
        .await?;
    let missing = || Error::Missing {
        what: "environment",
        id: environment_id.to_owned(),
    };
    if done.rows_affected == 0 {
        return Err(missing());
    }
    find(db, tenant_id, environment_id)
        .await?
        .ok_or_else(missing)
}

fn target_json(target: &Target) -> Result<String, Error> {
    Ok(serde_json::to_string(target)?)
}

/// Moves the tenant's environment to `target`, with the `EnvironmentTargetChanged` event that
/// records who did it, in one transaction. [`Error::Missing`] when there is no such
/// environment; the same target again changes nothing and records nothing.
pub async fn change_target(
    db: &sea_orm::DatabaseConnection,
    tenant_id: &str,
    environment_id: &str,
    target: Target,
    changed_by: &str,
) -> Result<Environment, Error> {
    let txn = crate::begin_write(db).await?;
    let row = rows::Entity::find()
        .filter(rows::Column::TenantId.eq(tenant_id))
        .filter(rows::Column::EnvironmentId.eq(environment_id))
        .one(&txn)
        .await?
        .ok_or_else(|| Error::Missing {
            what: "environment",
            id: environment_id.to_owned(),
        })?;
    let before = Environment::read(row.clone())?;
    if before.target == target {
        return Ok(before);
    }
    let mut active: rows::ActiveModel = row.into();
    active.target = Set(target_json(&target)?);
    active.updated_at = Set(Utc::now());
    let after = Environment::read(active.update(&txn).await?)?;
    let event = EnvironmentTargetChanged {
        tenant_id: tenant_id.to_owned(),
        environment_id: environment_id.to_owned(),
        before: before.target,
        after: after.target.clone(),
        changed_by: changed_by.to_owned(),
    };
    let id = crate::outbox::event_id(
        &uuid::Uuid::now_v7().to_string(),
        "EnvironmentTargetChanged",
    );
    crate::outbox::append(&txn, tenant_id, event.into(), id).await?;
    txn.commit().await?;
    Ok(after)
}

/// Sets the tenant's environment's mode, with the `EnvironmentModeChanged` event that records
/// who did it, in one transaction; returns the environment before and after. The same mode
/// again changes nothing and records nothing.
pub async fn change_mode(
    db: &sea_orm::DatabaseConnection,
    tenant_id: &str,
    environment_id: &str,
    mode: EnvironmentMode,
    changed_by: &str,
) -> Result<(Environment, Environment), Error> {
    let txn = crate::begin_write(db).await?;
    let row = rows::Entity::find()
        .filter(rows::Column::TenantId.eq(tenant_id))
        .filter(rows::Column::EnvironmentId.eq(environment_id))
        .one(&txn)
        .await?
        .ok_or_else(|| Error::Missing {
            what: "environment",
            id: environment_id.to_owned(),
        })?;
    let before = Environment::read(row.clone())?;
    if before.mode == mode {
        return Ok((before.clone(), before));
    }
    let mut active: rows::ActiveModel = row.into();
    active.mode = Set(Some(mode.as_str().to_owned()));
    active.updated_at = Set(Utc::now());
    let after = Environment::read(active.update(&txn).await?)?;
    let event = EnvironmentModeChanged {
        tenant_id: tenant_id.to_owned(),
        environment_id: environment_id.to_owned(),
        before: before.mode,
        after: after.mode,
        changed_by: changed_by.to_owned(),
    };
    let id = crate::outbox::event_id(&uuid::Uuid::now_v7().to_string(), "EnvironmentModeChanged");
    crate::outbox::append(&txn, tenant_id, event.into(), id).await?;
    txn.commit().await?;
    Ok((before, after))
}

/// The tenant's environment, if it exists.
pub async fn find(
    db: &impl ConnectionTrait,
    tenant_id: &str,
    environment_id: &str,
) -> Result<Option<Environment>, Error> {
    rows::Entity::find()
        .filter(rows::Column::TenantId.eq(tenant_id))
        .filter(rows::Column::EnvironmentId.eq(environment_id))
        .one(db)
        .await?
        .map(Environment::read)
        .transpose()
}

/// Those of the environments `keys` that exist (a sweep's batch, in one query), for a
/// transaction that records their observations: on PostgreSQL each row stays
/// locked until the transaction ends (taken in key order, so two batches never wait on each
/// other in a cycle). Two records of one environment (a sweep's batch and a run's
/// after-apply observation) then follow one another, the second reading what the first
/// wrote; read at once, each would write beside the other's findings without seeing them.
/// SQLite's write lock, taken by `begin_write`, already serialises them.
pub async fn lock_many(
    db: &impl ConnectionTrait,
    keys: &[crate::scope::EnvKey],
) -> Result<Vec<Environment>, Error> {
    use crate::scope::of_environments;
    let mut select = rows::Entity::find()
        .filter(of_environments(
            rows::Column::TenantId,
            rows::Column::EnvironmentId,
            keys,
        ))
        .order_by_asc(rows::Column::TenantId)
        .order_by_asc(rows::Column::EnvironmentId);
    if db.get_database_backend() == sea_orm::DbBackend::Postgres {
        select = select.lock_exclusive();
    }
    select
        .all(db)
        .await?
        .into_iter()
        .map(Environment::read)
        .collect()
}

/// A page of the tenant's environments, by id.
pub async fn list(
    db: &impl ConnectionTrait,
    tenant_id: &str,
    page: &Page,
) -> Result<Vec<Environment>, Error> {
    let select = rows::Entity::find().filter(rows::Column::TenantId.eq(tenant_id));
    page.ascending(select, rows::Column::EnvironmentId)
        .all(db)
        .await?
        .into_iter()
        .map(Environment::read)
        .collect()
}

/// Every environment of the tenant, by id: for what must see them all (a rollout's
/// selection, the fleet's summary), never an API list.
pub async fn all(db: &impl ConnectionTrait, tenant_id: &str) -> Result<Vec<Environment>, Error> {
    rows::Entity::find()
        .filter(rows::Column::TenantId.eq(tenant_id))
        .order_by_asc(rows::Column::EnvironmentId)
        .all(db)
        .await?
        .into_iter()
        .map(Environment::read)
        .collect()
}

/// The environments not retired: what the sweep, the reconciler, the watches and the fleet
/// look after.
fn active() -> sea_orm::sea_query::SimpleExpr {
    rows::Column::State.eq(EnvironmentState::Active.as_str())
}

/// A page of every tenant's active environments in a stable order (the surrogate key),
/// starting after `after`; `next` is set when the page is full.
pub async fn page(
    db: &impl ConnectionTrait,
    after: Option<&str>,
    limit: u64,
) -> Result<EnvironmentPage, Error> {
    let mut select = rows::Entity::find()
        .filter(active())
        .order_by_asc(rows::Column::Id);
    if let Some(after) = after {
        select = select.filter(rows::Column::Id.gt(after));
    }
    let rows = select.limit(limit).all(db).await?;
    let next = (rows.len() as u64 == limit)
        .then(|| rows.last().map(|r| r.id.clone()))
        .flatten();
    let environments = rows
        .into_iter()
        .map(|r| EnvironmentKey {
            tenant_id: r.tenant_id,
            environment_id: r.environment_id,
        })
        .collect();
    Ok(EnvironmentPage { environments, next })
}

/// Every environment a Kubernetes namespace observes, of every tenant: what the clusters'
/// watches look after. The target is JSON, so the rows whose text names the kind are read and
/// the target decides.
pub async fn kubernetes_observed(
    db: &impl ConnectionTrait,
) -> Result<Vec<(EnvironmentKey, KubernetesNamespace)>, Error> {
    let rows = rows::Entity::find()
        .filter(rows::Column::Target.contains("\"kubernetes\""))
        .filter(active())
        .order_by_asc(rows::Column::Id)
        .all(db)
        .await?;
    let mut observed = Vec::new();
    for row in rows {
        let env = Environment::read(row)?;
        if let ObserverTarget::Kubernetes(ns) = env.target.observer {
            let key = EnvironmentKey {
                tenant_id: env.tenant_id,
                environment_id: env.environment_id,
            };
            observed.push((key, ns));
        }
    }
    Ok(observed)
}

/// (tenant, environment id) of every active environment (the metrics' stale gauge).
pub async fn keys(db: &impl ConnectionTrait) -> Result<Vec<(String, String)>, Error> {
    Ok(rows::Entity::find()
        .filter(active())
        .select_only()
        .columns([rows::Column::TenantId, rows::Column::EnvironmentId])
        .into_tuple()
        .all(db)
        .await?)
}

/// What [`extend`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Extended {
    /// The expiry moved: the environment with its new expiry.
    Moved(Box<Environment>),
    /// It is retired, or not ephemeral: nothing changed.
    Refused(Box<Environment>),
}

/// Moves the tenant's ephemeral environment's expiry to `expires_at`, with the
/// `EnvironmentExpiryExtended` event that records who did it, in one transaction. A retired
/// environment, or one that is not ephemeral, is left as it is.
pub async fn extend(
    db: &sea_orm::DatabaseConnection,
    tenant_id: &str,
    environment_id: &str,
    expires_at: DateTime<Utc>,
    extended_by: &str,
) -> Result<Extended, Error> {
    let txn = crate::begin_write(db).await?;
    let row = one(&txn, tenant_id, environment_id).await?;
    let before = Environment::read(row.clone())?;
    let Some(was) = before.expires_at.filter(|_| !before.retired()) else {
        return Ok(Extended::Refused(Box::new(before)));
    };
    let mut active: rows::ActiveModel = row.into();
    active.expires_at = Set(Some(expires_at));
    active.updated_at = Set(Utc::now());
    let after = Environment::read(active.update(&txn).await?)?;
    let event = EnvironmentExpiryExtended {
        tenant_id: tenant_id.to_owned(),
        environment_id: environment_id.to_owned(),
        before: was,
        expires_at,
        extended_by: extended_by.to_owned(),
    };
    let id = crate::outbox::event_id(
        &uuid::Uuid::now_v7().to_string(),
        "EnvironmentExpiryExtended",
    );
    crate::outbox::append(&txn, tenant_id, event.into(), id).await?;
    txn.commit().await?;
    Ok(Extended::Moved(Box::new(after)))
}

/// Records that the environment was warned of its expiry `expires_at`, with the
/// `EnvironmentExpiring` event, in one transaction: once per expiry (a second call for the
/// same expiry, a worker's retry, records nothing). True when it warned now.
pub async fn warn_expiring(
    db: &sea_orm::DatabaseConnection,
    tenant_id: &str,
    environment_id: &str,
    expires_at: DateTime<Utc>,
) -> Result<bool, Error> {
    let txn = crate::begin_write(db).await?;
    let row = one(&txn, tenant_id, environment_id).await?;
    let env = Environment::read(row.clone())?;
    if env.retired() || env.expires_at != Some(expires_at) || row.warned_for == Some(expires_at) {
        return Ok(false);
    }
    let mut active: rows::ActiveModel = row.into();
    active.warned_for = Set(Some(expires_at));
    active.update(&txn).await?;
    let event = EnvironmentExpiring {
        tenant_id: tenant_id.to_owned(),
        environment_id: environment_id.to_owned(),
        project_id: env.project_id,
        expires_at,
    };
    // One event per expiry, however often asked.
    let key = format!(
        "{tenant_id}/{environment_id}/{}",
        expires_at.timestamp_millis()
    );
    let id = crate::outbox::event_id(&key, "EnvironmentExpiring");
    crate::outbox::append(&txn, tenant_id, event.into(), id).await?;
    txn.commit().await?;
    Ok(true)
}

/// Retires the tenant's environment in the transaction `txn` that records the decommission
/// run `run_id` applied (none: nothing was ever declared for it, so there was nothing to
/// destroy), with `EnvironmentRetired`. An environment retired already is left.
pub async fn retire_in(
    txn: &impl ConnectionTrait,
    tenant_id: &str,
    environment_id: &str,
    run_id: Option<&str>,
) -> Result<(), Error> {
    let row = one(txn, tenant_id, environment_id).await?;
    let env = Environment::read(row.clone())?;
    if env.retired() {
        return Ok(());
    }
    let now = Utc::now();
    let mut active: rows::ActiveModel = row.into();
    active.state = Set(EnvironmentState::Retired.as_str().to_owned());
    active.retired_at = Set(Some(now));
    active.updated_at = Set(now);
    active.update(txn).await?;
    let event = EnvironmentRetired {
        tenant_id: tenant_id.to_owned(),
        environment_id: environment_id.to_owned(),
        project_id: env.project_id,
        provisioning_run_id: run_id.map(str::to_owned),
        expires_at: env.expires_at,
    };
    let key = format!("{tenant_id}/{environment_id}");
    let id = crate::outbox::event_id(&key, "EnvironmentRetired");
    crate::outbox::append(txn, tenant_id, event.into(), id).await
}

/// Marks the tenant's environment `offboarded` in the transaction `txn` that completes its
/// off-boarding order (its decommission retired it, or it had nothing to destroy: retired
/// here too, with `EnvironmentRetired`).
pub async fn offboard_in(
    txn: &impl ConnectionTrait,
    tenant_id: &str,
    environment_id: &str,
) -> Result<(), Error> {
    retire_in(txn, tenant_id, environment_id, None).await?;
    let row = one(txn, tenant_id, environment_id).await?;
    let mut active: rows::ActiveModel = row.into();
    active.state = Set(EnvironmentState::Offboarded.as_str().to_owned());
    active.updated_at = Set(Utc::now());
    active.update(txn).await?;
    Ok(())
}

/// The tenant's environment's life (its state, expiry and warning); none when it is not
/// registered.
pub async fn life(
    db: &impl ConnectionTrait,
    tenant_id: &str,
    environment_id: &str,
) -> Result<Option<runtime_cloud_models::lifetime::LifeRow>, Error> {
    let row = rows::Entity::find()
        .filter(rows::Column::TenantId.eq(tenant_id))
        .filter(rows::Column::EnvironmentId.eq(environment_id))
        .one(db)
        .await?;
    let Some(row) = row else { return Ok(None) };
    let warned_for = row.warned_for;
    let env = Environment::read(row)?;
    Ok(Some(runtime_cloud_models::lifetime::LifeRow {
        state: env.state,
        expires_at: env.expires_at,
        warned_for,
        created_at: env.created_at,
    }))
}

/// Every active ephemeral environment, of every tenant: the lifetimes a worker makes sure
/// are running as it starts.
pub async fn ephemeral(db: &impl ConnectionTrait) -> Result<Vec<EnvironmentKey>, Error> {
    Ok(rows::Entity::find()
        .filter(active())
        .filter(rows::Column::ExpiresAt.is_not_null())
        .order_by_asc(rows::Column::Id)
        .all(db)
        .await?
        .into_iter()
        .map(|r| EnvironmentKey {
            tenant_id: r.tenant_id,
            environment_id: r.environment_id,
        })
        .collect())
}

/// The tenant's environment's row; [`Error::Missing`] when there is none.
async fn one(
    db: &impl ConnectionTrait,
    tenant_id: &str,
    environment_id: &str,
) -> Result<rows::Model, Error> {
    rows::Entity::find()
        .filter(rows::Column::TenantId.eq(tenant_id))
        .filter(rows::Column::EnvironmentId.eq(environment_id))
        .one(db)
        .await?
        .ok_or_else(|| Error::Missing {
            what: "environment",
            id: environment_id.to_owned(),
        })
}

/// The longest time to live the tenant's ephemeral environments may be given, from now:
/// what a PlatformAdmin set, else [`DEFAULT_MAX_TTL`].
///
/// [`DEFAULT_MAX_TTL`]: runtime_cloud_models::lifetime::DEFAULT_MAX_TTL
pub async fn lifetime_limit(
    db: &impl ConnectionTrait,
    tenant_id: &str,
) -> Result<LifetimeLimit, Error> {
    use crate::entities::environment_lifetime_limits as limits;
    let set = limits::Entity::find_by_id(tenant_id).one(db).await?;
    Ok(match set {
        Some(row) => LifetimeLimit {
            max_ttl: chrono::Duration::seconds(row.max_ttl_seconds),
            set_by: Some(row.set_by),
            updated_at: Some(row.updated_at),
        },
        None => LifetimeLimit {
            max_ttl: runtime_cloud_models::lifetime::DEFAULT_MAX_TTL,
            set_by: None,
            updated_at: None,
        },
    })
}

/// A tenant's limit on its environments' lifetimes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LifetimeLimit {
    pub max_ttl: chrono::Duration,
    /// Who set it; none: the default.
    pub set_by: Option<String>,
    pub updated_at: Option<DateTime<Utc>>,
}

/// Sets the tenant's limit on its environments' lifetimes (a PlatformAdmin's).
pub async fn set_lifetime_limit(
    db: &impl ConnectionTrait,
    tenant_id: &str,
    max_ttl: chrono::Duration,
    set_by: &str,
) -> Result<LifetimeLimit, Error> {
    use crate::entities::environment_lifetime_limits as limits;
    use sea_orm::sea_query::OnConflict;
    let now = Utc::now();
    let row = limits::ActiveModel {
        tenant_id: Set(tenant_id.to_owned()),
        max_ttl_seconds: Set(max_ttl.num_seconds()),
        set_by: Set(set_by.to_owned()),
        updated_at: Set(now),
    };
    limits::Entity::insert(row)
        .on_conflict(
            OnConflict::column(limits::Column::TenantId)
                .update_columns([
                    limits::Column::MaxTtlSeconds,
                    limits::Column::SetBy,
                    limits::Column::UpdatedAt,
                ])
                .to_owned(),
        )
        .exec(db)
        .await?;
    Ok(LifetimeLimit {
        max_ttl,
        set_by: Some(set_by.to_owned()),
        updated_at: Some(now),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures;

    #[tokio::test]
    async fn environments_page_in_a_stable_order() {
        let db = fixtures::sqlite().await;
        for i in 0..5 {
            fixtures::environment(&db, &format!("env-{i}"), EnvironmentClass::NonProduction).await;
        }
        let first = page(&db, None, 2).await.unwrap();
        let second = page(&db, first.next.as_deref(), 2).await.unwrap();
        let third = page(&db, second.next.as_deref(), 2).await.unwrap();
        let names: Vec<_> = [&first, &second, &third]
            .iter()
            .flat_map(|p| p.environments.iter().map(|e| e.environment_id.clone()))
            .collect();
        assert_eq!(names, ["env-0", "env-1", "env-2", "env-3", "env-4"]);
        assert_eq!(third.next, None);
    }

    #[tokio::test]
    async fn a_second_registration_of_an_id_is_a_duplicate() {
        let db = fixtures::sqlite().await;
        fixtures::environment(&db, "dev", EnvironmentClass::NonProduction).await;
        let again = NewEnvironment {
            tenant_id: "acme".into(),
            environment_id: "dev".into(),
            project_id: "other".into(),
            class: EnvironmentClass::Production,
            target: Default::default(),
            mode: None,
            labels: Default::default(),
            customer_tenant_id: None,
            pool_id: None,
            expires_at: None,
        };
        let err = register(&db, again).await.unwrap_err();
        assert!(
            matches!(
                err,
                Error::Duplicate {
                    table: "environments"
                }
            ),
            "{err:?}"
        );
        let env = find(&db, "acme", "dev").await.unwrap().unwrap();
        assert_eq!(
            (env.project_id.as_str(), env.class),
            ("shop", EnvironmentClass::NonProduction)
        );
        assert_eq!(
            find(&db, "someone-else", "dev").await.unwrap(),
            None,
            "tenants are apart"
        );
    }

    async fn a_target_change_is_recorded_with_its_event_on(db: sea_orm::DatabaseConnection) {
        fixtures::environment(&db, "prod", EnvironmentClass::Production).await;
        let pulumi: Target = serde_json::from_value(serde_json::json!({ "runner": {
            "kind": "pulumi", "stack": "acme/shop/prod", "backendUrl": "s3://state" } }))
        .unwrap();
        let env = change_target(&db, "acme", "prod", pulumi.clone(), "ops-lead")
            .await
            .unwrap();
        assert_eq!(env.target, pulumi);
        assert_eq!(
            find(&db, "acme", "prod").await.unwrap().unwrap().target,
            pulumi
        );
        // The same target again records nothing.
        change_target(&db, "acme", "prod", pulumi.clone(), "ops-lead")
            .await
            .unwrap();
        let events = fixtures::events(&db, "EnvironmentTargetChanged").await;
        assert_eq!(events.len(), 1);
        assert_eq!(events[0].payload["before"]["runner"]["kind"], "sandbox");
        assert_eq!(
            events[0].payload["after"]["runner"]["stack"],
            "acme/shop/prod"
        );
        assert_eq!(events[0].payload["changedBy"], "ops-lead");
        let missing = change_target(&db, "acme", "nope", pulumi, "ops-lead").await;
        assert!(matches!(missing, Err(Error::Missing { .. })), "{missing:?}");
    }

    fixtures::on_both_databases!(
        a_target_change_is_recorded_with_its_event_sqlite,
        a_target_change_is_recorded_with_its_event_postgres,
        a_target_change_is_recorded_with_its_event_on
    );

    #[tokio::test]
    async fn an_unknown_target_in_a_row_is_an_error_not_a_default() {
        let db = fixtures::sqlite().await;
        fixtures::environment(&db, "dev", EnvironmentClass::NonProduction).await;
        let env = find(&db, "acme", "dev").await.unwrap().unwrap();
        assert_eq!(env.target, Target::default());
        for target in ["{\"runner\":{\"kind\":\"chef\"}}", "sandbox"] {
            fixtures::execute(&db, &format!("UPDATE environments SET target = '{target}'")).await;
            let read = find(&db, "acme", "dev").await;
            assert!(
                matches!(read, Err(Error::Corrupt { .. })),
                "{target}: {read:?}"
            );
        }
    }

    #[tokio::test]
    async fn an_unknown_class_in_a_row_is_an_error_not_a_default() {
        let db = fixtures::sqlite().await;
        fixtures::environment(&db, "dev", EnvironmentClass::NonProduction).await;
        fixtures::execute(&db, "UPDATE environments SET class = 'prod'").await;
        let err = find(&db, "acme", "dev").await.unwrap_err();
        assert!(
            matches!(
                err,
                Error::Corrupt {
                    table: "environments",
                    column: "class",
                    ..
                }
            ),
            "{err:?}"
        );
        assert!(list(&db, "acme", &fixtures::everything()).await.is_err());
    }
}
