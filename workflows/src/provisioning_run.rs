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
//! Before it plans, the run takes a capacity lease for its project (`waitingForCapacity`
//! while the quota's `concurrentRuns` are all held, or while no worker serves its
//! environment's pool); a project whose day's execution minutes are spent gets none, and the
//! run ends `Rejected` unplanned. The lease is released when the run ends.
//!
//! Between the approval and the apply the run waits for the environment's change windows to
//! open (`waitingForWindow`), unless an Operator breaks glass with a reason.
//!
//! [`ProvisioningRun::run`] takes the environment's lock and then its project's capacity, runs
//! the stages in order, records where they ended as it lets both go, and (after an apply)
//! observes the environment again in the same step. Each stage is one
//! small function that goes on to the next or ends the run in a state. Every transition is
//! projected into the read tables with its event before the run waits on anything or acts on
//! its target, so a reader never sees an apply whose plan is not recorded. A state the run goes
//! straight on from (`Planned`, when the policies allow, no approval is needed and the windows
//! are open) is projected with the next one, in one write.

use crate::contracts::{
    ApplyRequest, CapacityActivities, DecideOnPlan, Finish, Gate, LeaseAnswer, LeaseMove,
    LeaseRequest, PlanRequest, PolicyInput, PoolQuery, ProvisioningActivities, RecordOutcome,
    RunProjection, TurnRequest, WindowQuery,
};
use crate::handover::hand_over;
use crate::ids::{capacity_semaphore_id, environment_lock_id, pool_task_queue};
use crate::observe_environment::observe_request;
use crate::search_attributes::{PROVISIONING_STATE, TENANT_ID, run_attributes};
use crate::semaphore::{self, LockHolder, Turn, Unlock};
use runtime_cloud_models::approvals::{ApprovalClaim, ClaimOutcome};
use runtime_cloud_models::capacity::{CapacityHold, CapacityWait, LeaseState};
use runtime_cloud_models::policy::{PolicyEnvironment, PolicyRun};
use runtime_cloud_models::{
    ApplyReceipt, ApplyResult, Approval, ApprovalDecision, ApprovalRecord, BreakGlass, PlanReceipt,
    ProvisioningState, RefusalReason, RefusedApproval, RunInput, RunStatus, WindowWait, can_move,
    cancellable, weigh_approval,
};
use serde::{Deserialize, Serialize};
use std::time::Duration;
use temporalio_macros::{workflow, workflow_methods};
use temporalio_sdk::{
    ActivityExecutionError, SyncWorkflowContext, TimeoutType, WorkflowContext, WorkflowContextView,
    WorkflowResult,
};

/// Each attempt of a projection.
const PROJECT_TIMEOUT: Duration = Duration::from_secs(30);
/// Each attempt to claim an approval.
const CLAIM_TIMEOUT: Duration = Duration::from_secs(30);
/// Each attempt of the policies' decision.
const POLICY_TIMEOUT: Duration = Duration::from_secs(30);
/// How long the policies are asked in the run's workflow task before a scheduled activity
/// waits for them instead.
const POLICY_LOCAL_BUDGET: Duration = Duration::from_secs(20);
/// Each attempt to read the change windows.
const WINDOW_TIMEOUT: Duration = Duration::from_secs(30);
/// A run held by a change window looks again at least this often: windows may be changed or
/// removed while it waits.
const WINDOW_RECHECK: Duration = Duration::from_secs(300);
/// How long the observation after the apply may take (three reads of the target at most, then
/// the record), in the finish's attempt, and how long to keep trying to mark the proposals it
/// superseded told.
const RECORD_TIMEOUT: Duration = Duration::from_secs(120);
const RECORD_BUDGET: Duration = Duration::from_secs(300);
/// Each attempt to ask for, move or read capacity.
const CAPACITY_TIMEOUT: Duration = Duration::from_secs(30);
/// A run whose pool has no worker looks again this often.
const POOL_RECHECK: Duration = Duration::from_secs(5);

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

/// An approval that arrived before the run awaited approval, with when it arrived.
#[derive(Debug, Clone)]
struct HeldApproval {
    approval: Approval,
    received_at: chrono::DateTime<chrono::Utc>,
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
    /// The state the `ProvisioningState` search attribute last said ([`Self::show_state`]).
    shown_state: Option<ProvisioningState>,
    /// The statuses of the states the run went on from since its last projection, oldest
    /// first ([`Self::pass_through`]).
    passed: Vec<RunStatus>,
    /// The change windows' gate read with the policies' decision: the window stage's first
    /// look, unless the run waited on something since ([`Self::before_waiting`] drops it).
    window_read: Option<Gate>,
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

/// The result of a stage that went on; returns from the caller with the ending otherwise.
macro_rules! go_on {
    ($stage:expr) => {
        match $stage? {
            Stage::GoOn(value) => value,
            Stage::End(ending) => return Ok(ending),
        }
    };
}

/// How the wait for an operator ended.
enum Wait {
    Decided(Approval),
    Expired,
    Cancelled,
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
            shown_state: None,
            passed: Vec::new(),
            window_read: None,
        }
    }

    /// Runs the whole plan-and-apply and returns the final status.
    #[run]
    pub async fn run(ctx: &mut WorkflowContext<Self>) -> WorkflowResult<RunStatus> {
        let input = ctx.state(|s| s.input.clone());
        // The API and the workflows that start runs set these at start; a run started by
        // hand (a promotion calling Temporal directly) sets them itself.
        if ctx.search_attributes().get(&TENANT_ID).is_none() {
            ctx.upsert_search_attributes(run_attributes(&input));
        }

        // The environment's lock and, when it is free, the capacity lease, in one local
        // activity: most runs find their environment free.
        let lock_id = environment_lock_id(&input.tenant_id, &input.environment_id);
        let lock = semaphore::slot_request(ctx, &input.tenant_id, lock_id, 1, false);
        let turn = TurnRequest {
            lock: lock.clone(),
            lease: Self::lease_request(ctx, &input),
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
        let (ending, capacity) = match turn {
            Turn::Ours => Self::leased(ctx, &input, answer.lease).await?,
            Turn::GaveUp => {
                Self::release_deferred_lease(ctx, &input).await?;
                (Self::cancelled(ctx), None)
            }
        };
        let observed = Self::end(ctx, ending, capacity, environment).await?;
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
        Ok(ctx.state(|s| s.status.clone()))
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
    /// that was free) and runs the stages under it; answers how the run ended and the capacity
    /// slot to give back with its ending. A project whose day's minutes are spent ends the run
    /// `Rejected` before it plans.
    async fn leased(
        ctx: &mut WorkflowContext<Self>,
        input: &RunInput,
        asked: Option<LeaseAnswer>,
    ) -> WorkflowResult<(Ending, Option<Unlock>)> {
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
                return Ok((Ending::new(ProvisioningState::Rejected, reason), None));
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
                    return Ok((Self::cancelled(ctx), None));
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
        let ending = match turn {
            // The lease was granted with the slot, in the same transaction.
            Turn::Ours => {
                // A deferred run's row shows the wait the API wrote.
                if input.lease_id.is_some()
                    || ctx.state(|s| s.status.waiting_for_capacity.is_some())
                {
                    ctx.state_mut(|s| s.status.waiting_for_capacity = None);
                    Self::project(ctx).await?;
                }
                Self::stages(ctx, input).await?
            }
            Turn::GaveUp => Self::cancelled(ctx),
        };
        Ok((ending, Some(unlock)))
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

    /// Shows what holds the run (`waitingForCapacity`) in the read tables.
    async fn wait_visibly(
        ctx: &mut WorkflowContext<Self>,
        wait: CapacityWait,
    ) -> WorkflowResult<()> {
        ctx.state_mut(|s| s.status.waiting_for_capacity = Some(wait));
        Self::project(ctx).await
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

    /// The stages, in the diagram's order, once the run holds its environment and its lease.
    async fn stages(ctx: &mut WorkflowContext<Self>, input: &RunInput) -> WorkflowResult<Ending> {
        let plan = go_on!(Self::plan(ctx, input).await);
        go_on!(Self::policy_stage(ctx, input, &plan).await);
        go_on!(Self::approval_stage(ctx, input, &plan).await);
        go_on!(Self::window_stage(ctx, input).await);
        Self::apply(ctx, input, plan).await
    }

    /// `Planned`: the plan is recorded before anything else can happen. A plan that fails
    /// ends the run `Failed`.
    async fn plan(
        ctx: &mut WorkflowContext<Self>,
        input: &RunInput,
    ) -> WorkflowResult<Stage<PlanReceipt>> {
        let request = PlanRequest {
            run_id: input.run_id.clone(),
            tenant_id: input.tenant_id.clone(),
            environment_id: input.environment_id.clone(),
            specification: input.specification.clone(),
            limits: ctx.state(|s| s.limits),
        };
        let mut opts = crate::options::plan();
        opts.task_queue = ctx.state(|s| s.pool_queue.clone());
        let plan = match ctx
            .execute_activity(ProvisioningActivities::plan, request, opts)
            .await
        {
            Ok(plan) => plan,
            Err(e) => {
                return Ok(Stage::End(Ending::new(
                    ProvisioningState::Failed,
                    failure_reason(&e),
                )));
            }
        };
        ctx.state_mut(|s| s.status.plan_receipt = Some(plan.clone()));
        Self::pass_through(ctx, ProvisioningState::Planned);
        Ok(Stage::GoOn(plan))
    }

    /// The policies decide on the plan before anything else can happen to it (recorded as the
    /// run's `policy`): a deny ends the run `Rejected` with the policies' messages. A policy
    /// engine that cannot answer holds the run (retried): a plan is never applied undecided.
    /// The change windows are read with the decision, for the window stage's first look.
    async fn policy_stage(
        ctx: &mut WorkflowContext<Self>,
        input: &RunInput,
        plan: &PlanReceipt,
    ) -> WorkflowResult<Stage> {
        let asked = PolicyInput {
            tenant_id: input.tenant_id.clone(),
            environment: PolicyEnvironment {
                environment_id: input.environment_id.clone(),
                project_id: input.project_id.clone(),
                class: input.environment_class,
            },
            run: PolicyRun {
                run_id: input.run_id.clone(),
                kind: input.kind,
            },
            specification: input.specification.clone(),
            plan: plan.clone(),
            observed: Vec::new(),
        };
        // A local activity: reads and a decision, run in the workflow task the plan's result
        // opened, which then goes on to the gate and the apply (a workflow task and an
        // activity task fewer per run than a scheduled activity, docs/benchmarks.md). An
        // engine that does not answer within [`POLICY_LOCAL_BUDGET`] is waited for by a
        // scheduled activity: a local activity retried for hours would heartbeat its workflow
        // task every few seconds and grow the run's history without bound.
        let local = crate::options::given_up_after(POLICY_TIMEOUT, POLICY_LOCAL_BUDGET);
        let at = now(ctx.workflow_time());
        let both = DecideOnPlan {
            policy: asked.clone(),
            window: WindowQuery {
                tenant_id: input.tenant_id.clone(),
                environment_id: input.environment_id.clone(),
                at,
            },
        };
        let decision = match ctx
            .execute_local_activity(ProvisioningActivities::decide_on_plan, both, local)
            .await
        {
            Ok(decided) => {
                ctx.state_mut(|s| s.window_read = Some(decided.window));
                decided.policy
            }
            Err(_) => {
                Self::before_waiting(ctx).await?;
                ctx.execute_activity(
                    ProvisioningActivities::evaluate_policy,
                    asked,
                    crate::options::must_succeed(POLICY_TIMEOUT),
                )
                .await?
            }
        };
        let denied = (!decision.deny.is_empty())
            .then(|| format!("denied by policy: {}", decision.deny.join("; ")));
        ctx.state_mut(|s| s.status.policy = Some(decision));
        match denied {
            Some(reason) => Ok(Stage::End(Ending::new(ProvisioningState::Rejected, reason))),
            None => Ok(Stage::GoOn(())),
        }
    }

    /// The production gate: it opens only on an approval the Approvals port verifies and
    /// spends on this run, the one the request names or the one behind an operator's
    /// decision, or on a policy allow for a baseline or reconciliation that deletes nothing
    /// (recorded with its evidence). A production run without one (or whose named approval
    /// does not verify)
    /// waits in `AwaitingApproval` for a decision, a cancel or the expiry. Every other run
    /// goes straight on.
    async fn approval_stage(
        ctx: &mut WorkflowContext<Self>,
        input: &RunInput,
        plan: &PlanReceipt,
    ) -> WorkflowResult<Stage> {
        if ctx.state(|s| s.cancel.is_some()) {
            return Ok(Stage::End(Self::cancelled(ctx)));
        }
        if !input.needs_approval() {
            ctx.state_mut(|s| {
                s.status.approval = s.input.approval_id.clone().map(ApprovalRecord::named);
                s.weigh_held(false);
            });
            return Ok(Stage::GoOn(()));
        }
        if let Some(id) = &input.approval_id {
            let named = Approval::named(id, &plan.inputs_hash);
            if Self::spend(ctx, input, plan, named).await? {
                ctx.state_mut(|s| s.weigh_held(false));
                return Ok(Stage::GoOn(()));
            }
        }
        // The spec's second path: a policy allow, with evidence, for a baseline or a
        // reconciliation that deletes nothing.
        let allowed = ctx.state(|s| {
            s.status
                .policy
                .clone()
                .filter(|d| d.opens_production_gate(input.kind, plan))
        });
        if let Some(decision) = allowed {
            ctx.state_mut(|s| {
                s.status.approval = Some(ApprovalRecord::by_policy(decision));
                s.weigh_held(false);
            });
            return Ok(Stage::GoOn(()));
        }
        ctx.state_mut(|s| s.weigh_held(true));
        Self::transition(ctx, ProvisioningState::AwaitingApproval).await?;
        let wait = chrono::Duration::seconds(input.approval_timeout_secs as i64);
        let expires = now(ctx.workflow_time()) + wait;
        loop {
            // A timer needs a duration; one second past the expiry is still expired.
            let left = (expires - now(ctx.workflow_time()))
                .to_std()
                .unwrap_or_default()
                .max(Duration::from_secs(1));
            let approval = match Self::wait_for_decision(ctx, left).await? {
                Wait::Cancelled => return Ok(Stage::End(Self::cancelled(ctx))),
                Wait::Expired => {
                    ctx.state_mut(|s| s.status.approval = Some(ApprovalRecord::expired()));
                    let ending = Ending::new(ProvisioningState::Rejected, "approval expired");
                    return Ok(Stage::End(ending));
                }
                Wait::Decided(approval) => approval,
            };
            if approval.decision == ApprovalDecision::Reject {
                let reason = format!("rejected by {}: {}", approval.approver, approval.reason);
                ctx.state_mut(|s| s.status.approval = Some(ApprovalRecord::decided(approval)));
                return Ok(Stage::End(Ending::new(ProvisioningState::Rejected, reason)));
            }
            if Self::spend(ctx, input, plan, approval).await? {
                return Ok(Stage::GoOn(()));
            }
            // Refused and recorded: show it, and wait for another decision.
            ctx.state_mut(|s| s.decision = None);
            Self::project(ctx).await?;
        }
    }

    /// Claims the recorded approval behind `approval` for this run and this plan (the
    /// Approvals port verifies and spends it). True when it verified: the run records who
    /// granted it. False when not: it is kept in `refusedApprovals` with the reason.
    async fn spend(
        ctx: &mut WorkflowContext<Self>,
        input: &RunInput,
        plan: &PlanReceipt,
        approval: Approval,
    ) -> WorkflowResult<bool> {
        let at = now(ctx.workflow_time());
        let Some(approval_id) = approval.approval_id.clone() else {
            ctx.state_mut(|s| s.refuse(approval, at, RefusalReason::NotRecorded));
            return Ok(false);
        };
        let claim = ApprovalClaim {
            approval_id: approval_id.clone(),
            tenant_id: input.tenant_id.clone(),
            environment_id: input.environment_id.clone(),
            environment_class: input.environment_class,
            run_id: input.run_id.clone(),
            inputs_hash: Some(plan.inputs_hash.clone()),
            at,
        };
        Self::before_waiting(ctx).await?;
        let outcome = ctx
            .execute_activity(
                ProvisioningActivities::claim_approval,
                claim,
                crate::options::must_succeed(CLAIM_TIMEOUT),
            )
            .await?;
        match outcome {
            ClaimOutcome::Spent { approval: recorded } => {
                let granted = Approval {
                    decision: ApprovalDecision::Approve,
                    approver: recorded.granted_by,
                    reason: recorded.reason,
                    inputs_hash: plan.inputs_hash.clone(),
                    approval_id: Some(approval_id),
                };
                ctx.state_mut(|s| s.status.approval = Some(ApprovalRecord::decided(granted)));
                Ok(true)
            }
            ClaimOutcome::Refused { why } => {
                ctx.state_mut(|s| s.refuse(approval, at, why));
                Ok(false)
            }
        }
    }

    /// The change windows: the apply waits while they are closed (`waitingForWindow`, with the
    /// window and when it opens), looking again when it opens and at least every
    /// [`WINDOW_RECHECK`]; a cancel ends the run, an Operator's break-glass lets it go at once
    /// (recorded on the run, with the window it broke).
    async fn window_stage(
        ctx: &mut WorkflowContext<Self>,
        input: &RunInput,
    ) -> WorkflowResult<Stage> {
        loop {
            if ctx.state(|s| s.cancel.is_some()) {
                return Ok(Stage::End(Self::cancelled(ctx)));
            }
            let at = now(ctx.workflow_time());
            // Read with the policies' decision, and the run has not waited since.
            let gate = match ctx.state_mut(|s| s.window_read.take()) {
                Some(gate) => gate,
                None => {
                    let query = WindowQuery {
                        tenant_id: input.tenant_id.clone(),
                        environment_id: input.environment_id.clone(),
                        at,
                    };
                    let opts = crate::options::must_succeed_locally(WINDOW_TIMEOUT);
                    ctx.execute_local_activity(ProvisioningActivities::change_window, query, opts)
                        .await?
                }
            };
            let Gate::Closed {
                window_id,
                opens_at,
            } = gate
            else {
                if ctx.state(|s| s.status.waiting_for_window.is_some()) {
                    ctx.state_mut(|s| s.status.waiting_for_window = None);
                    Self::project(ctx).await?;
                }
                return Ok(Stage::GoOn(()));
            };
            if let Some(mut glass) = ctx.state_mut(|s| s.break_glass.take()) {
                glass.window_id = Some(window_id);
                glass.at = Some(at);
                ctx.state_mut(|s| {
                    s.status.waiting_for_window = None;
                    s.status.break_glass = Some(glass);
                });
                Self::project(ctx).await?;
                return Ok(Stage::GoOn(()));
            }
            let wait = WindowWait {
                window_id,
                opens_at,
            };
            if ctx.state(|s| s.status.waiting_for_window.as_ref() != Some(&wait)) {
                ctx.state_mut(|s| s.status.waiting_for_window = Some(wait));
                Self::project(ctx).await?;
            }
            Self::before_waiting(ctx).await?;
            let until_open = opens_at
                .and_then(|t| (t - at).to_std().ok())
                .unwrap_or(WINDOW_RECHECK)
                .clamp(Duration::from_secs(1), WINDOW_RECHECK);
            temporalio_sdk::workflows::select! {
                r = ctx.wait_condition(|s| s.break_glass.is_some() || s.cancel.is_some()) => { r?; }
                _ = ctx.timer(until_open) => {}
            };
        }
    }

    /// `Applying` → `Applied` | `Failed`, with the immutable receipt. From here on the run
    /// cannot be cancelled.
    async fn apply(
        ctx: &mut WorkflowContext<Self>,
        input: &RunInput,
        plan: PlanReceipt,
    ) -> WorkflowResult<Ending> {
        Self::transition(ctx, ProvisioningState::Applying).await?;
        Self::move_shown_state_on(ctx);
        let request = ApplyRequest {
            run_id: input.run_id.clone(),
            tenant_id: input.tenant_id.clone(),
            environment_id: input.environment_id.clone(),
            specification: input.specification.clone(),
            plan,
            limits: ctx.state(|s| s.limits),
        };
        let mut opts = crate::options::apply(input.apply_timeout_secs);
        opts.task_queue = ctx.state(|s| s.pool_queue.clone());
        let receipt = match ctx
            .execute_activity(ProvisioningActivities::apply, request, opts)
            .await
        {
            Ok(receipt) => receipt,
            Err(e) => ApplyReceipt {
                outputs: serde_json::Value::Null,
                duration_ms: 0,
                result: ApplyResult::Failed,
                runner_version: String::new(),
                reason: Some(apply_failure_reason(&e, input.apply_timeout_secs)),
            },
        };
        let state = match receipt.result {
            ApplyResult::Succeeded => ProvisioningState::Applied,
            ApplyResult::Failed => ProvisioningState::Failed,
        };
        let reason = receipt.reason.clone();
        ctx.state_mut(|s| s.status.apply_receipt = Some(receipt));
        Ok(Ending { state, reason })
    }

    /// Waits for a decision, a cancel or the expiry. A cancel that arrives with a decision
    /// wins: nothing has been applied yet.
    async fn wait_for_decision(
        ctx: &mut WorkflowContext<Self>,
        expiry: Duration,
    ) -> WorkflowResult<Wait> {
        Self::before_waiting(ctx).await?;
        let decided = temporalio_sdk::workflows::select! {
            r = ctx.wait_condition(|s| s.decision.is_some() || s.cancel.is_some()) => { r?; true }
            _ = ctx.timer(expiry) => false,
        };
        Ok(ctx.state(|s| match (&s.cancel, &s.decision) {
            (Some(_), _) => Wait::Cancelled,
            (None, Some(approval)) if decided => Wait::Decided(approval.clone()),
            _ => Wait::Expired,
        }))
    }

    /// The ending of a cancelled run, naming who cancelled and why.
    fn cancelled(ctx: &WorkflowContext<Self>) -> Ending {
        let cancel = ctx.state(|s| s.cancel.clone()).unwrap_or_default();
        let reason = format!("cancelled by {}: {}", cancel.by, cancel.reason);
        Ending::new(ProvisioningState::Cancelled, reason)
    }

    /// Records where the run ended and lets its semaphores go, in one local activity
    /// ([`Finish`]: its capacity first, its environment last). Approvals still held (the run
    /// ended before it could await one) are refused: none is dropped unrecorded.
    ///
    /// After an apply (or a failed one, to capture the partial state) the same local activity
    /// observes the environment again before it lets it go: that observation resolves the
    /// findings the apply fixed. What it recorded comes back, none if it was given up (the
    /// next sweep observes the environment within five minutes anyway).
    async fn end(
        ctx: &mut WorkflowContext<Self>,
        ending: Ending,
        capacity: Option<Unlock>,
        environment: Unlock,
    ) -> WorkflowResult<Option<RecordOutcome>> {
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
        let observe = applied.then(|| {
            let input = ctx.state(|s| s.input.clone());
            observe_request(ctx, (&input.tenant_id, &input.environment_id))
        });
        // The observation's time on top of the record's.
        let timeout = match observe {
            Some(_) => PROJECT_TIMEOUT + RECORD_TIMEOUT,
            None => PROJECT_TIMEOUT,
        };
        let finish = Finish {
            capacity: capacity.map(Unlock::into_release),
            projection: Self::projection(ctx),
            environment: environment.into_release(),
            observe,
        };
        let opts = crate::options::must_succeed_locally(timeout);
        Ok(ctx
            .execute_local_activity(ProvisioningActivities::finish, finish, opts)
            .await?)
    }

    /// Moves to `state`: the read tables and the event (the search attribute when the run
    /// waits next, [`Self::show_state`]).
    async fn transition(
        ctx: &mut WorkflowContext<Self>,
        state: ProvisioningState,
    ) -> WorkflowResult<()> {
        Self::set_state(ctx, state);
        Self::project(ctx).await
    }

    /// Moves to `state` and goes straight on: its status is projected, with its event, before
    /// the next state's in the same write ([`RunProjection::passed`]), or by
    /// [`Self::before_waiting`] if the run waits first.
    fn pass_through(ctx: &mut WorkflowContext<Self>, state: ProvisioningState) {
        Self::set_state(ctx, state);
        ctx.state_mut(|s| s.passed.push(s.status.clone()));
    }

    /// Before the run waits on anything outside it (a policy engine, an approval, a change
    /// window): the states it passed through are recorded, and the search attribute says
    /// where it waits.
    async fn before_waiting(ctx: &mut WorkflowContext<Self>) -> WorkflowResult<()> {
        // A gate read before the wait is stale after it.
        ctx.state_mut(|s| s.window_read = None);
        if ctx.state(|s| !s.passed.is_empty()) {
            Self::project(ctx).await?;
        }
        Self::show_state(ctx);
        Ok(())
    }

    /// Sets the run's state.
    fn set_state(ctx: &mut WorkflowContext<Self>, state: ProvisioningState) {
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
    fn show_state(ctx: &mut WorkflowContext<Self>) {
        let (state, shown) = ctx.state(|s| (s.status.state, s.shown_state));
        if let Some(state) = state
            && shown != Some(state)
        {
            ctx.upsert_search_attributes([PROVISIONING_STATE.value_set(state.as_str().to_owned())]);
            ctx.state_mut(|s| s.shown_state = Some(state));
        }
    }

    /// Moves the attribute on to the run's state where it says a wait the run has left (it
    /// applies after an approval or a window), so it never says a state the run has left. A
    /// run that never waited shows none until it ends: an `Applying` would cost every run an
    /// event and a visibility write on the server (docs/benchmarks.md, section 1), and
    /// the read API answers which runs apply (`GET /factory/provisioning/runs?state=Applying`).
    fn move_shown_state_on(ctx: &mut WorkflowContext<Self>) {
        if ctx.state(|s| s.shown_state.is_some()) {
            Self::show_state(ctx);
        }
    }

    /// The run's status as the read tables take it, after those of the states it passed
    /// through since its last projection.
    fn projection(ctx: &mut WorkflowContext<Self>) -> RunProjection {
        ctx.state_mut(|s| RunProjection {
            run: s.input.clone(),
            passed: std::mem::take(&mut s.passed),
            status: s.status.clone(),
        })
    }

    /// Writes the run's status into the read tables, with the event of its state.
    async fn project(ctx: &mut WorkflowContext<Self>) -> WorkflowResult<()> {
        let projection = Self::projection(ctx);
        let opts = crate::options::must_succeed_locally(PROJECT_TIMEOUT);
        ctx.execute_local_activity(ProvisioningActivities::project, projection, opts)
            .await?;
        Ok(())
    }

    /// Signal `granted`: sent by a semaphore (the environment's lock, the project's capacity)
    /// when it is this run's turn; the payload names the semaphore.
    #[signal]
    pub fn granted(&mut self, _ctx: &mut SyncWorkflowContext<Self>, semaphore_id: String) {
        if !self.granted.contains(&semaphore_id) {
            self.granted.push(semaphore_id);
        }
    }

    /// Signal `approval`: an operator approves or rejects the recorded plan.
    ///
    /// An approval that arrives before the run awaits approval is held and weighed when it
    /// does (see [`Self::weigh_held`]); any other is weighed at once. What is not counted is
    /// kept in `refusedApprovals` with the reason, and changes nothing.
    #[signal]
    pub fn approval(&mut self, ctx: &mut SyncWorkflowContext<Self>, approval: Approval) {
        let received_at = now(ctx.workflow_time());
        match self.status.state {
            None | Some(ProvisioningState::Planned) => self.held_approvals.push(HeldApproval {
                approval,
                received_at,
            }),
            Some(state) => {
                let awaiting = state == ProvisioningState::AwaitingApproval;
                self.weigh(approval, received_at, awaiting);
            }
        }
    }

    /// Signal `cancel`: valid only before the apply starts.
    #[signal]
    pub fn cancel(&mut self, _ctx: &mut SyncWorkflowContext<Self>, request: CancelRequest) {
        if cancellable(self.status.state) && self.cancel.is_none() {
            self.cancel = Some(request);
        }
    }

    /// Signal `break_glass`: an Operator applies inside a closed change window, with the
    /// reason (the API refuses one without). Valid only before the apply starts; the first one
    /// counts.
    #[signal]
    pub fn break_glass(&mut self, _ctx: &mut SyncWorkflowContext<Self>, request: BreakGlass) {
        if cancellable(self.status.state)
            && self.break_glass.is_none()
            && self.status.break_glass.is_none()
        {
            self.break_glass = Some(request);
        }
    }

    /// Query `state`: the live status of the run.
    #[query]
    pub fn state(&self, _ctx: &WorkflowContextView) -> RunStatus {
        self.status.clone()
    }
}

impl ProvisioningRun {
    /// Counts `approval` or keeps it as refused, by the one approval rule
    /// ([`weigh_approval`]).
    fn weigh(
        &mut self,
        approval: Approval,
        received_at: chrono::DateTime<chrono::Utc>,
        awaiting: bool,
    ) {
        let plan = self.status.plan_receipt.as_ref();
        match weigh_approval(awaiting, plan, self.decision.is_some(), &approval) {
            Ok(()) => self.decision = Some(approval),
            Err(why) => self.refuse(approval, received_at, why),
        }
    }

    /// Keeps `approval` in `refusedApprovals`, with when it came and why it was not counted.
    fn refuse(
        &mut self,
        approval: Approval,
        received_at: chrono::DateTime<chrono::Utc>,
        why: RefusalReason,
    ) {
        self.status
            .refused_approvals
            .push(RefusedApproval::new(approval, received_at, why));
    }

    /// Weighs the approvals that arrived before the run awaited approval, in arrival order;
    /// a run that does not await approval (`awaiting` false) refuses them all.
    ///
    /// The read tables say `AwaitingApproval` as soon as the projection ran, which is before
    /// the workflow task that ran it is reported. A worker that dies in between hands the task
    /// on, and the next worker sees the plan's result and the operator's signal in one
    /// activation, signal first: refusing it then would leave the run waiting for an approval
    /// it already has. Holding it is safe because an approval names its plan's inputs hash.
    fn weigh_held(&mut self, awaiting: bool) {
        for held in std::mem::take(&mut self.held_approvals) {
            self.weigh(held.approval, held.received_at, awaiting);
        }
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

/// The message of the application failure behind an activity error.
/// Why an apply that returned no receipt failed. An attempt past its deadline is not retried
/// (the runner stops itself before it; one that could not has overrun `ApplyTimeoutMinutes`).
fn apply_failure_reason(e: &ActivityExecutionError, timeout_secs: u64) -> String {
    match e.as_timeout().map(|t| t.timeout_type()) {
        Some(TimeoutType::StartToClose) => format!(
            "the apply did not finish within ApplyTimeoutMinutes ({timeout_secs} s), and the \
             runner did not stop it in time; the target may still hold a lock"
        ),
        _ => failure_reason(e),
    }
}

fn failure_reason(e: &ActivityExecutionError) -> String {
    e.failure()
        .map(|f| match &f.cause {
            Some(cause) => cause.message.clone(),
            None => f.message.clone(),
        })
        .unwrap_or_else(|| e.to_string())
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
