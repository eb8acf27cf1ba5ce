//! Taking a lease: a run's lease on its project's quota, recorded `waiting` in
//! `capacity_leases`, and, for an environment without a worker pool, the slot of the project's
//! capacity semaphore it stands for, in one transaction ([`take_lease`]); with the
//! environment's lock first when the run takes its turn ([`take_turn`]). A run whose project
//! spent the day's apply minutes is refused and records nothing.
//!
//! The waiters a take promotes are not told here: the caller signals them once the transaction
//! committed (`activities::semaphores`).

use chrono::Utc;
use runtime_cloud_models::capacity::{LeaseRequest, QuotaLimits};
use runtime_cloud_store::capacity::{self, NewLease, Quota};
use runtime_cloud_store::semaphores::{self, Ask, Taken};
use runtime_cloud_store::{DatabaseConnection, Error, begin_write, environments};
use sea_orm::DatabaseTransaction;

/// The pool a lease of an environment without one is counted in.
pub const DEFAULT_POOL: &str = "default";

/// What a take answers.
#[derive(Debug, Clone, PartialEq)]
pub enum Leased {
    /// The day's apply minutes are spent: nothing recorded.
    Refused { reason: String },
    /// The lease is recorded; the run asks for its slot.
    Asked {
        /// The quota in force.
        quota: Box<Quota>,
        /// The environment's worker pool; none for the default task queue.
        pool_id: Option<String>,
        /// The capacity semaphore's answer, asked with the quota's `concurrentRuns` slots;
        /// none when the environment has a pool (the run asks once a worker serves it).
        slot: Option<Taken>,
    },
}

/// Records the lease `asked` and, without a pool, takes its capacity slot, in one transaction.
/// Retried, every step keeps what it did: the lease is recorded once, and asking again for a
/// slot held answers it held.
pub async fn take_lease(db: &DatabaseConnection, asked: LeaseRequest) -> Result<Leased, Error> {
    let txn = begin_write(db).await?;
    let leased = take_lease_in(&txn, asked).await?;
    txn.commit().await?;
    Ok(leased)
}

/// Takes the environment's `lock` and, when it holds it, [`take_lease`]s `asked`: one
/// transaction for both (and the capacity slot with the lease).
pub async fn take_turn(
    db: &DatabaseConnection,
    lock: Ask<'_>,
    asked: LeaseRequest,
) -> Result<(Taken, Option<Leased>), Error> {
    let txn = begin_write(db).await?;
    let lock = semaphores::take_in(&txn, lock).await?;
    let leased = if lock.holds {
        Some(take_lease_in(&txn, asked).await?)
    } else {
        None
    };
    txn.commit().await?;
    Ok((lock, leased))
}

async fn take_lease_in(txn: &DatabaseTransaction, asked: LeaseRequest) -> Result<Leased, Error> {
    let now = Utc::now();
    let (tenant_id, project_id) = (&asked.tenant_id, &asked.project_id);
    let (quota, spent) = capacity::minutes_spent(txn, tenant_id, project_id, now).await?;
    if let Some(spent) = spent {
        let reason = spent.to_string();
        return Ok(Leased::Refused { reason });
    }
    let pool_id = environments::find(txn, tenant_id, &asked.environment_id)
        .await?
        .and_then(|env| env.pool_id);
    let lease = run_lease(
        asked.lease_id,
        &asked.run_id,
        asked.attempt_id,
        asked.holder_workflow_id.clone(),
        (asked.tenant_id.clone(), asked.project_id.clone()),
        pool_id.clone(),
        &quota.limits,
    );
    capacity::request_lease(txn, lease, now).await?;
    // An environment with a pool asks for its slot once a worker serves the pool.
    let slot = match pool_id {
        None => {
            let ask = Ask {
                semaphore_id: &asked.semaphore_id,
                tenant_id: &asked.tenant_id,
                holder_id: &asked.holder_workflow_id,
                slots: quota.limits.concurrent_runs,
                leases: true,
            };
            Some(semaphores::take_in(txn, ask).await?)
        }
        Some(_) => None,
    };
    Ok(Leased::Asked {
        quota: Box::new(quota),
        pool_id,
        slot,
    })
}

/// The lease `lease_id` of run `run_id` (its workflow `holder_id`, execution `attempt_id`;
/// empty for a run the API deferred, until it asks) in the environment's pool, with the
/// quota's per-attempt CPU and memory.
pub fn run_lease(
    lease_id: String,
    run_id: &str,
    attempt_id: String,
    holder_id: String,
    (tenant_id, project_id): (String, String),
    pool_id: Option<String>,
    limits: &QuotaLimits,
) -> NewLease {
    NewLease {
        lease_id,
        tenant_id,
        project_id,
        run_id: run_id.to_owned(),
        attempt_id,
        holder_kind: "provisioning-run".into(),
        holder_id,
        pool_id: pool_id.unwrap_or_else(|| DEFAULT_POOL.into()),
        cpu: limits.cpu_per_attempt,
        memory_gb: limits.memory_gb_per_attempt,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use runtime_cloud_models::EnvironmentClass;
    use runtime_cloud_store::environments::Environment;
    use runtime_cloud_store::fixtures;

    fn wanted(env: &Environment, run: &str) -> LeaseRequest {
        LeaseRequest {
            lease_id: format!("lease-{run}"),
            tenant_id: env.tenant_id.clone(),
            project_id: env.project_id.clone(),
            environment_id: env.environment_id.clone(),
            run_id: run.into(),
            attempt_id: "attempt".into(),
            holder_workflow_id: format!("run/{run}"),
            semaphore_id: format!("capacity/{}/{}", env.tenant_id, env.project_id),
        }
    }

    /// Without a pool the lease takes its capacity slot with it; retried, it is recorded once
    /// and still holds; a second run's lease is recorded and waits when the quota is full.
    #[tokio::test]
    async fn a_lease_takes_its_slot_once_however_often_retried() {
        let db = fixtures::sqlite().await;
        let env = fixtures::environment(&db, "dev", EnvironmentClass::NonProduction).await;
        let holds = |leased: Leased| match leased {
            Leased::Asked {
                pool_id: None,
                slot: Some(slot),
                quota,
            } => (slot.holds, quota.limits.concurrent_runs),
            other => panic!("a lease without a pool asks for its slot: {other:?}"),
        };
        let first = take_lease(&db, wanted(&env, "r1")).await.unwrap();
        let (held, slots) = holds(first);
        assert!(held);
        let again = take_lease(&db, wanted(&env, "r1")).await.unwrap();
        assert_eq!(holds(again), (true, slots));
        let (tenant, project) = (&env.tenant_id, &env.project_id);
        assert_eq!(
            capacity::held_leases(&db, tenant, project).await.unwrap(),
            1
        );
        for n in 2..=slots {
            take_lease(&db, wanted(&env, &format!("r{n}")))
                .await
                .unwrap();
        }
        let over = take_lease(&db, wanted(&env, "over")).await.unwrap();
        assert_eq!(holds(over), (false, slots), "the quota's slots are taken");
        let leases = capacity::held_leases(&db, tenant, project).await.unwrap();
        assert_eq!(
            leases,
            u64::from(slots) + 1,
            "the waiting lease is recorded"
        );
    }
}
