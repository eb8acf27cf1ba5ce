//! `environment/{tenant}/{env}`: at most one provisioning run holds an environment at a time.
//!
//! Callers take it with [`lock`] and give it back with [`Unlock::release`], like
//! `unlock := mutex.Lock(…)` in Temporal's mutex sample. A free lock is taken by starting it
//! with the caller as holder (activity `provisioning.acquire-lock`): the workflow id is
//! unique, so only one start can succeed, and the caller learns from the start's answer that
//! it holds the lock, without a signal back. When the lock already runs, the caller asks with
//! signal-with-start (`acquire`); the lock grants it to the oldest waiter by signalling
//! `lock_granted`, and waits for its `release`. A caller that gives up before its turn
//! releases too, which only drops it from the queue. The lock ends when nobody holds or waits
//! for it, and continues as new to keep its history short under a steady stream of runs.

use crate::contracts::{LockRequest, ProvisioningActivities};
use crate::messages::LockGranted;
use serde::{Deserialize, Serialize};
use std::collections::VecDeque;
use std::time::Duration;
use temporalio_macros::{workflow, workflow_methods};
use temporalio_sdk::{
    ContinueAsNewOptions, SignalWorkflowOptions, SyncWorkflowContext, WorkflowContext,
    WorkflowContextView, WorkflowResult,
};

/// Grants after which the lock continues as new.
const GRANTS_PER_HISTORY: u32 = 200;
/// Each attempt to take or release the lock.
const LOCK_STEP_TIMEOUT: Duration = Duration::from_secs(30);

/// A workflow that can hold an environment's lock: its `lock_granted` signal
/// ([`LockGranted`]) sets what [`LockHolder::holds_lock`] reads.
pub trait LockHolder {
    /// The lock granted this workflow its turn.
    fn holds_lock(&self) -> bool;
    /// The workflow no longer wants to wait for its turn (it was cancelled).
    fn gives_up(&self) -> bool;
}

/// How waiting for the lock ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Turn {
    /// The caller holds the lock.
    Ours,
    /// The caller gave up waiting; it holds nothing, but must still release (to leave the
    /// queue).
    GaveUp,
}

/// The caller's side of a lock it asked for. Release it when done, also after giving up.
#[must_use = "a lock that is never released blocks its environment until the holder ends"]
pub struct Unlock(LockRequest);

/// Takes the lock `lock_workflow_id` for the calling workflow, waiting for its turn.
pub async fn lock<W: LockHolder>(
    ctx: &mut WorkflowContext<W>,
    lock_workflow_id: String,
) -> WorkflowResult<(Unlock, Turn)> {
    let request = LockRequest {
        lock_workflow_id,
        requester_workflow_id: ctx.workflow_id().to_owned(),
    };
    let opts = crate::options::must_succeed_locally(LOCK_STEP_TIMEOUT);
    let taken = ctx
        .execute_local_activity(ProvisioningActivities::acquire_lock, request.clone(), opts)
        .await?;
    if !taken {
        ctx.wait_condition(|s| s.holds_lock() || s.gives_up())
            .await?;
    }
    // Giving up wins over a grant that came with it: nothing has happened under the lock yet.
    let turn = if ctx.state(|s| s.gives_up()) {
        Turn::GaveUp
    } else {
        Turn::Ours
    };
    Ok((Unlock(request), turn))
}

impl Unlock {
    /// Lets the next waiter go (or leaves the queue). A lock that has ended has nothing to
    /// release, which is fine.
    pub async fn release<W>(self, ctx: &WorkflowContext<W>) -> WorkflowResult<()> {
        let opts = crate::options::must_succeed_locally(LOCK_STEP_TIMEOUT);
        ctx.execute_local_activity(ProvisioningActivities::release_lock, self.0, opts)
            .await?;
        Ok(())
    }
}

/// The lock's durable state, also its continue-as-new input.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LockState {
    /// The workflow id that holds the lock.
    pub holder: Option<String>,
    /// Workflow ids waiting, oldest first.
    pub queue: VecDeque<String>,
    /// While a run waits, how often to check that the holder still exists (seconds,
    /// `LockHolderCheckMinutes`).
    pub holder_check_secs: u64,
    /// The holder knows it holds the lock: it started the lock as its holder, or was granted
    /// it. False again when the holder asks for the lock (its start's answer was lost).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub holder_knows: bool,
}

impl LockState {
    /// The state of a lock started by `holder`, which learns from the start that it holds it.
    pub fn held_by(holder: String, holder_check_secs: u64) -> Self {
        Self {
            holder: Some(holder),
            queue: VecDeque::new(),
            holder_check_secs,
            holder_knows: true,
        }
    }

    /// The state of a lock started by signal-with-start: the signal brings the first waiter.
    pub fn idle(holder_check_secs: u64) -> Self {
        Self {
            holder: None,
            queue: VecDeque::new(),
            holder_check_secs,
            holder_knows: false,
        }
    }
}

/// The lock workflow.
#[workflow]
pub struct EnvironmentLock {
    state: LockState,
    grants: u32,
    /// Started by a run as its holder ([`LockState::held_by`]), not by signal-with-start or
    /// continue-as-new.
    started_held: bool,
}

#[workflow_methods]
impl EnvironmentLock {
    /// Starts with the state a previous run handed over (empty on first start).
    #[init]
    pub fn new(_ctx: &WorkflowContextView, state: LockState) -> Self {
        let started_held = state.holder_knows;
        Self {
            state,
            grants: 0,
            started_held,
        }
    }

    /// Grants the lock in arrival order until nobody holds or wants it.
    ///
    /// Only this loop assigns the holder; signals only queue and release. That keeps a release
    /// and an acquire arriving in the same workflow task from skipping a grant.
    #[run]
    pub async fn run(ctx: &mut WorkflowContext<Self>) -> WorkflowResult<()> {
        // Signals that came with the start are handled before this runs. A lock a run started
        // as its holder goes straight on: the holder may already have released it, and then the
        // loop finds nothing to do and the lock ends. Any other start waits for a first
        // `acquire` (signal-with-start brings one; a lock that continued as new while idle
        // waits for the next).
        if !ctx.state(|s| s.started_held) {
            ctx.wait_condition(|s| s.state.holder.is_some() || !s.state.queue.is_empty())
                .await?;
        }
        loop {
            // A holder carried over by continue-as-new is granted again (a run ignores a
            // second grant) unless it knows; otherwise the oldest waiter gets the lock.
            let holder = match ctx.state(|s| s.state.holder.clone()) {
                Some(holder) => holder,
                None => {
                    let next = ctx.state_mut(|s| {
                        let next = s.state.queue.pop_front();
                        s.state.holder = next.clone();
                        s.state.holder_knows = false;
                        next
                    });
                    match next {
                        Some(next) => next,
                        None => return Ok(()),
                    }
                }
            };
            if !ctx.state(|s| s.state.holder_knows) {
                ctx.state_mut(|s| s.grants += 1);
                if !Self::grant(ctx, &holder).await {
                    // The holder is gone (terminated by hand): do not block the environment.
                    ctx.state_mut(|s| s.state.holder = None);
                    continue;
                }
                ctx.state_mut(|s| s.state.holder_knows = true);
            }
            if !Self::wait_for_release(ctx, &holder).await? {
                // The holder asked again: tell it once more.
                continue;
            }
            if ctx.state(|s| s.grants >= GRANTS_PER_HISTORY) || ctx.continue_as_new_suggested() {
                let state = ctx.state(|s| s.state.clone());
                ctx.continue_as_new(state, ContinueAsNewOptions::default())?;
            }
        }
    }

    /// Signals `lock_granted` to `holder`; false when it is gone. A run ignores a second grant,
    /// so granting again is also how the lock asks whether its holder still exists.
    async fn grant(ctx: &mut WorkflowContext<Self>, holder: &str) -> bool {
        ctx.external_workflow(holder.to_owned(), None)
            .signal(LockGranted, (), SignalWorkflowOptions::default())
            .await
            .is_ok()
    }

    /// Waits until `holder` releases the lock (true), asks for it again (false), or is found
    /// gone while another run waits (true).
    ///
    /// A run terminated by hand (Temporal UI or CLI) never releases. Nobody is harmed while
    /// nobody waits, so the lock costs nothing then; once a run waits, it re-grants to the
    /// holder every `holder_check_secs` and drops a holder that no longer exists.
    async fn wait_for_release(
        ctx: &mut WorkflowContext<Self>,
        holder: &str,
    ) -> WorkflowResult<bool> {
        let released = {
            let holder = holder.to_owned();
            move |s: &Self| s.state.holder.as_deref() != Some(holder.as_str())
        };
        let woken = {
            let released = released.clone();
            move |s: &Self| released(s) || !s.state.holder_knows
        };
        let wanted = woken.clone();
        ctx.wait_condition(move |s| wanted(s) || !s.state.queue.is_empty())
            .await?;
        let every = Duration::from_secs(ctx.state(|s| s.state.holder_check_secs));
        loop {
            if ctx.state(|s| released(s)) {
                return Ok(true);
            }
            if !ctx.state(|s| s.state.holder_knows) {
                return Ok(false);
            }
            let woke = temporalio_sdk::workflows::select! {
                r = ctx.wait_condition(woken.clone()) => { r?; true }
                _ = ctx.timer(every) => false,
            };
            if !woke && !Self::grant(ctx, holder).await {
                ctx.state_mut(|s| {
                    if s.state.holder.as_deref() == Some(holder) {
                        s.state.holder = None;
                    }
                });
                return Ok(true);
            }
        }
    }

    /// A run wants the lock. Asking twice keeps one place in the queue; the holder asking
    /// means it does not know it holds the lock (the answer to its start was lost), so the
    /// lock tells it again.
    #[signal]
    pub fn acquire(&mut self, _ctx: &mut SyncWorkflowContext<Self>, requester: String) {
        if self.state.holder.as_deref() == Some(requester.as_str()) {
            self.state.holder_knows = false;
            return;
        }
        if !self.state.queue.contains(&requester) {
            self.state.queue.push_back(requester);
        }
    }

    /// A run is done with the lock, or no longer wants it.
    #[signal]
    pub fn release(&mut self, _ctx: &mut SyncWorkflowContext<Self>, requester: String) {
        if self.state.holder.as_deref() == Some(requester.as_str()) {
            self.state.holder = None;
            self.state.holder_knows = false;
        }
        self.state.queue.retain(|r| r != &requester);
    }

    /// Who holds the lock and who waits.
    #[query]
    pub fn holders(&self, _ctx: &WorkflowContextView) -> LockState {
        self.state.clone()
    }
}
