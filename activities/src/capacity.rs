//! The capacity activities behind [`CapacityActivities`]'s contracts: a run's lease on its
//! project's quota, recorded in `capacity_leases`, and how many workers serve a pool.

use crate::error::{Error, activity_error, store_failed};
use chrono::Utc;
use runtime_cloud_models::capacity::PoolState;
use runtime_cloud_store::capacity::{self, NewLease};
use runtime_cloud_store::{begin_write, environments, semaphores};
use runtime_cloud_workflows::contracts::{
    LeaseAnswer, LeaseMove, LeaseRequest, LockRequest, PoolQuery, QuotaInForce, TurnAnswer,
    TurnRequest, capacity_markers as markers,
};
use sea_orm::{DatabaseConnection, DatabaseTransaction};
use std::sync::Arc;
use std::time::Duration;
use temporalio_client::{Client, NamespacedClient};
use temporalio_common::protos::temporal::api::enums::v1::TaskQueueType;
use temporalio_common::protos::temporal::api::taskqueue::v1::TaskQueue;
use temporalio_common::protos::temporal::api::workflowservice::v1::DescribeTaskQueueRequest;
use temporalio_macros::activities;
use temporalio_sdk::activities::{ActivityContext, ActivityError};

/// The pool a lease of an environment without one is counted in.
pub const DEFAULT_POOL: &str = "default";

/// A poller not seen for this long is gone: a live worker polls again at least every minute
/// (a long poll lasts about 60 s).
const POLLER_SEEN_WITHIN: Duration = Duration::from_secs(90);

/// Dependencies of the capacity activities.
pub struct CapacityActivitiesImpl {
    /// The read DB: quotas, leases, the day's apply minutes.
    pub db: DatabaseConnection,
    /// Reads pools' task queues; starts deferred runs.
    pub client: Client,
    /// The task queue runs are started on (deferred runs, once admitted).
    pub task_queue: String,
    /// The projects' capacity semaphores, asked in the lease's request.
    pub semaphores: crate::semaphores::Semaphores,
}

/// How many workers poll `task_queue` for activities now, and how many activity tasks wait
/// for one: what Temporal knows of a pool.
pub async fn pool_load(client: &Client, task_queue: &str) -> Result<PoolLoad, Error> {
    let request = DescribeTaskQueueRequest {
        namespace: client.namespace(),
        task_queue: Some(TaskQueue {
            name: task_queue.to_owned(),
            ..Default::default()
        }),
        task_queue_type: TaskQueueType::Activity as i32,
        report_stats: true,
        ..Default::default()
    };
    let answer = client
        .connection()
        .workflow_service()
        .describe_task_queue(tonic::Request::new(request))
        .await
        .map_err(|e| Error::Temporal(format!("describe task queue {task_queue}: {e}")))?
        .into_inner();
    let seen_since = Utc::now().timestamp() - POLLER_SEEN_WITHIN.as_secs() as i64;
    let mut identities: Vec<&str> = answer
        .pollers
        .iter()
        .filter(|p| {
            p.last_access_time
                .as_ref()
                .is_some_and(|t| t.seconds >= seen_since)
        })
        .map(|p| p.identity.as_str())
        .collect();
    identities.sort_unstable();
    identities.dedup();
    let backlog = answer.stats.map_or(0, |s| {
        u64::try_from(s.approximate_backlog_count).unwrap_or(0)
    });
    Ok(PoolLoad {
        workers: u32::try_from(identities.len()).unwrap_or(u32::MAX),
        backlog,
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
    limits: &runtime_cloud_models::capacity::QuotaLimits,
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

/// What Temporal says about a pool's task queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PoolLoad {
    /// Workers that polled it within the last 90 s.
    pub workers: u32,
    /// Activity tasks waiting for a worker.
    pub backlog: u64,
}

#[activities]
impl CapacityActivitiesImpl {
    /// Reads the project's quota and the environment's pool, refuses when the day's apply
    /// minutes are spent, and records the lease `waiting` (once, however often retried). An
    /// environment without a pool asks for a slot of the project's capacity at once, in the
    /// same transaction: one local activity, not three, for most runs (the lease is granted
    /// with the slot).
    #[activity(definition = markers::RequestLease)]
    pub async fn request_lease(
        self: Arc<Self>,
        _ctx: ActivityContext,
        req: LeaseRequest,
    ) -> Result<LeaseAnswer, ActivityError> {
        let txn = begin_write(&self.db).await.map_err(store_failed)?;
        let lease = self.lease_in(&txn, req).await?;
        txn.commit().await.map_err(|e| store_failed(e.into()))?;
        self.leased(lease).await
    }

    /// Takes the environment's lock and, when it was free, asks for the lease: one write
    /// transaction for both (and the capacity slot with the lease). Retried, every step keeps
    /// what it did: asking again for a slot held answers it held, and the lease is recorded
    /// once.
    #[activity(definition = markers::TakeTurn)]
    pub async fn take_turn(
        self: Arc<Self>,
        _ctx: ActivityContext,
        req: TurnRequest,
    ) -> Result<TurnAnswer, ActivityError> {
        let txn = begin_write(&self.db).await.map_err(store_failed)?;
        let lock = semaphores::take_in(&txn, crate::semaphores::ask(&req.lock))
            .await
            .map_err(store_failed)?;
        let lease = if lock.holds {
            Some(self.lease_in(&txn, req.lease).await?)
        } else {
            None
        };
        txn.commit().await.map_err(|e| store_failed(e.into()))?;
        // Waiters promoted are told once the transaction committed, as a take alone does.
        let lock = self.semaphores.taken(&req.lock, lock).await?;
        let lease = match lease {
            Some(lease) => Some(self.leased(lease).await?),
            None => None,
        };
        Ok(TurnAnswer { lock, lease })
    }

    /// Records the lease granted or released: a lease moved without its semaphore (released
    /// by a run that ends before it asks for a slot).
    #[activity(definition = markers::MoveLease)]
    pub async fn move_lease(
        self: Arc<Self>,
        _ctx: ActivityContext,
        req: LeaseMove,
    ) -> Result<(), ActivityError> {
        capacity::move_lease(&self.db, &req.lease_id, req.to, req.at)
            .await
            .map_err(store_failed)?;
        if req.to == runtime_cloud_models::capacity::LeaseState::Released {
            let (db, client, queue) = (&self.db, &self.client, &self.task_queue);
            crate::admission::admit_after_release(db, client, queue, &req.lease_id).await;
        }
        Ok(())
    }

    /// Why a run cannot go to its pool yet (not active, or no worker polls its queue).
    #[activity(definition = markers::PoolHold)]
    pub async fn pool_hold(
        self: Arc<Self>,
        _ctx: ActivityContext,
        req: PoolQuery,
    ) -> Result<Option<String>, ActivityError> {
        let pool = capacity::find_pool(&self.db, &req.tenant_id, &req.pool_id)
            .await
            .map_err(store_failed)?;
        // A pool removed from under its environment holds the run like a disabled one.
        let state = pool.map_or(PoolState::Disabled, |p| p.state);
        let load = pool_load(&self.client, &req.task_queue)
            .await
            .map_err(activity_error)?;
        Ok(runtime_cloud_models::capacity::pool_hold(
            &req.pool_id,
            state,
            load.workers,
        ))
    }
}

/// A lease asked for in a transaction not yet committed: its answer, and the capacity slot
/// taken with it, whose promoted waiters are told once it is.
struct AskedLease {
    answer: LeaseAnswer,
    slot: Option<(LockRequest, semaphores::Taken)>,
}

impl CapacityActivitiesImpl {
    /// [`CapacityActivitiesImpl::request_lease`]'s work, in the caller's write transaction.
    async fn lease_in(
        &self,
        txn: &DatabaseTransaction,
        req: LeaseRequest,
    ) -> Result<AskedLease, ActivityError> {
        let now = Utc::now();
        let (quota, spent) = capacity::minutes_spent(txn, &req.tenant_id, &req.project_id, now)
            .await
            .map_err(store_failed)?;
        if let Some(spent) = spent {
            let reason = spent.to_string();
            return Ok(AskedLease {
                answer: LeaseAnswer::Refused { reason },
                slot: None,
            });
        }
        let pool_id = environments::find(txn, &req.tenant_id, &req.environment_id)
            .await
            .map_err(store_failed)?
            .and_then(|env| env.pool_id);
        let slot = LockRequest {
            tenant_id: req.tenant_id.clone(),
            semaphore_id: req.semaphore_id,
            requester_workflow_id: req.holder_workflow_id.clone(),
            slots: quota.limits.concurrent_runs,
            records_leases: true,
            check_holders: false,
        };
        let lease = run_lease(
            req.lease_id,
            &req.run_id,
            req.attempt_id,
            req.holder_workflow_id,
            (req.tenant_id, req.project_id),
            pool_id.clone(),
            &quota.limits,
        );
        capacity::request_lease(txn, lease, now)
            .await
            .map_err(store_failed)?;
        // An environment with a pool asks for its slot once a worker serves the pool.
        let slot = match pool_id {
            None => {
                let taken = semaphores::take_in(txn, crate::semaphores::ask(&slot))
                    .await
                    .map_err(store_failed)?;
                Some((slot, taken))
            }
            Some(_) => None,
        };
        let answer = LeaseAnswer::Ask {
            quota: QuotaInForce {
                limits: quota.limits,
                source: quota.source,
            },
            pool_id,
            taken: None,
        };
        Ok(AskedLease { answer, slot })
    }

    /// The answer to a lease asked for, once its transaction committed: the slot's promoted
    /// waiters told.
    async fn leased(&self, lease: AskedLease) -> Result<LeaseAnswer, ActivityError> {
        let AskedLease { mut answer, slot } = lease;
        if let (LeaseAnswer::Ask { taken, .. }, Some((req, slot))) = (&mut answer, slot) {
            *taken = Some(self.semaphores.taken(&req, slot).await?);
        }
        Ok(answer)
    }
}
