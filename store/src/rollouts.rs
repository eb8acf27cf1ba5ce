//! `fleet_rollouts`: fleet rollouts, created with their waves by the API and projected by
//! their workflow (`fleet-rollout/{rolloutId}`), each transition with its event.

use crate::decode::{At, to_json};
use crate::entities::fleet_rollouts as rows;
use crate::page::Page;
use crate::{Error, outbox};
use chrono::{DateTime, Utc};
use runtime_cloud_models::events::RolloutEvent;
use runtime_cloud_models::rollouts::{RolloutInput, RolloutState, RolloutStatus};
use sea_orm::sea_query::Expr;
use sea_orm::{
    ActiveModelTrait, ActiveValue::Set, ColumnTrait, ConnectionTrait, EntityTrait, PaginatorTrait,
    QueryFilter, QuerySelect,
};

/// A rollout as the API shows it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Rollout {
    pub rollout_id: String,
    pub tenant_id: String,
    pub state: RolloutState,
    #[schema(value_type = Object)]
    pub input: serde_json::Value,
    pub status: RolloutStatus,
    pub requested_by: String,
    pub created_at: chrono::DateTime<Utc>,
    pub updated_at: chrono::DateTime<Utc>,
}

fn read(m: rows::Model) -> Result<Rollout, Error> {
    let at = At {
        table: "fleet_rollouts",
        row: &m.rollout_id,
    };
    Ok(Rollout {
        state: at.wire("state", &m.state)?,
        status: at.json("status", &m.status)?,
        input: m.input,
        rollout_id: m.rollout_id,
        tenant_id: m.tenant_id,
        requested_by: m.requested_by,
        created_at: m.created_at,
        updated_at: m.updated_at,
    })
}

/// Records a rollout about to start, with `RolloutStarted`.
pub async fn create(
    db: &sea_orm::DatabaseConnection,
    input: &RolloutInput,
    requested_by: &str,
) -> Result<Rollout, Error> {
    let txn = crate::begin_write(db).await?;
    let now = Utc::now();
    let status = RolloutStatus::start(&input.waves);
    let row = rows::ActiveModel {
        rollout_id: Set(input.rollout_id.clone()),
        tenant_id: Set(input.tenant_id.clone()),
        state: Set(RolloutState::Running.as_str().to_owned()),
        input: Set(to_json(input)?),
        status: Set(to_json(&status)?),
        requested_by: Set(requested_by.to_owned()),
        created_at: Set(now),
        updated_at: Set(now),
        checked_at: Set(None),
    }
    .insert(&txn)
    .await?;
    let event = RolloutEvent {
        rollout_id: input.rollout_id.clone(),
        tenant_id: input.tenant_id.clone(),
        state: RolloutState::Running,
        wave: None,
        reason: None,
        instances: status
            .instances
            .iter()
            .map(|i| i.environment_id.clone())
            .collect(),
    };
    let id = outbox::event_id(&input.rollout_id, "RolloutStarted");
    outbox::append(
        &txn,
        &input.tenant_id,
        event.into_outbox("RolloutStarted"),
        id,
    )
    .await?;
    txn.commit().await?;
    read(row)
}

/// Removes a rollout whose workflow could not be started (nothing half-written).
pub async fn delete(db: &impl ConnectionTrait, rollout_id: &str) -> Result<(), Error> {
    rows::Entity::delete_by_id(rollout_id.to_owned())
        .exec(db)
        .await?;
    Ok(())
}

/// Writes the workflow's status, with the event of what changed: a wave completed, a halt, the
/// end. A retried projection of the same status writes no event twice (the event ids are
/// deterministic).
pub async fn project(
    db: &sea_orm::DatabaseConnection,
    rollout_id: &str,
    status: &RolloutStatus,
) -> Result<(), Error> {
    let txn = crate::begin_write(db).await?;
    let Some(row) = rows::Entity::find_by_id(rollout_id.to_owned())
        .one(&txn)
        .await?
    else {
        return Err(Error::Missing {
            what: "rollout",
            id: rollout_id.to_owned(),
        });
    };
    let before: RolloutStatus = At {
        table: "fleet_rollouts",
        row: rollout_id,
    }
    .json("status", &row.status)?;
    let tenant = row.tenant_id.clone();
    let mut active: rows::ActiveModel = row.into();
    active.state = Set(status.state.as_str().to_owned());
    active.status = Set(to_json(status)?);
    active.updated_at = Set(Utc::now());
    active.update(&txn).await?;
    let event =
        |wave: Option<usize>, reason: Option<String>, instances: Vec<String>| RolloutEvent {
            rollout_id: rollout_id.to_owned(),
            tenant_id: tenant.clone(),
            state: status.state,
            wave,
            reason,
            instances,
        };
    let mut events = Vec::new();
    for wave in before.waves_completed..status.waves_completed {
        let key = format!("{rollout_id}/wave/{wave}");
        events.push((event(Some(wave), None, Vec::new()), "WaveCompleted", key));
    }
    if status.state != before.state || status.halt != before.halt {
        match (status.state, &status.halt) {
            (RolloutState::Halted, Some(h)) => {
                let key = format!("{rollout_id}/halt/{}", h.at.timestamp_micros());
                let e = event(Some(h.wave), Some(h.reason.clone()), h.instances.clone());
                events.push((e, "RolloutHalted", key));
            }
            (RolloutState::Completed, _) => {
                events.push((
                    event(None, None, Vec::new()),
                    "RolloutCompleted",
                    rollout_id.to_owned(),
                ));
            }
            (RolloutState::Aborted, _) => {
                events.push((
                    event(None, None, Vec::new()),
                    "RolloutAborted",
                    rollout_id.to_owned(),
                ));
            }
            (RolloutState::RolledBack, _) => {
                let e = event(None, None, Vec::new());
                events.push((e, "RolloutRolledBack", rollout_id.to_owned()));
            }
            _ => {}
        }
    }
    for (e, ty, key) in events {
        let id = outbox::event_id(&key, ty);
        outbox::append(&txn, &tenant, e.into_outbox(ty), id).await?;
    }
    txn.commit().await?;
    Ok(())
}

/// The tenant's rollout.
pub async fn find(
    db: &impl ConnectionTrait,
    tenant_id: &str,
    rollout_id: &str,
) -> Result<Option<Rollout>, Error> {
    rows::Entity::find_by_id(rollout_id.to_owned())
        .filter(rows::Column::TenantId.eq(tenant_id))
        .one(db)
        .await?
        .map(read)
        .transpose()
}

/// What rollout `rollout_id` moves (the workflow's input, as recorded when it started).
pub async fn input(db: &impl ConnectionTrait, rollout_id: &str) -> Result<RolloutInput, Error> {
    let row = rows::Entity::find_by_id(rollout_id.to_owned())
        .one(db)
        .await?
        .ok_or_else(|| Error::Missing {
            what: "rollout",
            id: rollout_id.to_owned(),
        })?;
    At {
        table: "fleet_rollouts",
        row: &row.rollout_id,
    }
    .json("input", &row.input)
}

/// The tenant's rollouts, newest first, a page at a time.
pub async fn list(
    db: &impl ConnectionTrait,
    tenant_id: &str,
    page: &Page,
) -> Result<Vec<Rollout>, Error> {
    page.apply(
        rows::Entity::find().filter(rows::Column::TenantId.eq(tenant_id)),
        rows::Column::RolloutId,
    )
    .all(db)
    .await?
    .into_iter()
    .map(read)
    .collect()
}

/// The tenant's rollouts still under way (running or halted).
pub async fn count_active(db: &impl ConnectionTrait, tenant_id: &str) -> Result<u64, Error> {
    Ok(rows::Entity::find()
        .filter(rows::Column::TenantId.eq(tenant_id))
        .filter(rows::Column::State.is_in([
            RolloutState::Running.as_str(),
            RolloutState::Halted.as_str(),
            RolloutState::RollingBack.as_str(),
        ]))
        .count(db)
        .await?)
}

/// Declares the instance's next specification — its current one with the rollout's versions
/// (workloads it does not run are left out) and release id — and records its `promotion` run
/// `run_id` (the rollout is its promotion), in one transaction; the run's workflow is the
/// caller's to start. A retry (the run recorded already) returns the same run's input.
pub async fn prepare_instance(
    db: &sea_orm::DatabaseConnection,
    input: &RolloutInput,
    environment_id: &str,
    run_id: &str,
    options: &runtime_cloud_models::options::ProvisioningOptions,
) -> Result<runtime_cloud_models::RunInput, Error> {
    use crate::{environments, runs, specifications};
    let txn = crate::begin_write(db).await?;
    let tenant_id = &input.tenant_id;
    let env = environments::find(&txn, tenant_id, environment_id)
        .await?
        .ok_or_else(|| Error::Missing {
            what: "environment",
            id: environment_id.to_owned(),
        })?;
    let prepared = runs::specification_id(&txn, run_id).await?;
    let spec = match &prepared {
        Some(spec_id) => specifications::find(&txn, spec_id).await?,
        None => match specifications::latest(&txn, tenant_id, environment_id).await? {
            None => None,
            Some(current) => {
                let mut next = current.declaration;
                for w in &mut next.workloads {
                    if let Some(version) = input.versions.get(&w.name) {
                        w.version = version.clone();
                    }
                }
                if input.release_id.is_some() {
                    next.release_id = input.release_id.clone();
                }
                Some(specifications::declare_in(&txn, &next).await?)
            }
        },
    };
    let spec = spec.ok_or_else(|| Error::Missing {
        what: "specification of environment",
        id: environment_id.to_owned(),
    })?;
    let run = record_run(
        &txn,
        input,
        &env,
        &spec,
        run_id,
        prepared.is_none(),
        options,
    )
    .await?;
    txn.commit().await?;
    Ok(run)
}

/// The rollout's promotion run `run_id` of `spec` on `env` (inserted when `new`).
async fn record_run(
    txn: &impl ConnectionTrait,
    input: &RolloutInput,
    env: &crate::environments::Environment,
    spec: &crate::specifications::Specification,
    run_id: &str,
    new: bool,
    options: &runtime_cloud_models::options::ProvisioningOptions,
) -> Result<runtime_cloud_models::RunInput, Error> {
    let run = crate::runs::NewRun {
        run_id,
        environment: env,
        specification: spec,
        kind: runtime_cloud_models::ProvisioningKind::Promotion,
        promotion_id: Some(input.rollout_id.clone()),
        approval_id: None,
        idempotency_key: None,
        request_hash: None,
        quarantine_override: None,
    };
    if new {
        crate::runs::insert(txn, &run, None).await?;
    }
    Ok(run.input(options))
}

/// The workloads each instance the rollout started declared before its run: the
/// specification before the one its promotion run applied (none for an instance whose run
/// had no earlier version).
pub async fn workloads_before(
    db: &impl ConnectionTrait,
    tenant_id: &str,
    rollout_id: &str,
) -> Result<Vec<Vec<runtime_cloud_models::Workload>>, Error> {
    use crate::{runs, specifications};
    let Some(rollout) = find(db, tenant_id, rollout_id).await? else {
        return Ok(Vec::new());
    };
    let mut before = Vec::new();
    for instance in &rollout.status.instances {
        let Some(run) = &instance.provisioning_run_id else {
            continue;
        };
        let Some(spec_id) = runs::specification_id(db, run).await? else {
            continue;
        };
        let Some(rolled) = specifications::find(db, &spec_id).await? else {
            continue;
        };
        let env = &instance.environment_id;
        let previous =
            specifications::version(db, tenant_id, env, Some(rolled.version - 1)).await?;
        if let Some(previous) = previous {
            before.push(previous.declaration.workloads);
        }
    }
    Ok(before)
}

/// Declares again the specification an instance ran before the rollout's run `rolled_out`
/// (the version before that run's), and records the promotion run `run_id` back to it, in one
/// transaction. A retry returns the same run's input.
pub async fn prepare_rollback(
    db: &sea_orm::DatabaseConnection,
    input: &RolloutInput,
    environment_id: &str,
    rolled_out: &str,
    run_id: &str,
    options: &runtime_cloud_models::options::ProvisioningOptions,
) -> Result<runtime_cloud_models::RunInput, Error> {
    use crate::{environments, runs, specifications};
    let txn = crate::begin_write(db).await?;
    let tenant_id = &input.tenant_id;
    let missing = |what: &'static str, id: &str| Error::Missing {
        what,
        id: id.to_owned(),
    };
    let env = environments::find(&txn, tenant_id, environment_id)
        .await?
        .ok_or_else(|| missing("environment", environment_id))?;
    let prepared = runs::specification_id(&txn, run_id).await?;
    let spec = match &prepared {
        Some(spec_id) => specifications::find(&txn, spec_id)
            .await?
            .ok_or_else(|| missing("specification", spec_id))?,
        None => {
            let rolled_spec = runs::specification_id(&txn, rolled_out)
                .await?
                .ok_or_else(|| missing("provisioning run", rolled_out))?;
            let rolled = specifications::find(&txn, &rolled_spec)
                .await?
                .ok_or_else(|| missing("specification", &rolled_spec))?;
            let before = Some(rolled.version - 1);
            let previous = specifications::version(&txn, tenant_id, environment_id, before)
                .await?
                .ok_or_else(|| missing("specification before the rollout of", environment_id))?;
            specifications::declare_in(&txn, &previous.declaration).await?
        }
    };
    let run = record_run(
        &txn,
        input,
        &env,
        &spec,
        run_id,
        prepared.is_none(),
        options,
    )
    .await?;
    txn.commit().await?;
    Ok(run)
}

/// Where each `(environment, run)` of a wave stands: the run's state and when it applied, and
/// what the environment's last observation shows.
pub async fn progress(
    db: &impl ConnectionTrait,
    rollout_id: &str,
    tenant_id: &str,
    instances: &[(String, String)],
) -> Result<Vec<runtime_cloud_models::rollouts::InstanceProgress>, Error> {
    use runtime_cloud_models::rollouts::{InstanceProgress, ObservedVersion};
    let checked_at = Utc::now();
    let mut out = Vec::new();
    for (environment_id, run_id) in instances {
        let run = crate::runs::find(db, tenant_id, run_id).await?;
        let inventory = crate::inventory::find(db, tenant_id, environment_id).await?;
        out.push(InstanceProgress {
            environment_id: environment_id.clone(),
            run_state: run.as_ref().and_then(|r| r.state),
            applied_at: run.as_ref().and_then(|r| r.completed_at),
            observed_at: inventory.as_ref().and_then(|i| i.observed_at),
            observed: inventory
                .map(|i| i.workloads)
                .unwrap_or_default()
                .into_iter()
                .map(|w| {
                    let seen = ObservedVersion {
                        ready: w.replicas_ready >= w.replicas_desired,
                        healthy: w.health == "healthy",
                        version: w.version,
                    };
                    (w.name, seen)
                })
                .collect(),
        });
    }
    rows::Entity::update_many()
        .col_expr(rows::Column::CheckedAt, Expr::value(checked_at))
        .filter(rows::Column::RolloutId.eq(rollout_id))
        .exec(db)
        .await?;
    Ok(out)
}

/// When the rollout that has waited longest to look at its instances last did (or started,
/// if it has not yet), among those that follow their instances (`Running`, `RollingBack`); a
/// change since is not yet seen by it. None when no rollout is under way.
pub async fn oldest_check(db: &impl ConnectionTrait) -> Result<Option<DateTime<Utc>>, Error> {
    let under_way = rows::Entity::find()
        .select_only()
        .column(rows::Column::CheckedAt)
        .column(rows::Column::CreatedAt)
        .filter(rows::Column::State.is_in([
            RolloutState::Running.as_str(),
            RolloutState::RollingBack.as_str(),
        ]))
        .into_tuple::<(Option<DateTime<Utc>>, DateTime<Utc>)>()
        .all(db)
        .await?;
    Ok(under_way
        .into_iter()
        .map(|(checked, created)| checked.unwrap_or(created))
        .min())
}

/// (tenant, state, instances) of every rollout (the metrics' rollout gauges).
pub async fn states(db: &impl ConnectionTrait) -> Result<Vec<(String, RolloutState, u64)>, Error> {
    rows::Entity::find()
        .all(db)
        .await?
        .into_iter()
        .map(|m| {
            let r = read(m)?;
            Ok((r.tenant_id, r.state, r.status.instances.len() as u64))
        })
        .collect()
}
