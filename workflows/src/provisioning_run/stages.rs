//! The stages after the run took its turn, in the diagram's order: plan (`Planned`), the
//! policies' decision, the production gate ([`super::approval`]), the change windows
//! (`waitingForWindow`, or an Operator's break-glass), the quarantines weighed again when the
//! run waited, and the apply (`Applying` → `Applied` |
//! `Failed`). Each goes on to the next or ends the run in a state.

use super::{Ending, ProvisioningRun, Stage, now};
use crate::contracts::{
    ApplyRequest, DecideOnPlan, Gate, PlanRequest, PolicyInput, ProvisioningActivities, WindowQuery,
};
use runtime_cloud_models::policy::{PolicyEnvironment, PolicyRun};
use runtime_cloud_models::{
    ApplyReceipt, ApplyResult, PlanReceipt, ProvisioningKind, ProvisioningState, RunInput,
    WindowWait,
};
use std::time::Duration;
use temporalio_sdk::{ActivityExecutionError, TimeoutType, WorkflowContext, WorkflowResult};

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

impl ProvisioningRun {
    /// The stages, in the diagram's order, once the run holds its environment and its lease.
    pub(super) async fn stages(
        ctx: &mut WorkflowContext<Self>,
        input: &RunInput,
    ) -> WorkflowResult<Ending> {
        let plan = go_on!(Self::plan(ctx, input).await);
        go_on!(Self::policy_stage(ctx, input, &plan).await);
        go_on!(Self::approval_stage(ctx, input, &plan).await);
        go_on!(Self::window_stage(ctx, input).await);
        if ctx.state(|s| s.waited) {
            go_on!(Self::quarantine_stage(ctx, input).await);
        }
        Self::apply(ctx, input, plan).await
    }

    /// A run that waited since its policies decided weighs the tenant's quarantines again:
    /// one placed meanwhile (a rollback while the run awaited its approval or a window) ends
    /// it `Rejected` with the reason, before anything is applied.
    async fn quarantine_stage(
        ctx: &mut WorkflowContext<Self>,
        input: &RunInput,
    ) -> WorkflowResult<Stage> {
        let opts = crate::options::must_succeed_locally(POLICY_TIMEOUT);
        let held = ctx
            .execute_local_activity(ProvisioningActivities::quarantine_gate, input.clone(), opts)
            .await?;
        Ok(match held {
            Some(why) => Stage::End(Ending::new(
                ProvisioningState::Rejected,
                format!("denied by quarantine: {why}"),
            )),
            None => Stage::GoOn(()),
        })
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
            destroy: input.kind == ProvisioningKind::Decommission,
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
                quarantine_override: input.quarantine_override.clone(),
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
            // A window said to open at a time already past (the gate was read before the run
            // looked, or on another clock) is looked at again at once, not in five minutes.
            let until_open = opens_at
                .map(|t| (t - at).to_std().unwrap_or_default())
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
            destroy: input.kind == ProvisioningKind::Decommission,
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

    /// The ending of a cancelled run, naming who cancelled and why.
    pub(super) fn cancelled(ctx: &WorkflowContext<Self>) -> Ending {
        let cancel = ctx.state(|s| s.cancel.clone()).unwrap_or_default();
        let reason = format!("cancelled by {}: {}", cancel.by, cancel.reason);
        Ending::new(ProvisioningState::Cancelled, reason)
    }
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
