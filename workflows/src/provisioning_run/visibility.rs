//! What the run has told the world: the `ProvisioningState` search attribute (set where the
//! run is about to wait, and at its end) and the read tables (a projection with its event at
//! every transition). [`Told`] owns what was last told; the stages only call [`transition`]
//! (a state the run waits in), [`pass_through`] (one it goes straight on from, projected with
//! the next) and [`before_waiting`].
//!
//! [`transition`]: ProvisioningRun::transition
//! [`pass_through`]: ProvisioningRun::pass_through
//! [`before_waiting`]: ProvisioningRun::before_waiting

use super::{PROJECT_TIMEOUT, ProvisioningRun};
use crate::contracts::{ProvisioningActivities, RunProjection};
use crate::search_attributes::PROVISIONING_STATE;
use runtime_cloud_models::capacity::CapacityWait;
use runtime_cloud_models::{ProvisioningState, RunStatus, can_move};
use temporalio_sdk::{WorkflowContext, WorkflowResult};

/// What the search attributes and the read tables were last told.
#[derive(Debug, Default)]
pub(super) struct Told {
    /// The state the `ProvisioningState` search attribute says ([`ProvisioningRun::show_state`]).
    pub shown_state: Option<ProvisioningState>,
    /// The statuses of the states the run went on from since its last projection, oldest
    /// first ([`ProvisioningRun::pass_through`]).
    pub passed: Vec<RunStatus>,
}

impl ProvisioningRun {
    /// Moves to `state`: the read tables and the event (the search attribute when the run
    /// waits next, [`Self::show_state`]).
    pub(super) async fn transition(
        ctx: &mut WorkflowContext<Self>,
        state: ProvisioningState,
    ) -> WorkflowResult<()> {
        Self::set_state(ctx, state);
        Self::project(ctx).await
    }

    /// Moves to `state` and goes straight on: its status is projected, with its event, before
    /// the next state's in the same write ([`RunProjection::passed`]), or by
    /// [`Self::before_waiting`] if the run waits first.
    pub(super) fn pass_through(ctx: &mut WorkflowContext<Self>, state: ProvisioningState) {
        Self::set_state(ctx, state);
        ctx.state_mut(|s| s.told.passed.push(s.status.clone()));
    }

    /// Before the run waits on anything outside it (a policy engine, an approval, a change
    /// window): the states it passed through are recorded, and the search attribute says
    /// where it waits.
    pub(super) async fn before_waiting(ctx: &mut WorkflowContext<Self>) -> WorkflowResult<()> {
        // A gate read before the wait is stale after it, and so are the quarantines weighed.
        ctx.state_mut(|s| {
            s.window_read = None;
            s.waited = true;
        });
        if ctx.state(|s| !s.told.passed.is_empty()) {
            Self::project(ctx).await?;
        }
        Self::show_state(ctx);
        Ok(())
    }

    /// Sets the run's state.
    pub(super) fn set_state(ctx: &mut WorkflowContext<Self>, state: ProvisioningState) {
        let from = ctx.state(|s| s.status.state);
        // A move the diagram does not have is a bug in this file. Panicking fails the workflow
        // task, not the run: the run waits, visibly, until a fixed worker replays it.
        assert!(
            can_move(from, state),
            "provisioning run cannot move from {from:?} to {state}"
        );
        ctx.state_mut(|s| s.status.state = Some(state));
    }

    /// Sets the `ProvisioningState` search attribute to the run's state, if it says another:
    /// called where the run is about to wait on something outside it (a policy engine, an
    /// approval, a change window) and at its end. A state the run passes through within one
    /// workflow task (`Planned` on its way to `Applying`) was never seen in Temporal's
    /// visibility anyway (a task's upserts reach it when the task completes), and each upsert
    /// is an event in the run's history and a write on the server's visibility store.
    pub(super) fn show_state(ctx: &mut WorkflowContext<Self>) {
        let (state, shown) = ctx.state(|s| (s.status.state, s.told.shown_state));
        if let Some(state) = state
            && shown != Some(state)
        {
            ctx.upsert_search_attributes([PROVISIONING_STATE.value_set(state.as_str().to_owned())]);
            ctx.state_mut(|s| s.told.shown_state = Some(state));
        }
    }

    /// Moves the attribute on to the run's state where it says a wait the run has left (it
    /// applies after an approval or a window), so it never says a state the run has left. A
    /// run that never waited shows none until it ends: an `Applying` would cost every run an
    /// event and a visibility write on the server (docs/benchmarks.md, section 1), and
    /// the read API answers which runs apply (`GET /factory/provisioning/runs?state=Applying`).
    pub(super) fn move_shown_state_on(ctx: &mut WorkflowContext<Self>) {
        if ctx.state(|s| s.told.shown_state.is_some()) {
            Self::show_state(ctx);
        }
    }

    /// The run's status as the read tables take it, after those of the states it passed
    /// through since its last projection.
    pub(super) fn projection(ctx: &mut WorkflowContext<Self>) -> RunProjection {
        ctx.state_mut(|s| RunProjection {
            run: s.input.clone(),
            passed: std::mem::take(&mut s.told.passed),
            status: s.status.clone(),
        })
    }

    /// Writes the run's status into the read tables, with the event of its state.
    pub(super) async fn project(ctx: &mut WorkflowContext<Self>) -> WorkflowResult<()> {
        let projection = Self::projection(ctx);
        let opts = crate::options::must_succeed_locally(PROJECT_TIMEOUT);
        ctx.execute_local_activity(ProvisioningActivities::project, projection, opts)
            .await?;
        Ok(())
    }

    /// Shows what holds the run (`waitingForCapacity`) in the read tables.
    pub(super) async fn wait_visibly(
        ctx: &mut WorkflowContext<Self>,
        wait: CapacityWait,
    ) -> WorkflowResult<()> {
        ctx.state_mut(|s| s.status.waiting_for_capacity = Some(wait));
        Self::project(ctx).await
    }
}
