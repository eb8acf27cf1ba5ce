//! `provisioning-run/{runId}`: plan → approval when production → apply → immutable receipts.
//!
//! The run reads like the spec's state diagram (`models::TRANSITIONS`):
//!
//! ```text
//! (waiting for its turn, then for capacity) → Planned → AwaitingApproval → Applying → Applied | Failed
//!                                                   ↘ Applying            ↘ Rejected
//!                                            Planned | AwaitingApproval → Cancelled
//! ```
//!
//! [`ProvisioningRun::run`] is the diagram: take the turn, run the stages, end.
//!
//! - [`admission`]: the turn: the environment's lock, the project's capacity lease
//!   (`waitingForCapacity` while the quota's `concurrentRuns` are all held, or while no worker
//!   serves the environment's pool). A project whose day's execution minutes are spent gets
//!   none, and the run ends `Rejected` unplanned.
//! - [`stages`]: plan, the policies, the production gate, the change windows
//!   (`waitingForWindow`, unless an Operator breaks glass with a reason), the apply. Each
//!   stage is one small function that goes on to the next or ends the run in a state.
//! - [`approval`]: the production gate and the decisions told to the run (the API's
//!   `decide` update, refused to the caller when the run would not count it; the `approval`
//!   signal of inbound events and the Temporal CLI).
//! - [`visibility`]: what the search attribute and the read tables were last told. Every
//!   transition is projected with its event before the run waits on anything or acts on its
//!   target, so a reader never sees an apply whose plan is not recorded; a state the run goes
//!   straight on from is projected with the next one, in one write.
//!
//! The end records where the run ended as it lets its capacity and its environment go and,
//! after an apply, observes the environment again, in one local activity.

use crate::contracts::{Finish, ProvisioningActivities};
use crate::handover::hand_over;
use crate::observe_environment::observe_request;
use crate::search_attributes::{TENANT_ID, run_attributes};
use crate::semaphore::{LockHolder, Unlock};
use admission::{Admission, Held};
use approval::HeldApproval;
use runtime_cloud_models::{
    Approval, BreakGlass, ProvisioningKind, ProvisioningState, RunInput, RunStatus,
    break_glass_refused, cancel_refused, cancellable, decision_refused,
};
use serde::{Deserialize, Serialize};
use std::time::Duration;
use temporalio_macros::{workflow, workflow_methods};
use temporalio_sdk::{SyncWorkflowContext, WorkflowContext, WorkflowContextView, WorkflowResult};
use visibility::Told;

/// The result of a stage that went on; returns from the caller with the ending otherwise.
macro_rules! go_on {
    ($stage:expr) => {
        match $stage? {
            Stage::GoOn(value) => value,
            Stage::End(ending) => return Ok(ending),
        }
    };
}

mod admission;
mod approval;
mod stages;
mod visibility;

/// Each attempt of a projection.
const PROJECT_TIMEOUT: Duration = Duration::from_secs(30);
/// How long the observation after the apply may take (three reads of the target at most, then
/// the record), in the finish's attempt, and how long to keep trying to mark the proposals it
/// superseded told.
const RECORD_TIMEOUT: Duration = Duration::from_secs(120);
const RECORD_BUDGET: Duration = Duration::from_secs(300);

/// Payload of the `cancel` signal.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CancelRequest {
    /// Who cancelled.
    #[serde(default)]
    pub by: String,
    /// Why.
    #[serde(default)]
    pub reason: String,
}

/// The ProvisioningRun workflow.
#[workflow]
pub struct ProvisioningRun {
    input: RunInput,
    status: RunStatus,
    /// The semaphores (environment lock, capacity) that granted the run a slot.
    granted: Vec<String>,
    /// The task queue of the environment's worker pool; none for the workflow's own.
    pool_queue: Option<String>,
    /// What the OS holds the runner's processes to (the project's quota, read with the lease).
    limits: Option<runtime_cloud_models::capacity::ProcessLimits>,
    cancel: Option<CancelRequest>,
    /// The decision counted (the first approval that named the plan while awaited).
    decision: Option<Approval>,
    /// Approvals that arrived before the run awaited approval; weighed when it does.
    held_approvals: Vec<HeldApproval>,
    /// An Operator's break-glass, until the run uses it.
    break_glass: Option<BreakGlass>,
    /// What the search attribute and the read tables were last told.
    told: Told,
    /// The change windows' gate read with the policies' decision: the window stage's first
    /// look, unless the run waited on something since ([`Self::before_waiting`] drops it).
    window_read: Option<crate::contracts::Gate>,
    /// The run waited (for a policy engine, an approval, a window) since its policies decided:
    /// its quarantines are weighed again before it applies.
    waited: bool,
}

/// Where the run ends: its final state and why.
struct Ending {
    state: ProvisioningState,
    reason: Option<String>,
}

impl Ending {
    fn new(state: ProvisioningState, reason: impl Into<String>) -> Self {
        Self {
            state,
            reason: Some(reason.into()),
        }
    }
}

/// What a stage decided: go on to the next stage with its result, or end the run.
enum Stage<T = ()> {
    GoOn(T),
    End(Ending),
}

#[workflow_methods]
impl ProvisioningRun {
    /// Takes the run's fixed input.
    #[init]
    pub fn new(_ctx: &WorkflowContextView, input: RunInput) -> Self {
        Self {
            input,
            status: RunStatus::default(),
            granted: Vec::new(),
            pool_queue: None,
            limits: None,
            cancel: None,
            decision: None,
            held_approvals: Vec::new(),
            break_glass: None,
            told: Told::default(),
            window_read: None,
            waited: false,
        }
    }

    /// Runs the whole plan-and-apply and returns the final status: take the turn, run the
    /// stages, end.
    #[run]
    pub async fn run(ctx: &mut WorkflowContext<Self>) -> WorkflowResult<RunStatus> {
        let input = ctx.state(|s| s.input.clone());
        // The API and the workflows that start runs set these at start; a run started by
        // hand (a promotion calling Temporal directly) sets them itself.
        if ctx.search_attributes().get(&TENANT_ID).is_none() {
            ctx.upsert_search_attributes(run_attributes(&input));
        }
        let (ending, held) = match Self::take_turn(ctx, &input).await? {
            Admission::Admitted(held) => (Self::stages(ctx, &input).await?, held),
            Admission::Ended(ending, held) => (ending, held),
        };
        Self::end(ctx, ending, held).await?;
        Ok(ctx.state(|s| s.status.clone()))
    }

    /// Signal `granted`: sent by a semaphore (the environment's lock, the project's capacity)
    /// when it is this run's turn; the payload names the semaphore.
    #[signal]
    pub fn granted(&mut self, _ctx: &mut SyncWorkflowContext<Self>, semaphore_id: String) {
        if !self.granted.contains(&semaphore_id) {
            self.granted.push(semaphore_id);
        }
    }

    /// Update `decide`: an operator approves or rejects the recorded plan (the API's
    /// `POST …/approval`). Counted at once; [`Self::refuse_decision`] refuses to the caller
    /// what the run would not count.
    #[update]
    pub fn decide(&mut self, ctx: &mut SyncWorkflowContext<Self>, approval: Approval) {
        self.receive(approval, now(ctx.workflow_time()));
    }

    /// Refuses a decision the run would not count: it does not await approval, the decision
    /// names another plan, or one was counted already. The same decision told twice (an update
    /// no worker answered in time, then the API's signal) is taken and counts once.
    #[update_validator(decide)]
    pub fn refuse_decision(&self, _ctx: &WorkflowContextView, approval: &Approval) -> Refusal {
        if self.decision.as_ref() == Some(approval) {
            return Ok(());
        }
        let plan = self.status.plan_receipt.as_ref();
        let decided = self.decision.is_some();
        match decision_refused(
            &self.input.run_id,
            self.status.state,
            plan,
            decided,
            approval,
        ) {
            Some(why) => Err(why.into()),
            None => Ok(()),
        }
    }

    /// Update `request_cancel`: the API's `POST …/cancel`; refused once the apply started.
    #[update]
    pub fn request_cancel(&mut self, _ctx: &mut SyncWorkflowContext<Self>, request: CancelRequest) {
        self.take_cancel(request);
    }

    #[update_validator(request_cancel)]
    pub fn refuse_cancel(&self, _ctx: &WorkflowContextView, _request: &CancelRequest) -> Refusal {
        cancel_refused(&self.input.run_id, self.status.state).map_or(Ok(()), |why| Err(why.into()))
    }

    /// Update `request_break_glass`: the API's `POST …/break-glass`; refused once the apply
    /// started.
    #[update]
    pub fn request_break_glass(
        &mut self,
        _ctx: &mut SyncWorkflowContext<Self>,
        request: BreakGlass,
    ) {
        self.take_break_glass(request);
    }

    #[update_validator(request_break_glass)]
    pub fn refuse_break_glass(&self, _ctx: &WorkflowContextView, _request: &BreakGlass) -> Refusal {
        break_glass_refused(&self.input.run_id, self.status.state)
            .map_or(Ok(()), |why| Err(why.into()))
    }

    /// Signal `approval`: the decision of an inbound `ApprovalDecided`, or of
    /// `temporal workflow signal` (the API sends the `decide` update).
    ///
    /// An approval that arrives before the run awaits approval is held and weighed when it
    /// does (see [`Self::weigh_held`]); any other is weighed at once. What is not counted is
    /// kept in `refusedApprovals` with the reason, and changes nothing.
    #[signal]
    pub fn approval(&mut self, ctx: &mut SyncWorkflowContext<Self>, approval: Approval) {
        self.receive(approval, now(ctx.workflow_time()));
    }

    /// Signal `cancel`: as the `request_cancel` update, for `temporal workflow signal`;
    /// ignored once the apply started.
    #[signal]
    pub fn cancel(&mut self, _ctx: &mut SyncWorkflowContext<Self>, request: CancelRequest) {
        self.take_cancel(request);
    }

    /// Signal `break_glass`: as the `request_break_glass` update, for `temporal workflow
    /// signal`; ignored once the apply started.
    #[signal]
    pub fn break_glass(&mut self, _ctx: &mut SyncWorkflowContext<Self>, request: BreakGlass) {
        self.take_break_glass(request);
    }

    /// Query `state`: the live status of the run.
    #[query]
    pub fn state(&self, _ctx: &WorkflowContextView) -> RunStatus {
        self.status.clone()
    }
}

/// What an update validator answers: `Err` refuses the update to its caller, with the reason.
type Refusal = Result<(), Box<dyn std::error::Error + Send + Sync>>;

impl ProvisioningRun {
    /// A cancel counts before the apply starts; the first one counts.
    fn take_cancel(&mut self, request: CancelRequest) {
        if cancellable(self.status.state) && self.cancel.is_none() {
            self.cancel = Some(request);
        }
    }

    /// An Operator's break-glass (the API refuses one without a reason) counts before the
    /// apply starts; the first one counts.
    fn take_break_glass(&mut self, request: BreakGlass) {
        if cancellable(self.status.state)
            && self.break_glass.is_none()
            && self.status.break_glass.is_none()
        {
            self.break_glass = Some(request);
        }
    }
}

impl ProvisioningRun {
    /// Records where the run ended and lets its semaphores go, in one local activity
    /// ([`Finish`]: its capacity first, its environment last). Approvals still held (the run
    /// ended before it could await one) are refused: none is dropped unrecorded.
    ///
    /// After an apply (or a failed one, to capture the partial state) the same local activity
    /// observes the environment again before it lets it go: that observation resolves the
    /// findings the apply fixed. What it recorded comes back, none if it was given up (the
    /// next sweep observes the environment within five minutes anyway): the proposals it
    /// superseded are told and the new one's workflow started.
    async fn end(
        ctx: &mut WorkflowContext<Self>,
        ending: Ending,
        held: Held,
    ) -> WorkflowResult<()> {
        let applied = matches!(
            ending.state,
            ProvisioningState::Applied | ProvisioningState::Failed
        );
        ctx.state_mut(|s| {
            s.status.reason = ending.reason;
            s.weigh_held(false);
        });
        Self::set_state(ctx, ending.state);
        Self::show_state(ctx);
        // An applied decommission retires the environment (`transactions::end_run`): there
        // is nothing left to observe.
        let decommissioned = ending.state == ProvisioningState::Applied
            && ctx.state(|s| s.input.kind) == ProvisioningKind::Decommission;
        let observe = (applied && !decommissioned).then(|| {
            let input = ctx.state(|s| s.input.clone());
            observe_request(ctx, (&input.tenant_id, &input.environment_id))
        });
        // The observation's time on top of the record's.
        let timeout = match observe {
            Some(_) => PROJECT_TIMEOUT + RECORD_TIMEOUT,
            None => PROJECT_TIMEOUT,
        };
        let finish = Finish {
            capacity: held.capacity.map(Unlock::into_release),
            projection: Self::projection(ctx),
            environment: held.environment.into_release(),
            observe,
        };
        let opts = crate::options::must_succeed_locally(timeout);
        let observed = ctx
            .execute_local_activity(ProvisioningActivities::finish, finish, opts)
            .await?;
        let recorded_refusals = ctx.state(|s| s.status.refused_approvals.len());
        if let Some(outcome) = observed {
            // A superseded proposal not marked told is told again by the next record.
            let record = crate::options::given_up_after(RECORD_TIMEOUT, RECORD_BUDGET);
            let _ = hand_over(ctx, &outcome.superseded, outcome.new_proposal, record).await;
        }
        // An approval refused after the last transition (sent while the run was applying,
        // or observing) is recorded too: the audit misses none.
        if ctx.state(|s| s.status.refused_approvals.len()) > recorded_refusals {
            Self::project(ctx).await?;
        }
        Ok(())
    }
}

impl LockHolder for ProvisioningRun {
    fn holds(&self, semaphore_id: &str) -> bool {
        self.granted.iter().any(|g| g == semaphore_id)
    }

    fn grant(&mut self, semaphore_id: &str) {
        if !self.holds(semaphore_id) {
            self.granted.push(semaphore_id.to_owned());
        }
    }

    fn gives_up(&self) -> bool {
        self.cancel.is_some()
    }
}

/// Workflow time as a timestamp (deterministic: the time of the current workflow task).
fn now(time: Option<std::time::SystemTime>) -> chrono::DateTime<chrono::Utc> {
    time.map(chrono::DateTime::<chrono::Utc>::from)
        .unwrap_or_default()
}

/// Starts run `run` as a child of the workflow of `ctx` (its search attributes and its
/// tenant's fairness key set at start) and waits for where it ended: how a proposal, a
/// lifetime and an off-boarding order follow the run they recorded.
pub(crate) async fn follow_as_child<W>(
    ctx: &mut WorkflowContext<W>,
    run: RunInput,
) -> WorkflowResult<RunStatus> {
    let opts = temporalio_sdk::ChildWorkflowOptions::builder()
        .workflow_id(crate::ids::run_workflow_id(&run.run_id))
        .search_attributes(temporalio_common::search_attributes::SearchAttributes::new(
            run_attributes(&run),
        ))
        .priority(crate::fairness::of_tenant(&run.tenant_id))
        .build();
    let started = ctx
        .start_child_workflow(ProvisioningRun::run, run, opts)
        .await?;
    Ok(started.result().await?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::messages::Granted;
    use temporalio_common::SignalDefinition;

    /// A semaphore grants by name; the run must answer to it.
    #[test]
    fn the_run_answers_to_a_semaphores_grant() {
        assert_eq!(ProvisioningRun::granted.name(), Granted.name());
    }
}
