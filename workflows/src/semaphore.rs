//! A durable counting semaphore: at most `slots` workflows hold it at a time, the rest wait
//! their turn in arrival order. Two kinds run on it:
//!
//! - `environment/{tenant}/{env}`, one slot: the environment's lock (one applying run at a
//!   time);
//! - `capacity/{tenant}/{project}`, the quota's `concurrentRuns` slots: the project's capacity
//!   leases (spec 003).
//!
//! Callers take it with [`ask`] (or [`lock`]) and give it back with [`Unlock::release`], like
//! `unlock := mutex.Lock(…)` in Temporal's mutex sample. A semaphore that is not running is
//! taken by starting it with the caller as holder (activity `provisioning.acquire-lock`): the
//! workflow id is unique, so only one start can succeed, and the caller learns from the
//! start's answer that it holds a slot. When the semaphore already runs, the caller asks with
//! update-with-start (`acquire`), whose answer says whether it holds a slot now: a slot is
//! free and nobody waits before it (the common case, answered without a signal back and
//! without a workflow task of the caller's), or it waits in the queue. The semaphore grants
//! the slots freed later to the oldest waiters by signalling `granted` (with its own workflow
//! id, so a workflow that holds two semaphores knows which one answered), and waits for their
//! `release`. A caller that gives up before its turn releases too, which only drops it from
//! the queue. The semaphore ends when nobody holds or waits for it, and continues as new to
//! keep its history short under a steady stream of callers. Semaphores run on their own task
//! queue ([`crate::ids::semaphore_task_queue`]): a caller's local activity waits for the
//! answer while the caller's workflow task is open.

use crate::contracts::{CapacityActivities, LeaseExpiry, LockRequest, ProvisioningActivities};
use crate::messages::Granted;

use serde::{Deserialize, Serialize};
use std::collections::VecDeque;
use std::time::Duration;
use temporalio_macros::{workflow, workflow_methods};
use temporalio_sdk::{
    ContinueAsNewOptions, SignalWorkflowOptions, SyncWorkflowContext, WorkflowContext,
    WorkflowContextView, WorkflowResult,
};

/// Grants after which the semaphore continues as new.
const GRANTS_PER_HISTORY: u32 = 200;
/// Each attempt to take or release a slot, or to record an expired lease.
const LOCK_STEP_TIMEOUT: Duration = Duration::from_secs(30);

/// A workflow that can hold semaphores: its `granted` signal ([`Granted`]) records what
/// [`LockHolder::holds`] reads.
pub trait LockHolder {
    /// The semaphore `semaphore_id` granted this workflow a slot.
    fn holds(&self, semaphore_id: &str) -> bool;
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
pub struct Unlock(LockRequest);

impl Unlock {
    /// The semaphore's workflow id.
    pub fn semaphore_id(&self) -> &str {
        &self.0.lock_workflow_id
    }
}

/// Takes a slot of `lock_workflow_id` (of `slots`) for the calling workflow, waiting for its
/// turn.
pub async fn lock<W: LockHolder>(
    ctx: &mut WorkflowContext<W>,
    tenant_id: &str,
    lock_workflow_id: String,
    slots: u32,
) -> WorkflowResult<(Unlock, Turn)> {
    let (unlock, taken) = ask(ctx, tenant_id, lock_workflow_id, slots, false).await?;
    let turn = if taken {
        turn_taken(ctx)
    } else {
        wait_for_turn(ctx, &unlock).await?
    };
    Ok((unlock, turn))
}

/// Asks for a slot: true when the caller holds it at once (it started the semaphore, or a
/// slot was free and nobody waited), false when it waits in the queue (see
/// [`wait_for_turn`]). `records_leases`: the semaphore records
/// a vanished holder's capacity lease as expired. `tenant_id` is the semaphore's tenant, its
/// fairness key.
pub async fn ask<W: LockHolder>(
    ctx: &mut WorkflowContext<W>,
    tenant_id: &str,
    lock_workflow_id: String,
    slots: u32,
    records_leases: bool,
) -> WorkflowResult<(Unlock, bool)> {
    let request = LockRequest {
        tenant_id: tenant_id.to_owned(),
        lock_workflow_id,
        requester_workflow_id: ctx.workflow_id().to_owned(),
        slots,
        records_leases,
    };
    let opts = crate::options::must_succeed_locally(LOCK_STEP_TIMEOUT);
    let taken = ctx
        .execute_local_activity(ProvisioningActivities::acquire_lock, request.clone(), opts)
        .await?;
    Ok((Unlock(request), taken))
}

/// Waits until the semaphore grants the caller its slot, or the caller gives up.
pub async fn wait_for_turn<W: LockHolder>(
    ctx: &mut WorkflowContext<W>,
    unlock: &Unlock,
) -> WorkflowResult<Turn> {
    let id = unlock.semaphore_id().to_owned();
    ctx.wait_condition(move |s| s.holds(&id) || s.gives_up())
        .await?;
    Ok(turn_taken(ctx))
}

/// Giving up wins over a grant that came with it: nothing has happened under the slot yet.
fn turn_taken<W: LockHolder>(ctx: &WorkflowContext<W>) -> Turn {
    if ctx.state(|s| s.gives_up()) {
        Turn::GaveUp
    } else {
        Turn::Ours
    }
}

impl Unlock {
    /// Lets the next waiter go (or leaves the queue). A semaphore that has ended has nothing
    /// to release, which is fine.
    pub async fn release<W>(self, ctx: &WorkflowContext<W>) -> WorkflowResult<()> {
        let opts = crate::options::must_succeed_locally(LOCK_STEP_TIMEOUT);
        ctx.execute_local_activity(ProvisioningActivities::release_lock, self.0, opts)
            .await?;
        Ok(())
    }
}

/// A workflow holding a slot.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Holder {
    /// Its workflow id.
    pub id: String,
    /// It knows it holds the slot: it started the semaphore as its holder, was answered so
    /// when it asked, or was signalled its grant. False for a waiter the loop just made a
    /// holder, until its grant is delivered.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub knows: bool,
}

/// The semaphore's durable state, also its continue-as-new input.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SemaphoreState {
    /// How many may hold it at once; the latest `acquire` sets it (a quota changed while runs
    /// hold slots takes nothing back, it bounds the next grants).
    pub slots: u32,
    /// The workflows that hold it, in the order they were granted.
    pub holders: Vec<Holder>,
    /// Workflow ids waiting, oldest first.
    pub queue: VecDeque<String>,
    /// While a workflow waits, how often to check that the holders still exist (seconds,
    /// `LockHolderCheckMinutes`).
    pub holder_check_secs: u64,
    /// The holders' capacity leases are recorded: a vanished holder's is marked expired.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub records_leases: bool,
}

impl SemaphoreState {
    /// The state of a semaphore started by `req`'s requester, which learns from the start
    /// that it holds a slot.
    pub fn held_by(req: &LockRequest, holder_check_secs: u64) -> Self {
        Self {
            slots: req.slots.max(1),
            holders: vec![Holder {
                id: req.requester_workflow_id.clone(),
                knows: true,
            }],
            queue: VecDeque::new(),
            holder_check_secs,
            records_leases: req.records_leases,
        }
    }

    /// The state of a semaphore started by signal-with-start: the signal brings the first
    /// waiter.
    pub fn idle(req: &LockRequest, holder_check_secs: u64) -> Self {
        Self {
            slots: req.slots.max(1),
            holders: Vec::new(),
            queue: VecDeque::new(),
            holder_check_secs,
            records_leases: req.records_leases,
        }
    }

    /// `acquire`'s answer (see [`Semaphore::acquire`]): true when the requester holds a slot
    /// now, false when it waits in the queue.
    pub fn ask(&mut self, request: Acquire) -> bool {
        self.slots = request.slots.max(1);
        let requester = request.requester;
        if let Some(holder) = self.holders.iter_mut().find(|h| h.id == requester) {
            holder.knows = true;
            return true;
        }
        let free = self.holders.len() < self.slots as usize;
        if free && self.queue.is_empty() {
            self.holders.push(Holder {
                id: requester,
                knows: true,
            });
            return true;
        }
        if !self.queue.contains(&requester) {
            self.queue.push_back(requester);
        }
        false
    }

    /// Whether `id` holds a slot.
    fn holds(&self, id: &str) -> bool {
        self.holders.iter().any(|h| h.id == id)
    }

    /// A free slot can go to a waiter, or a holder must be told (again) that it holds one, or
    /// nobody holds or waits any more: the loop has something to do.
    fn has_work(&self) -> bool {
        let free = self.holders.len() < self.slots as usize;
        (free && !self.queue.is_empty())
            || self.holders.iter().any(|h| !h.knows)
            || self.holders.is_empty()
    }
}

/// The semaphore workflow.
#[workflow]
pub struct Semaphore {
    state: SemaphoreState,
    grants: u32,
    /// Started by its holder ([`SemaphoreState::held_by`]), not by signal-with-start or
    /// continue-as-new.
    started_held: bool,
}

#[workflow_methods]
impl Semaphore {
    /// Starts with the state a previous run handed over (empty on first start).
    #[init]
    pub fn new(_ctx: &WorkflowContextView, state: SemaphoreState) -> Self {
        let started_held = state.holders.iter().any(|h| h.knows);
        Self {
            state,
            grants: 0,
            started_held,
        }
    }

    /// Grants free slots in arrival order until nobody holds or wants one.
    ///
    /// Only this loop and `acquire` make holders, and `acquire` only when nobody waits: a
    /// waiter is always granted by this loop, in arrival order.
    #[run]
    pub async fn run(ctx: &mut WorkflowContext<Self>) -> WorkflowResult<()> {
        // Signals that came with the start are handled before this runs. A semaphore started
        // by its holder goes straight on: the holder may already have released it, and then
        // the loop finds nothing to do and it ends. Any other start waits for a first
        // `acquire` (signal-with-start brings one; one that continued as new while idle waits
        // for the next).
        if !ctx.state(|s| s.started_held) {
            ctx.wait_condition(|s| !s.state.holders.is_empty() || !s.state.queue.is_empty())
                .await?;
        }
        loop {
            ctx.state_mut(|s| {
                let state = &mut s.state;
                while state.holders.len() < state.slots as usize {
                    let Some(next) = state.queue.pop_front() else {
                        break;
                    };
                    state.holders.push(Holder {
                        id: next,
                        knows: false,
                    });
                }
            });
            if ctx.state(|s| s.state.holders.is_empty()) {
                return Ok(());
            }
            // A waiter that became a holder is granted its slot (a caller ignores a second
            // grant, should it have asked again meanwhile). All at once:
            // a semaphore freeing ten slots does not make the tenth wait for nine round trips.
            let untold: Vec<String> = ctx.state(|s| {
                let untold = s.state.holders.iter().filter(|h| !h.knows);
                untold.map(|h| h.id.clone()).collect()
            });
            ctx.state_mut(|s| s.grants += untold.len() as u32);
            for (holder, delivered) in Self::grant_all(ctx, &untold).await {
                if delivered {
                    ctx.state_mut(|s| {
                        if let Some(h) = s.state.holders.iter_mut().find(|h| h.id == holder) {
                            h.knows = true;
                        }
                    });
                } else {
                    // Gone (terminated by hand): its slot goes to the next waiter.
                    Self::drop_vanished(ctx, &holder).await?;
                }
            }
            Self::wait_for_work(ctx).await?;
            // An idle semaphore ends at the loop's top instead: one that continued as new
            // with nobody holding or waiting would wait for an acquire that may never come.
            let idle = ctx.state(|s| s.state.holders.is_empty() && s.state.queue.is_empty());
            let long = ctx.state(|s| s.grants >= GRANTS_PER_HISTORY);
            if !idle && (long || ctx.continue_as_new_suggested()) {
                let state = ctx.state(|s| s.state.clone());
                ctx.continue_as_new(state, ContinueAsNewOptions::default())?;
            }
        }
    }

    /// Signals `granted` to each of `holders` at once; with each, false when it is gone. A
    /// caller ignores a second grant, so granting again is also how the semaphore asks whether
    /// its holders still exist.
    async fn grant_all(ctx: &WorkflowContext<Self>, holders: &[String]) -> Vec<(String, bool)> {
        let semaphore_id = ctx.workflow_id().to_owned();
        let handles: Vec<_> = holders
            .iter()
            .map(|holder| ctx.external_workflow(holder.clone(), None))
            .collect();
        let signals = handles.iter().map(|handle| {
            handle.signal(
                Granted,
                semaphore_id.clone(),
                SignalWorkflowOptions::default(),
            )
        });
        // The SDK's join: `futures`' own wakes the workflow from outside the SDK past 30
        // futures, which fails the workflow task as nondeterministic.
        let delivered = temporalio_sdk::workflows::join_all(signals).await;
        holders
            .iter()
            .cloned()
            .zip(delivered.into_iter().map(|r| r.is_ok()))
            .collect()
    }

    /// Drops a holder that no longer exists, recording its capacity lease as expired.
    async fn drop_vanished(ctx: &mut WorkflowContext<Self>, holder: &str) -> WorkflowResult<()> {
        ctx.state_mut(|s| s.state.holders.retain(|h| h.id != holder));
        if ctx.state(|s| s.state.records_leases) {
            let expiry = LeaseExpiry {
                semaphore_id: ctx.workflow_id().to_owned(),
                holder_workflow_id: holder.to_owned(),
            };
            let opts = crate::options::must_succeed_locally(LOCK_STEP_TIMEOUT);
            ctx.execute_local_activity(CapacityActivities::expire_lease, expiry, opts)
                .await?;
        }
        Ok(())
    }

    /// Waits until there is something to do: a slot released while someone waits, a holder
    /// asking again, nobody left.
    ///
    /// A workflow terminated by hand (Temporal UI or CLI) never releases. Nobody is harmed
    /// while nobody waits, so the semaphore costs nothing then; once a workflow waits for a
    /// slot, it re-grants to every holder every `holder_check_secs` and drops those that no
    /// longer exist.
    async fn wait_for_work(ctx: &mut WorkflowContext<Self>) -> WorkflowResult<()> {
        ctx.wait_condition(|s| s.state.has_work() || !s.state.queue.is_empty())
            .await?;
        let every = Duration::from_secs(ctx.state(|s| s.state.holder_check_secs));
        loop {
            if ctx.state(|s| s.state.has_work()) {
                return Ok(());
            }
            let woke = temporalio_sdk::workflows::select! {
                r = ctx.wait_condition(|s| s.state.has_work()) => { r?; true }
                _ = ctx.timer(every) => false,
            };
            if woke {
                return Ok(());
            }
            let holders: Vec<String> =
                ctx.state(|s| s.state.holders.iter().map(|h| h.id.clone()).collect());
            for (holder, delivered) in Self::grant_all(ctx, &holders).await {
                if !delivered && ctx.state(|s| s.state.holds(&holder)) {
                    Self::drop_vanished(ctx, &holder).await?;
                }
            }
        }
    }

    /// A workflow wants a slot; `slots` is the limit as it reads it now. True: it holds one
    /// now, because a slot is free and nobody waits before it, or because it already held one
    /// (the answer to its start or to an earlier ask was lost). False: it waits in the queue,
    /// and is signalled `granted` when its turn comes; asking twice keeps one place.
    #[update]
    pub fn acquire(&mut self, _ctx: &mut SyncWorkflowContext<Self>, request: Acquire) -> bool {
        let granted = self.state.ask(request);
        self.grants += u32::from(granted);
        granted
    }

    /// A workflow is done with its slot, or no longer wants one.
    #[signal]
    pub fn release(&mut self, _ctx: &mut SyncWorkflowContext<Self>, requester: String) {
        self.state.holders.retain(|h| h.id != requester);
        self.state.queue.retain(|r| r != &requester);
    }

    /// Who holds a slot and who waits.
    #[query]
    pub fn holders(&self, _ctx: &WorkflowContextView) -> SemaphoreState {
        self.state.clone()
    }
}

/// Payload of the `acquire` update.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Acquire {
    /// The workflow id that wants a slot.
    pub requester: String,
    /// The limit as the requester read it (1 for an environment's lock).
    pub slots: u32,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(slots: u32) -> LockRequest {
        LockRequest {
            tenant_id: "acme".into(),
            lock_workflow_id: "capacity/acme/shop".into(),
            requester_workflow_id: "provisioning-run/r1".into(),
            slots,
            records_leases: true,
        }
    }

    #[test]
    fn a_semaphore_has_work_when_a_slot_is_free_for_a_waiter_or_a_holder_must_be_told() {
        let mut state = SemaphoreState::held_by(&request(2), 60);
        assert!(!state.has_work(), "one holder that knows, nobody waits");
        state.queue.push_back("provisioning-run/r2".into());
        assert!(state.has_work(), "a free slot and a waiter");
        state.holders.push(Holder {
            id: "provisioning-run/r2".into(),
            knows: true,
        });
        state.queue.clear();
        state.queue.push_back("provisioning-run/r3".into());
        assert!(!state.has_work(), "full: the third waits");
        state.holders[0].knows = false;
        assert!(state.has_work(), "a holder not told yet");
        state.holders.clear();
        assert!(state.has_work(), "nobody holds");
        assert_eq!(SemaphoreState::idle(&request(0), 60).slots, 1);
    }

    fn acquire(requester: &str, slots: u32) -> Acquire {
        Acquire {
            requester: format!("provisioning-run/{requester}"),
            slots,
        }
    }

    #[test]
    fn an_ask_holds_a_free_slot_at_once_unless_someone_waits_before_it() {
        let mut state = SemaphoreState::held_by(&request(2), 60);
        assert!(state.ask(acquire("r2", 2)), "a free slot, nobody waiting");
        assert!(!state.ask(acquire("r3", 2)), "full: r3 waits");
        assert!(state.ask(acquire("r2", 2)), "asking again: still held");
        assert!(!state.ask(acquire("r3", 2)), "asking again: still waiting");
        assert_eq!(
            state.queue,
            ["provisioning-run/r3"],
            "one place in the queue"
        );

        // r1 leaves: its slot is r3's, not a newcomer's, though the loop has not granted it.
        state.holders.retain(|h| h.id != "provisioning-run/r1");
        assert!(!state.ask(acquire("r4", 2)), "r3 waited first");
        assert_eq!(state.queue, ["provisioning-run/r3", "provisioning-run/r4"]);

        // A quota raised takes effect for the next asks; still behind the waiters.
        assert!(!state.ask(acquire("r5", 10)));
        assert_eq!(state.slots, 10);
        state.queue.clear();
        assert!(state.ask(acquire("r6", 10)), "nobody waits any more");
        assert!(
            state.holders.iter().all(|h| h.knows),
            "answered holders know"
        );
    }
}
