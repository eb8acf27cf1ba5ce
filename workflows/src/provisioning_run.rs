//! `provisioning-run/{runId}`: plan → approval when production → apply → immutable receipts.
//!
//! The run first waits for its environment's lock, so it plans against the state the previous
//! run left. Every transition is projected into the read tables with its event before the run
//! moves on, so a reader never sees an apply whose plan is not recorded.

use crate::contracts::{
    APPLY_FAILED, ApplyRequest, LockRequest, PLAN_INVALID, PlanRequest, ProvisioningActivities,
    RunProjection,
};
use crate::environment_lock::EnvironmentLock;
use crate::observe_environment::{
    ObserveEnvironment, ObserveInput, hand_over, observe_locally, observe_workflow_id,
};
use crate::search_attributes::{PROVISIONING_STATE, TENANT_ID, run_attributes};
use runtime_cloud_models::{
    ApplyReceipt, ApplyResult, Approval, ApprovalDecision, ApprovalRecord, ProvisioningState,
    RunInput, RunStatus, environment_lock_workflow_id,
};
use serde::{Deserialize, Serialize};
use std::time::Duration;
use temporalio_common::data_converters::TemporalDeserializable;
use temporalio_common::{ActivityDefinition, RetryPolicy};
use temporalio_macros::{workflow, workflow_methods};
use temporalio_sdk::{
    ActivityExecutionError, ActivityOptions, ChildWorkflowOptions, LocalActivityOptions,
    ParentClosePolicy, SignalWorkflowOptions, SyncWorkflowContext, WorkflowContext,
    WorkflowContextView, WorkflowResult,
};

/// Patch id: runs recorded before observation existed end right after their receipt.
const OBSERVE_AFTER_APPLY: &str = "observe-after-apply";
/// Patch id: runs recorded before it ran their quick steps as regular activities.
const LOCAL_QUICK_STEPS: &str = "local-quick-steps";
/// Patch id: runs recorded before it refused an approval that arrived before the plan.
const HOLD_EARLY_APPROVALS: &str = "hold-early-approvals";
/// Patch id: runs recorded before it set their search attributes again at start, waited for a
/// signal even for a free lock, released it with a signal of their own, and observed after the
/// apply in a child workflow. Under it a run costs the Temporal server about half as much
/// (docs/benchmarks.md); it also stands for the three patches above, so a new run records one
/// marker instead of three.
const LEAN_RUN: &str = "lean-run";
/// Each attempt to record the observation after the apply, and how long to keep trying.
const RECORD_TIMEOUT: Duration = Duration::from_secs(60);
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
    lock_granted: bool,
    cancel: Option<CancelRequest>,
    approval: Option<Approval>,
    /// Approvals that arrived before the run awaited approval; weighed when it does.
    early_approvals: Vec<Approval>,
    /// Approvals that named another plan or came at the wrong time; kept for the audit.
    refused_approvals: Vec<Approval>,
    /// Recorded under `lean-run` (fixed at the start of the run).
    lean: bool,
}

/// How a wait ended.
enum Wake {
    Ready,
    Cancelled,
    Expired,
}

#[workflow_methods]
impl ProvisioningRun {
    /// Takes the run's fixed input.
    #[init]
    pub fn new(_ctx: &WorkflowContextView, input: RunInput) -> Self {
        Self {
            input,
            status: RunStatus::default(),
            lock_granted: false,
            cancel: None,
            approval: None,
            early_approvals: Vec::new(),
            refused_approvals: Vec::new(),
            lean: false,
        }
    }

    /// Runs the whole plan-and-apply and returns the final status.
    #[run]
    pub async fn run(ctx: &mut WorkflowContext<Self>) -> WorkflowResult<RunStatus> {
        let input = ctx.state(|s| s.input.clone());
        let lean = ctx.patched(LEAN_RUN);
        ctx.state_mut(|s| s.lean = lean);
        // The API and the workflows that start runs set these at start.
        let set_at_start = ctx.search_attributes().get(&TENANT_ID).is_some();
        if !(lean && set_at_start) {
            ctx.upsert_search_attributes(run_attributes(&input));
        }
        let lock = LockRequest {
            lock_workflow_id: environment_lock_workflow_id(&input.tenant_id, &input.environment_id),
            requester_workflow_id: ctx.workflow_id().to_owned(),
        };

        let result = Self::plan_and_apply(ctx, &input, lock.clone()).await;

        // Whatever happened, let the next run on this environment go. The lock may already be
        // gone (it ends when idle), so a failed release is fine.
        if lean {
            Self::quick_step(ctx, ProvisioningActivities::release_lock, lock).await?;
        } else {
            let me = ctx.workflow_id().to_owned();
            let _ = ctx
                .external_workflow(lock.lock_workflow_id, None)
                .signal(
                    EnvironmentLock::release,
                    me,
                    SignalWorkflowOptions::default(),
                )
                .await;
        }
        result?;

        // After an apply (or a failed one, to capture the partial state) observe the
        // environment again: that observation resolves the findings the apply fixed.
        let state = ctx.state(|s| s.status.state);
        let applied = matches!(
            state,
            Some(ProvisioningState::Applied | ProvisioningState::Failed)
        );
        if applied && lean {
            // In this workflow task, as local activities: no second workflow per run.
            // Its record is given up after a while: a run is over once applied, and the next
            // sweep observes the environment within five minutes anyway.
            let target = (input.tenant_id.as_str(), input.environment_id.as_str());
            let record = crate::retries::retried_locally_for(RECORD_TIMEOUT, RECORD_BUDGET);
            if let Ok(outcome) = observe_locally(ctx, target, record).await {
                hand_over(ctx, &outcome.superseded, outcome.new_proposal).await;
            }
        } else if applied && ctx.patched(OBSERVE_AFTER_APPLY) {
            let observe = ObserveInput {
                tenant_id: input.tenant_id.clone(),
                environment_id: input.environment_id.clone(),
            };
            let id = observe_workflow_id(
                &input.tenant_id,
                &input.environment_id,
                &format!("after-{}", input.run_id),
            );
            let opts = ChildWorkflowOptions::builder()
                .workflow_id(id)
                .parent_close_policy(ParentClosePolicy::Abandon)
                .build();
            let _ = ctx
                .start_child_workflow(ObserveEnvironment::run, observe, opts)
                .await;
        }
        Ok(ctx.state(|s| s.status.clone()))
    }

    async fn plan_and_apply(
        ctx: &mut WorkflowContext<Self>,
        input: &RunInput,
        lock: LockRequest,
    ) -> WorkflowResult<()> {
        // 1. Wait for our turn on the environment. A free lock is taken at once.
        if ctx.state(|s| s.lean) {
            let held = Self::quick_step(ctx, ProvisioningActivities::acquire_lock, lock).await?;
            ctx.state_mut(|s| s.lock_granted |= held);
        } else {
            Self::quick_step(ctx, ProvisioningActivities::request_lock, lock).await?;
        }
        if let Wake::Cancelled = Self::wait(ctx, |s| s.lock_granted, None).await? {
            return Self::finish_cancelled(ctx).await;
        }

        // 2. Plan, and record the plan before anything else can happen.
        let plan_request = PlanRequest {
            run_id: input.run_id.clone(),
            tenant_id: input.tenant_id.clone(),
            environment_id: input.environment_id.clone(),
            specification: input.specification.clone(),
        };
        let plan = match ctx
            .execute_activity(ProvisioningActivities::plan, plan_request, plan_opts())
            .await
        {
            Ok(plan) => plan,
            Err(e) => {
                return Self::finish(ctx, ProvisioningState::Failed, Some(failure_reason(&e)))
                    .await;
            }
        };
        ctx.state_mut(|s| s.status.plan_receipt = Some(plan.clone()));
        Self::transition(ctx, ProvisioningState::Planned).await?;

        // 3. Production without an approval in the request waits for an operator.
        if ctx.state(|s| s.cancel.is_some()) {
            return Self::finish_cancelled(ctx).await;
        }
        ctx.state_mut(|s| {
            s.status.approval = s.input.approval_id.clone().map(|id| ApprovalRecord {
                approval_id: Some(id),
                decision: None,
                expired: false,
            })
        });
        if input.needs_approval() {
            Self::weigh_early_approvals(ctx);
            Self::transition(ctx, ProvisioningState::AwaitingApproval).await?;
            let expiry = Duration::from_secs(input.approval_timeout_secs);
            match Self::wait(ctx, |s| s.approval.is_some(), Some(expiry)).await? {
                Wake::Cancelled => return Self::finish_cancelled(ctx).await,
                Wake::Expired => {
                    ctx.state_mut(|s| {
                        s.status.approval = Some(ApprovalRecord {
                            approval_id: None,
                            decision: None,
                            expired: true,
                        })
                    });
                    let reason = "approval expired".to_owned();
                    return Self::finish(ctx, ProvisioningState::Rejected, Some(reason)).await;
                }
                Wake::Ready => {}
            }
            let approval = ctx
                .state(|s| s.approval.clone())
                .unwrap_or_else(unreachable_approval);
            ctx.state_mut(|s| {
                s.status.approval = Some(ApprovalRecord {
                    approval_id: None,
                    decision: Some(approval.clone()),
                    expired: false,
                })
            });
            if approval.decision == ApprovalDecision::Reject {
                let reason = format!("rejected by {}: {}", approval.approver, approval.reason);
                return Self::finish(ctx, ProvisioningState::Rejected, Some(reason)).await;
            }
        }

        // 4. Apply. From here on the run cannot be cancelled.
        Self::transition(ctx, ProvisioningState::Applying).await?;
        let apply_request = ApplyRequest {
            run_id: input.run_id.clone(),
            tenant_id: input.tenant_id.clone(),
            environment_id: input.environment_id.clone(),
            specification: input.specification.clone(),
            plan,
        };
        let opts = apply_opts(input.apply_timeout_secs);
        match ctx
            .execute_activity(ProvisioningActivities::apply, apply_request, opts)
            .await
        {
            Ok(receipt) => {
                let state = match receipt.result {
                    ApplyResult::Succeeded => ProvisioningState::Applied,
                    ApplyResult::Failed => ProvisioningState::Failed,
                };
                let reason = receipt.reason.clone();
                ctx.state_mut(|s| s.status.apply_receipt = Some(receipt));
                Self::finish(ctx, state, reason).await
            }
            Err(e) => {
                let reason = failure_reason(&e);
                ctx.state_mut(|s| {
                    s.status.apply_receipt = Some(ApplyReceipt {
                        outputs: serde_json::Value::Null,
                        duration_ms: 0,
                        result: ApplyResult::Failed,
                        runner_version: String::new(),
                        reason: Some(reason.clone()),
                    })
                });
                Self::finish(ctx, ProvisioningState::Failed, Some(reason)).await
            }
        }
    }

    /// Waits until `ready`, a cancel request, or the optional expiry.
    async fn wait(
        ctx: &mut WorkflowContext<Self>,
        ready: fn(&Self) -> bool,
        expiry: Option<Duration>,
    ) -> WorkflowResult<Wake> {
        let wake = match expiry {
            None => {
                ctx.wait_condition(move |s| ready(s) || s.cancel.is_some())
                    .await?;
                Wake::Ready
            }
            Some(expiry) => {
                temporalio_sdk::workflows::select! {
                    r = ctx.wait_condition(move |s| ready(s) || s.cancel.is_some()) => { r?; Wake::Ready }
                    _ = ctx.timer(expiry) => Wake::Expired,
                }
            }
        };
        // A cancel that arrived with the wake-up wins: nothing has been applied yet.
        if ctx.state(|s| s.cancel.is_some()) {
            return Ok(Wake::Cancelled);
        }
        Ok(wake)
    }

    /// Weighs the approvals that arrived before the run awaited approval, in arrival order.
    ///
    /// The read tables say `AwaitingApproval` as soon as the projection ran, which is before
    /// the workflow task that ran it is reported. A worker that dies in between hands the task
    /// on, and the next worker sees the plan's result and the operator's signal in one
    /// activation, signal first: refusing it then would leave the run waiting for an approval
    /// it already has. Holding it is safe because an approval names its plan's inputs hash.
    fn weigh_early_approvals(ctx: &mut WorkflowContext<Self>) {
        let early = ctx.state_mut(|s| std::mem::take(&mut s.early_approvals));
        if early.is_empty() {
            return;
        }
        let hold = ctx.state(|s| s.lean) || ctx.patched(HOLD_EARLY_APPROVALS);
        ctx.state_mut(|s| {
            for approval in early {
                if hold {
                    s.weigh(approval);
                } else {
                    s.refused_approvals.push(approval);
                }
            }
        });
    }

    /// Counts `approval` when it names the recorded plan and none was counted yet.
    fn weigh(&mut self, approval: Approval) {
        let same_plan = self.status.plan_receipt.as_ref().map(|p| p.inputs_hash.as_str())
            == Some(approval.inputs_hash.as_str());
        if same_plan && self.approval.is_none() {
            self.approval = Some(approval);
        } else {
            self.refused_approvals.push(approval);
        }
    }

    async fn finish_cancelled(ctx: &mut WorkflowContext<Self>) -> WorkflowResult<()> {
        let cancel = ctx.state(|s| s.cancel.clone()).unwrap_or_default();
        let reason = format!("cancelled by {}: {}", cancel.by, cancel.reason);
        Self::finish(ctx, ProvisioningState::Cancelled, Some(reason)).await
    }

    async fn finish(
        ctx: &mut WorkflowContext<Self>,
        state: ProvisioningState,
        reason: Option<String>,
    ) -> WorkflowResult<()> {
        ctx.state_mut(|s| s.status.reason = reason);
        Self::transition(ctx, state).await
    }

    /// Moves to `state`: search attribute, then the read tables and the event.
    async fn transition(
        ctx: &mut WorkflowContext<Self>,
        state: ProvisioningState,
    ) -> WorkflowResult<()> {
        ctx.state_mut(|s| s.status.state = Some(state));
        ctx.upsert_search_attributes([PROVISIONING_STATE.value_set(state.as_str().to_owned())]);
        let projection = ctx.state(|s| RunProjection {
            run: s.input.clone(),
            status: s.status.clone(),
        });
        Self::quick_step(ctx, ProvisioningActivities::project, projection).await?;
        Ok(())
    }

    /// A quick step: taking, asking for or releasing the lock, or a projection; a short
    /// idempotent write.
    ///
    /// Quick steps run as local activities, inside the workflow task that needs them: no
    /// activity task to dispatch and no workflow task to wake the run afterwards, which is
    /// most of what a run costs the Temporal server (docs/benchmarks.md). They are retried
    /// until they succeed, in the worker, so a read DB outage holds the run at its transition
    /// exactly as before. The plan and the apply, which call the runner and may take minutes,
    /// stay regular activities. Runs recorded before `local-quick-steps` replay their regular
    /// activities.
    async fn quick_step<AD>(
        ctx: &WorkflowContext<Self>,
        activity: AD,
        input: AD::Input,
    ) -> Result<AD::Output, ActivityExecutionError>
    where
        AD: ActivityDefinition,
        AD::Output: TemporalDeserializable,
    {
        if ctx.state(|s| s.lean) || ctx.patched(LOCAL_QUICK_STEPS) {
            ctx.execute_local_activity(activity, input, local_quick_opts())
                .await
        } else {
            ctx.execute_activity(activity, input, quick_opts()).await
        }
    }

    /// Signal `lock_granted`: sent by the environment's lock when it is this run's turn.
    #[signal]
    pub fn lock_granted(&mut self, _ctx: &mut SyncWorkflowContext<Self>, _granted: ()) {
        self.lock_granted = true;
    }

    /// Signal `approval`: an operator approves or rejects the recorded plan.
    ///
    /// Only counted when `inputsHash` names the recorded plan, and only while the run awaits
    /// approval or before it does (held until then, see `weigh_early_approvals`); anything
    /// else is kept in `refused_approvals` and changes nothing.
    #[signal]
    pub fn approval(&mut self, _ctx: &mut SyncWorkflowContext<Self>, approval: Approval) {
        match self.status.state {
            None | Some(ProvisioningState::Planned) => self.early_approvals.push(approval),
            Some(ProvisioningState::AwaitingApproval) => self.weigh(approval),
            Some(_) => self.refused_approvals.push(approval),
        }
    }

    /// Signal `cancel`: valid only before the apply starts.
    #[signal]
    pub fn cancel(&mut self, _ctx: &mut SyncWorkflowContext<Self>, request: CancelRequest) {
        if cancellable(self.status.state) && self.cancel.is_none() {
            self.cancel = Some(request);
        }
    }

    /// Query `state`: the live status of the run.
    #[query]
    pub fn state(&self, _ctx: &WorkflowContextView) -> RunStatus {
        self.status.clone()
    }
}

/// Whether a run in `state` may still be cancelled (before the apply starts).
pub fn cancellable(state: Option<ProvisioningState>) -> bool {
    matches!(
        state,
        None | Some(ProvisioningState::Planned) | Some(ProvisioningState::AwaitingApproval)
    )
}

fn unreachable_approval() -> Approval {
    // `wait` only returns Ready once an approval is stored; keep the workflow total anyway.
    Approval {
        decision: ApprovalDecision::Reject,
        approver: "system".into(),
        reason: "no approval recorded".into(),
        inputs_hash: String::new(),
    }
}

/// The message of the application failure behind an activity error.
fn failure_reason(e: &ActivityExecutionError) -> String {
    e.failure()
        .map(|f| match &f.cause {
            Some(cause) => cause.message.clone(),
            None => f.message.clone(),
        })
        .unwrap_or_else(|| e.to_string())
}

/// Quick steps before `local-quick-steps`: short, retried until they succeed (a read DB outage
/// must not lose a transition).
fn quick_opts() -> ActivityOptions {
    crate::retries::must_succeed(Duration::from_secs(30))
}

/// The same retries for a quick step run as a local activity.
fn local_quick_opts() -> LocalActivityOptions {
    crate::retries::must_succeed_locally(Duration::from_secs(30))
}

/// Planning only reads: exponential retry, but a plan that cannot succeed fails at once.
fn plan_opts() -> ActivityOptions {
    ActivityOptions::with_start_to_close_timeout(Duration::from_secs(300))
        .retry_policy(
            RetryPolicy::builder()
                .initial_interval(Duration::from_secs(1))
                .backoff_coefficient(2.0)
                .maximum_interval(Duration::from_secs(60))
                .maximum_attempts(8)
                .non_retryable_error_types([PLAN_INVALID])
                .build(),
        )
        .build()
}

/// The apply heartbeats; a runner failure is never retried. A lost worker (heartbeat
/// timeout) is retried: the runner answers a repeated apply of the same run with the receipt
/// it recorded, so the change is applied once.
fn apply_opts(timeout_secs: u64) -> ActivityOptions {
    ActivityOptions::with_start_to_close_timeout(Duration::from_secs(timeout_secs))
        .heartbeat_timeout(Duration::from_secs(10))
        .retry_policy(
            RetryPolicy::builder()
                .initial_interval(Duration::from_secs(1))
                .maximum_attempts(3)
                .non_retryable_error_types([APPLY_FAILED])
                .build(),
        )
        .build()
}
