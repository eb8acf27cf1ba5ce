//! A durable counting semaphore, held in the database (`store::semaphores`): at most `slots`
//! workflows hold it at a time, the rest wait their turn in arrival order. Two kinds:
//!
//! - `environment/{tenant}/{env}`, one slot: the environment's lock (one applying run at a
//!   time);
//! - `capacity/{tenant}/{project}`, the quota's `concurrentRuns` slots: the project's capacity
//!   leases (spec 003).
//!
//! Callers take it with [`ask`] (then [`wait_for_turn`] when it is not free) and give it back
//! with the [`Unlock`] they got, like `unlock := mutex.Lock(…)` in Temporal's mutex sample (a
//! provisioning run asks for its environment's lock with its capacity lease, in
//! `capacity.take-turn`, and gives both back in the local activity that records its ending,
//! `provisioning.finish`). Taking and giving back are local activities, one write transaction
//! each, in the caller's workflow task: a slot free costs no workflow task and no signal at
//! all. A caller that waits is signalled `granted` (with the semaphore's id, so a workflow that
//! holds two knows which one answered) by the release that hands it the slot. A grant lost with
//! a killed worker is sent again by the semaphore's next take or release, and a waiter asks
//! again every `LockHolderCheckMinutes` besides, then also checks that the workflows of the
//! holders and of the waiters before it still run (one terminated by hand never releases; its
//! slot goes on, its capacity lease is recorded expired). A caller that gives up before its
//! turn releases too, which only drops it from the queue.
//!
//! Each semaphore was a workflow of its own before: a lock workflow started for every run, and
//! every ask and release a workflow task of the project's one capacity semaphore — most of a
//! run's cost on the Temporal server.

use crate::contracts::{LockAnswer, LockRequest, ProvisioningActivities};
use std::time::Duration;
use temporalio_sdk::{WorkflowContext, WorkflowResult};

/// Each attempt to take a slot.
const LOCK_STEP_TIMEOUT: Duration = Duration::from_secs(30);

/// A workflow that can hold semaphores: its `granted` signal ([`crate::messages::Granted`])
/// records what [`LockHolder::holds`] reads.
pub trait LockHolder {
    /// The semaphore `semaphore_id` granted this workflow a slot.
    fn holds(&self, semaphore_id: &str) -> bool;
    /// Records a grant the workflow learned by asking again (not by the signal).
    fn grant(&mut self, semaphore_id: &str);
    /// The workflow no longer wants to wait for its turn (it was cancelled).
    fn gives_up(&self) -> bool;
}

/// How waiting for a slot ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Turn {
    /// The caller holds a slot.
    Ours,
    /// The caller gave up waiting; it holds nothing, but must still release (to leave the
    /// queue).
    GaveUp,
}

/// The caller's side of a slot it asked for. Release it when done, also after giving up.
#[must_use = "a slot that is never released is held until its holder ends"]
pub struct Unlock {
    request: LockRequest,
    /// How often a waiter asks again.
    recheck: Duration,
}

impl Unlock {
    /// The caller's side of the slot `request` asked for, given `answer`: what [`ask`] answers
    /// when the asking was done by another activity (a run's lease request asks for its
    /// capacity slot).
    pub fn asked(request: LockRequest, answer: LockAnswer) -> (Self, bool) {
        let unlock = Unlock {
            request,
            recheck: Duration::from_secs(answer.recheck_secs.max(1)),
        };
        (unlock, answer.holds)
    }

    /// The semaphore's id.
    pub fn semaphore_id(&self) -> &str {
        &self.request.semaphore_id
    }

    /// What releases the slot (or leaves the queue), for the activity that lets it go.
    pub fn into_release(self) -> LockRequest {
        self.request
    }
}

/// Asks for a slot: true when the caller holds it at once (a slot was free and nobody waited,
/// or it already held one), false when it waits in the queue (see [`wait_for_turn`]).
/// `records_leases`: a holder found gone has its capacity lease recorded as expired.
pub async fn ask<W: LockHolder>(
    ctx: &mut WorkflowContext<W>,
    tenant_id: &str,
    semaphore_id: String,
    slots: u32,
    records_leases: bool,
) -> WorkflowResult<(Unlock, bool)> {
    let request = slot_request(ctx, tenant_id, semaphore_id, slots, records_leases);
    let answer = take(ctx, request.clone()).await?;
    Ok(Unlock::asked(request, answer))
}

/// The calling workflow's request for a slot of `semaphore_id` (of `slots`), as [`ask`] sends
/// it; with [`Unlock::asked`] when another activity asked for it.
pub fn slot_request<W>(
    ctx: &WorkflowContext<W>,
    tenant_id: &str,
    semaphore_id: String,
    slots: u32,
    records_leases: bool,
) -> LockRequest {
    LockRequest {
        tenant_id: tenant_id.to_owned(),
        semaphore_id,
        requester_workflow_id: ctx.workflow_id().to_owned(),
        slots,
        records_leases,
        check_holders: false,
    }
}

async fn take<W>(ctx: &WorkflowContext<W>, request: LockRequest) -> WorkflowResult<LockAnswer> {
    let opts = crate::options::must_succeed_locally(LOCK_STEP_TIMEOUT);
    Ok(ctx
        .execute_local_activity(ProvisioningActivities::acquire_lock, request, opts)
        .await?)
}

/// Waits until the semaphore grants the caller its slot, or the caller gives up. Asks again
/// every recheck: a grant whose signal was lost, and holders and waiters before it that
/// vanished, are found that way.
pub async fn wait_for_turn<W: LockHolder>(
    ctx: &mut WorkflowContext<W>,
    unlock: &Unlock,
) -> WorkflowResult<Turn> {
    let id = unlock.semaphore_id().to_owned();
    loop {
        let woke = {
            let id = id.clone();
            temporalio_sdk::workflows::select! {
                r = ctx.wait_condition(move |s| s.holds(&id) || s.gives_up()) => { r?; true }
                _ = ctx.timer(unlock.recheck) => false,
            }
        };
        if woke {
            break;
        }
        let again = LockRequest {
            check_holders: true,
            ..unlock.request.clone()
        };
        if take(ctx, again).await?.holds {
            ctx.state_mut(|s| s.grant(&id));
            break;
        }
    }
    Ok(turn_taken(ctx))
}

/// The caller's turn on a slot it holds: giving up wins over a grant that came with it,
/// nothing has happened under the slot yet.
pub fn turn_taken<W: LockHolder>(ctx: &WorkflowContext<W>) -> Turn {
    if ctx.state(|s| s.gives_up()) {
        Turn::GaveUp
    } else {
        Turn::Ours
    }
}
