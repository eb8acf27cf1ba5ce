//! The production gate: an approval the Approvals port verifies and spends on this run (the
//! one the request names, or an operator's decision while the run awaits it), or a policy
//! allow with its evidence; what is not counted is kept in `refusedApprovals` with the reason.
//! Every approval is weighed by one rule (`models::weigh_approval`).

use super::{Ending, ProvisioningRun, Stage, now};
use crate::contracts::ProvisioningActivities;
use chrono::{DateTime, Utc};
use runtime_cloud_models::approvals::{ApprovalClaim, ClaimOutcome};
use runtime_cloud_models::{
    Approval, ApprovalDecision, ApprovalRecord, PlanReceipt, ProvisioningState, RefusalReason,
    RefusedApproval, RunInput, weigh_approval,
};
use std::time::Duration;
use temporalio_sdk::{WorkflowContext, WorkflowResult};

/// Each attempt to claim an approval.
const CLAIM_TIMEOUT: Duration = Duration::from_secs(30);

/// An approval that arrived before the run awaited approval, with when it arrived.
#[derive(Debug, Clone)]
pub(super) struct HeldApproval {
    approval: Approval,
    received_at: DateTime<Utc>,
}

/// How the wait for an operator ended.
enum Wait {
    Decided(Approval),
    Expired,
    Cancelled,
}

impl ProvisioningRun {
    /// The production gate: it opens only on an approval the Approvals port verifies and
    /// spends on this run, the one the request names or the one behind an operator's
    /// decision, or on a policy allow for a baseline or reconciliation that deletes nothing
    /// (recorded with its evidence). A production run without one (or whose named approval
    /// does not verify)
    /// waits in `AwaitingApproval` for a decision, a cancel or the expiry. Every other run
    /// goes straight on.
    pub(super) async fn approval_stage(
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
}

impl ProvisioningRun {
    /// A decision told to the run: held when it arrives before the run awaits approval
    /// (weighed when it does, [`Self::weigh_held`]), else weighed at once. One told twice
    /// (the update no worker answered in time, then the API's signal) is taken once.
    pub(super) fn receive(&mut self, approval: Approval, received_at: DateTime<Utc>) {
        let told = self.decision.as_ref() == Some(&approval)
            || self.held_approvals.iter().any(|h| h.approval == approval);
        if told {
            return;
        }
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

    /// Counts `approval` or keeps it as refused, by the one approval rule
    /// ([`weigh_approval`]).
    fn weigh(&mut self, approval: Approval, received_at: DateTime<Utc>, awaiting: bool) {
        let plan = self.status.plan_receipt.as_ref();
        match weigh_approval(awaiting, plan, self.decision.is_some(), &approval) {
            Ok(()) => self.decision = Some(approval),
            Err(why) => self.refuse(approval, received_at, why),
        }
    }

    /// Keeps `approval` in `refusedApprovals`, with when it came and why it was not counted.
    pub(super) fn refuse(
        &mut self,
        approval: Approval,
        received_at: DateTime<Utc>,
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
    pub(super) fn weigh_held(&mut self, awaiting: bool) {
        for held in std::mem::take(&mut self.held_approvals) {
            self.weigh(held.approval, held.received_at, awaiting);
        }
    }
}
