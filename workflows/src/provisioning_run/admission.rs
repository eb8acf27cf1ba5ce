//! Admission: the run's turn on its environment (the lock), its capacity lease on its
//! project's quota (`waitingForCapacity` while the quota's `concurrentRuns` are all held), and
//! its environment's worker pool (`waitingForCapacity` while no worker serves it). A project
//! whose day's execution minutes are spent gets no lease: the run ends `Rejected` unplanned.

use super::{Ending, ProvisioningRun, now};
use crate::contracts::{
    CapacityActivities, LeaseAnswer, LeaseMove, LeaseRequest, PoolQuery, TurnRequest,
};
use crate::ids::{capacity_semaphore_id, environment_lock_id, pool_task_queue};
use crate::semaphore::{self, Turn, Unlock};
use runtime_cloud_models::capacity::{CapacityHold, CapacityWait, LeaseState};
use runtime_cloud_models::{ProvisioningState, RunInput};
use std::time::Duration;
use temporalio_sdk::{WorkflowContext, WorkflowResult};

/// Each attempt to ask for, move or read capacity.
const CAPACITY_TIMEOUT: Duration = Duration::from_secs(30);
/// A run whose pool has no worker looks again this often.
const POOL_RECHECK: Duration = Duration::from_secs(5);

/// How taking the turn ended.
pub(super) enum Admission {
    /// The run holds its environment and its capacity slot: the stages run.
    Admitted(Held),
    /// It ended before it could plan: cancelled while it waited, or refused a lease.
    Ended(Ending, Held),
}

/// The semaphores the run holds (or waits in), given back with its ending.
pub(super) struct Held {
    pub environment: Unlock,
    /// None before the run asked for its capacity slot.
    pub capacity: Option<Unlock>,
}

impl Held {
    fn environment(environment: Unlock) -> Self {
        Self {
            environment,
            capacity: None,
        }
    }
}

impl ProvisioningRun {
    /// Takes the run's turn: the environment's lock and, when it is free, the capacity lease,
    /// in one local activity (most runs find their environment free); then the lease's slot
    /// of the project's capacity, once a worker serves the environment's pool.
    pub(super) async fn take_turn(
        ctx: &mut WorkflowContext<Self>,
        input: &RunInput,
    ) -> WorkflowResult<Admission> {
        let lock_id = environment_lock_id(&input.tenant_id, &input.environment_id);
        let lock = semaphore::slot_request(ctx, &input.tenant_id, lock_id, 1, false);
        let turn = TurnRequest {
            lock: lock.clone(),
            lease: Self::lease_request(ctx, input),
        };
        let opts = crate::options::must_succeed_locally(CAPACITY_TIMEOUT);
        let answer = ctx
            .execute_local_activity(CapacityActivities::take_turn, turn, opts)
            .await?;
        let (environment, free) = Unlock::asked(lock, answer.lock);
        let turn = if free {
            semaphore::turn_taken(ctx)
        } else {
            semaphore::wait_for_turn(ctx, &environment).await?
        };
        match turn {
            Turn::Ours => Self::leased(ctx, input, answer.lease, environment).await,
            Turn::GaveUp => {
                Self::release_deferred_lease(ctx, input).await?;
                let ending = Self::cancelled(ctx);
                Ok(Admission::Ended(ending, Held::environment(environment)))
            }
        }
    }

    /// The run's request for its project's capacity lease.
    fn lease_request(ctx: &WorkflowContext<Self>, input: &RunInput) -> LeaseRequest {
        // A run the API deferred asks for the lease recorded with it; any other run's lease is
        // its attempt's (Temporal's run id, a UUIDv7 too). Not an id minted from the workflow's
        // clock: a workflow task lost after this local activity wrote the lease (a worker killed)
        // runs again at a later time, and a second lease would be written while the first
        // stayed `waiting` for good, counted against the project's quota.
        let capacity_id = capacity_semaphore_id(&input.tenant_id, &input.project_id);
        LeaseRequest {
            lease_id: input
                .lease_id
                .clone()
                .unwrap_or_else(|| ctx.run_id().to_owned()),
            tenant_id: input.tenant_id.clone(),
            project_id: input.project_id.clone(),
            environment_id: input.environment_id.clone(),
            run_id: input.run_id.clone(),
            attempt_id: ctx.run_id().to_owned(),
            holder_workflow_id: ctx.workflow_id().to_owned(),
            semaphore_id: capacity_id,
        }
    }

    /// Takes the project's capacity lease (already `asked` with the environment's lock when
    /// that was free), and its slot once a worker serves the environment's pool. A project
    /// whose day's minutes are spent ends the run `Rejected` before it plans.
    async fn leased(
        ctx: &mut WorkflowContext<Self>,
        input: &RunInput,
        asked: Option<LeaseAnswer>,
        environment: Unlock,
    ) -> WorkflowResult<Admission> {
        let request = Self::lease_request(ctx, input);
        let (lease_id, capacity_id) = (request.lease_id.clone(), request.semaphore_id.clone());
        let answer = match asked {
            Some(answer) => answer,
            None => {
                let opts = crate::options::must_succeed_locally(CAPACITY_TIMEOUT);
                ctx.execute_local_activity(CapacityActivities::request_lease, request, opts)
                    .await?
            }
        };
        let (quota, pool_id, taken) = match answer {
            LeaseAnswer::Refused { reason } => {
                Self::release_deferred_lease(ctx, input).await?;
                let ending = Ending::new(ProvisioningState::Rejected, reason);
                return Ok(Admission::Ended(ending, Held::environment(environment)));
            }
            LeaseAnswer::Ask {
                quota,
                pool_id,
                taken,
            } => (quota, pool_id, taken),
        };
        ctx.state_mut(|s| s.limits = Some(quota.limits.process_limits()));
        let wait = CapacityWait::quota_full(
            &input.project_id,
            quota.limits.concurrent_runs,
            quota.source,
            pool_id.clone(),
            now(ctx.workflow_time()),
        );
        let slots = quota.limits.concurrent_runs;
        // The request asked for the slot already when the environment has no pool; one with a
        // pool asks once a worker serves it.
        let (unlock, holds) = match taken {
            Some(answer) => {
                let asked =
                    semaphore::slot_request(ctx, &input.tenant_id, capacity_id, slots, true);
                Unlock::asked(asked, answer)
            }
            None => {
                if let Some(pool_id) = &pool_id
                    && !Self::pool_served(ctx, input, pool_id, &wait).await?
                {
                    Self::move_lease(ctx, &lease_id, LeaseState::Released).await?;
                    let ending = Self::cancelled(ctx);
                    return Ok(Admission::Ended(ending, Held::environment(environment)));
                }
                semaphore::ask(ctx, &input.tenant_id, capacity_id, slots, true).await?
            }
        };
        let turn = if holds {
            semaphore::turn_taken(ctx)
        } else {
            let held = CapacityWait {
                since: now(ctx.workflow_time()),
                ..wait
            };
            Self::wait_visibly(ctx, held).await?;
            semaphore::wait_for_turn(ctx, &unlock).await?
        };
        let held = Held {
            environment,
            capacity: Some(unlock),
        };
        match turn {
            // The lease was granted with the slot, in the same transaction.
            Turn::Ours => {
                // A deferred run's row shows the wait the API wrote.
                if input.lease_id.is_some()
                    || ctx.state(|s| s.status.waiting_for_capacity.is_some())
                {
                    ctx.state_mut(|s| s.status.waiting_for_capacity = None);
                    Self::project(ctx).await?;
                }
                Ok(Admission::Admitted(held))
            }
            Turn::GaveUp => Ok(Admission::Ended(Self::cancelled(ctx), held)),
        }
    }

    /// Waits until the environment's pool takes the run (true): it is `active` and a worker
    /// polls its task queue. Says what holds it meanwhile, looking again every
    /// [`POOL_RECHECK`]; false when the run is cancelled.
    async fn pool_served(
        ctx: &mut WorkflowContext<Self>,
        input: &RunInput,
        pool_id: &str,
        wait: &CapacityWait,
    ) -> WorkflowResult<bool> {
        let task_queue = pool_task_queue(ctx.task_queue(), pool_id);
        ctx.state_mut(|s| s.pool_queue = Some(task_queue.clone()));
        loop {
            if ctx.state(|s| s.cancel.is_some()) {
                return Ok(false);
            }
            let opts = crate::options::must_succeed_locally(CAPACITY_TIMEOUT);
            let query = PoolQuery {
                tenant_id: input.tenant_id.clone(),
                pool_id: pool_id.to_owned(),
                task_queue: task_queue.clone(),
            };
            let Some(reason) = ctx
                .execute_local_activity(CapacityActivities::pool_hold, query, opts)
                .await?
            else {
                return Ok(true);
            };
            let shown = ctx.state(|s| {
                s.status
                    .waiting_for_capacity
                    .as_ref()
                    .map(|w| w.reason.clone())
            });
            if shown.as_deref() != Some(reason.as_str()) {
                let held = CapacityWait {
                    held_by: CapacityHold::Pool,
                    reason,
                    since: now(ctx.workflow_time()),
                    ..wait.clone()
                };
                Self::wait_visibly(ctx, held).await?;
            }
            temporalio_sdk::workflows::select! {
                r = ctx.wait_condition(|s| s.cancel.is_some()) => { r?; }
                _ = ctx.timer(POOL_RECHECK) => {}
            };
        }
    }

    /// A run the API deferred came with a `waiting` lease; one that ends before it asks for it
    /// (cancelled while it waited for its environment, refused for spent minutes) releases it.
    async fn release_deferred_lease(
        ctx: &mut WorkflowContext<Self>,
        input: &RunInput,
    ) -> WorkflowResult<()> {
        match &input.lease_id {
            Some(lease_id) => Self::move_lease(ctx, lease_id, LeaseState::Released).await,
            None => Ok(()),
        }
    }

    /// Records the run's lease as `to` (granted or released), at the workflow's time.
    async fn move_lease(
        ctx: &mut WorkflowContext<Self>,
        lease_id: &str,
        to: LeaseState,
    ) -> WorkflowResult<()> {
        let change = LeaseMove {
            lease_id: lease_id.to_owned(),
            to,
            at: now(ctx.workflow_time()),
        };
        let opts = crate::options::must_succeed_locally(CAPACITY_TIMEOUT);
        ctx.execute_local_activity(CapacityActivities::move_lease, change, opts)
            .await?;
        Ok(())
    }
}
