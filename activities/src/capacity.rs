//! The capacity activities behind [`CapacityActivities`]'s contracts: a run's lease on its
//! project's quota, recorded in `capacity_leases`, and how many workers serve a pool.

use crate::error::{Error, activity_error, store_failed};
use runtime_cloud_models::capacity::PoolState;
use runtime_cloud_store::capacity;
use runtime_cloud_transactions::take_lease::{Leased, take_lease, take_turn};
use runtime_cloud_workflows::contracts::{
    LeaseAnswer, LeaseMove, LeaseRequest, LockRequest, PoolQuery, QuotaInForce, TurnAnswer,
    TurnRequest, capacity_markers as markers,
};
use sea_orm::DatabaseConnection;
use std::sync::Arc;
use temporalio_client::Client;
use temporalio_macros::activities;
use temporalio_sdk::activities::{ActivityContext, ActivityError};

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
        let leased = take_lease(&self.db, req.clone())
            .await
            .map_err(store_failed)?;
        self.leased(&req, leased).await
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
        let ask = crate::semaphores::ask(&req.lock);
        let (lock, leased) = take_turn(&self.db, ask, req.lease.clone())
            .await
            .map_err(store_failed)?;
        // Waiters promoted are told once the transaction committed, as a take alone does.
        let lock = self.semaphores.taken(&req.lock, lock).await?;
        let lease = match leased {
            Some(leased) => Some(self.leased(&req.lease, leased).await?),
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
            runtime_cloud_temporal::admission::admit_after_release(
                db,
                client,
                queue,
                &req.lease_id,
            )
            .await;
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
        let load = runtime_cloud_temporal::pool_load(&self.client, &req.task_queue)
            .await
            .map_err(|e| activity_error(Error::Temporal(e.to_string())))?;
        Ok(runtime_cloud_models::capacity::pool_hold(
            &req.pool_id,
            state,
            load.workers,
        ))
    }
}

impl CapacityActivitiesImpl {
    /// The answer to a lease taken, once its transaction committed: the waiters its capacity
    /// slot promoted told.
    async fn leased(
        &self,
        req: &LeaseRequest,
        leased: Leased,
    ) -> Result<LeaseAnswer, ActivityError> {
        let (quota, pool_id, slot) = match leased {
            Leased::Refused { reason } => return Ok(LeaseAnswer::Refused { reason }),
            Leased::Asked {
                quota,
                pool_id,
                slot,
            } => (quota, pool_id, slot),
        };
        let taken = match slot {
            Some(slot) => {
                let req = LockRequest {
                    tenant_id: req.tenant_id.clone(),
                    semaphore_id: req.semaphore_id.clone(),
                    requester_workflow_id: req.holder_workflow_id.clone(),
                    slots: quota.limits.concurrent_runs,
                    records_leases: true,
                    check_holders: false,
                };
                Some(self.semaphores.taken(&req, slot).await?)
            }
            None => None,
        };
        Ok(LeaseAnswer::Ask {
            quota: QuotaInForce {
                limits: quota.limits,
                source: quota.source,
            },
            pool_id,
            taken,
        })
    }
}
