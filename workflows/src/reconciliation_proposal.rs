//! `proposal/{proposalId}`: a reviewable reconciliation. Auto-accepted when non-destructive,
//! outside production and allowed by policy; otherwise it waits for the operator's `decide`
//! signal. Accepting plans a ProvisioningRun of kind `reconciliation`; the proposal never
//! writes to infrastructure itself.

use crate::contracts::{InventoryActivities, PrepareRunRequest, ProposalInput, ProposalProjection};
use crate::ids::time_ordered_id;
use crate::provisioning_run::follow_as_child;
use crate::search_attributes::{ENVIRONMENT_ID, PROPOSAL_STATE, TENANT_ID};
use runtime_cloud_models::ProvisioningState;
use runtime_cloud_models::approvals::Grantor;
use runtime_cloud_models::drift::ProposalState;
use serde::{Deserialize, Serialize};
use std::time::Duration;
use temporalio_macros::{workflow, workflow_methods};
use temporalio_sdk::{SyncWorkflowContext, WorkflowContext, WorkflowContextView, WorkflowResult};

/// Each attempt of the proposal's reads and writes (its row, its run's row, its projections).
const WRITE_TIMEOUT: Duration = Duration::from_secs(30);
/// A proposal waiting for a decision reads its row again this often.
const TABLE_RECHECK: Duration = Duration::from_secs(3600);

/// An operator's answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum Verdict {
    Accept,
    Reject,
}

/// Payload of the `decide` signal: `{"decision":"accept","by":"alice","reason":"…"}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Decision {
    pub decision: Verdict,
    #[serde(default)]
    pub by: String,
    #[serde(default)]
    pub reason: String,
    /// The decider's roles, as the API saw them: accepting a production proposal is an
    /// approval only when they include a role that may grant one.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub roles: Vec<String>,
}

/// The ReconciliationProposal workflow.
#[workflow]
pub struct ReconciliationProposal {
    input: ProposalInput,
    state: ProposalState,
    decision: Option<Decision>,
    superseded: bool,
    run_id: Option<String>,
}

#[workflow_methods]
impl ReconciliationProposal {
    #[init]
    pub fn new(_ctx: &WorkflowContextView, input: ProposalInput) -> Self {
        Self {
            input,
            state: ProposalState::Proposed,
            decision: None,
            superseded: false,
            run_id: None,
        }
    }

    /// Decide, then (when accepted) plan and follow the reconciliation run.
    #[run]
    pub async fn run(ctx: &mut WorkflowContext<Self>) -> WorkflowResult<ProposalState> {
        let input = ctx.state(|s| s.input.clone());
        ctx.upsert_search_attributes([
            TENANT_ID.value_set(input.tenant_id.clone()),
            ENVIRONMENT_ID.value_set(input.environment_id.clone()),
            PROPOSAL_STATE.value_set(ProposalState::Proposed.as_str().to_owned()),
        ]);

        // The table first: an observation may have superseded this proposal before its
        // workflow existed to be told (a sweep's page starts its proposals after its batch
        // commits, and a signal to a workflow not yet started is lost).
        if !Self::still_proposed(ctx).await? {
            return Self::settle(ctx, ProposalState::Superseded, None).await;
        }
        let decision = if input.auto_accept {
            Decision {
                decision: Verdict::Accept,
                by: "policy".into(),
                reason: "non-destructive, outside production".into(),
                roles: Vec::new(),
            }
        } else {
            match Self::wait_for_decision(ctx).await? {
                Some(d) => d,
                None => return Self::settle(ctx, ProposalState::Superseded, None).await,
            }
        };
        if decision.decision == Verdict::Reject {
            return Self::settle(ctx, ProposalState::Rejected, Some(decision)).await;
        }

        // Record the run before the proposal names it, so a reader never follows a dangling id.
        let run_id = time_ordered_id(ctx);
        let prepare = PrepareRunRequest {
            proposal: input.clone(),
            run_id: run_id.clone(),
            grantor: Some(Grantor {
                principal: decision.by.clone(),
                roles: decision.roles.clone(),
                reason: decision.reason.clone(),
            }),
        };
        let run_input = ctx
            .execute_activity(
                InventoryActivities::prepare_run,
                prepare,
                crate::options::must_succeed(WRITE_TIMEOUT),
            )
            .await?;
        ctx.state_mut(|s| s.run_id = Some(run_id.clone()));
        Self::settle(ctx, ProposalState::Accepted, Some(decision.clone())).await?;
        let status = follow_as_child(ctx, run_input).await?;
        if status.state == Some(ProvisioningState::Applied) {
            return Self::settle(ctx, ProposalState::Applied, Some(decision)).await;
        }
        // The run failed or was rejected: the proposal stays Accepted with its run; the next
        // observation raises what is still open.
        Ok(ProposalState::Accepted)
    }

    /// Waits for the operator's decision; `None` when the proposal is superseded first. It
    /// reads its row again every [`TABLE_RECHECK`]: a `supersede` signal sent by a sweep's
    /// page is not durable (a worker killed between the page's commit and its signals loses
    /// them), the row is.
    async fn wait_for_decision(
        ctx: &mut WorkflowContext<Self>,
    ) -> WorkflowResult<Option<Decision>> {
        loop {
            let woke = temporalio_sdk::workflows::select! {
                r = ctx.wait_condition(|s| s.decision.is_some() || s.superseded) => { r?; true }
                _ = ctx.timer(TABLE_RECHECK) => false,
            };
            if woke {
                return Ok(ctx.state(|s| s.decision.clone().filter(|_| !s.superseded)));
            }
            if !Self::still_proposed(ctx).await? {
                return Ok(None);
            }
        }
    }

    /// Whether the read table still shows the proposal `Proposed` (or has no row to say
    /// otherwise: every hand-over records the row before it starts the workflow).
    async fn still_proposed(ctx: &mut WorkflowContext<Self>) -> WorkflowResult<bool> {
        let proposal_id = ctx.state(|s| s.input.proposal_id.clone());
        let opts = crate::options::must_succeed_locally(WRITE_TIMEOUT);
        let state = ctx
            .execute_local_activity(InventoryActivities::read_proposal_state, proposal_id, opts)
            .await?;
        Ok(state.is_none_or(|state| state == ProposalState::Proposed))
    }

    async fn settle(
        ctx: &mut WorkflowContext<Self>,
        state: ProposalState,
        decision: Option<Decision>,
    ) -> WorkflowResult<ProposalState> {
        ctx.state_mut(|s| s.state = state);
        ctx.upsert_search_attributes([PROPOSAL_STATE.value_set(state.as_str().to_owned())]);
        let projection = ProposalProjection {
            proposal_id: ctx.state(|s| s.input.proposal_id.clone()),
            state,
            decided_by: decision.as_ref().map(|d| d.by.clone()),
            reason: decision.map(|d| d.reason),
            provisioning_run_id: ctx.state(|s| s.run_id.clone()),
        };
        ctx.execute_activity(
            InventoryActivities::project_proposal,
            projection,
            crate::options::must_succeed(WRITE_TIMEOUT),
        )
        .await?;
        Ok(state)
    }

    /// Signal `decide`: accept or reject, counted only while `Proposed`.
    #[signal]
    pub fn decide(&mut self, _ctx: &mut SyncWorkflowContext<Self>, decision: Decision) {
        if self.state == ProposalState::Proposed && self.decision.is_none() && !self.superseded {
            self.decision = Some(decision);
        }
    }

    /// Signal `supersede`: a newer proposal (or a clean observation) replaced this one.
    #[signal]
    pub fn supersede(&mut self, _ctx: &mut SyncWorkflowContext<Self>, _unit: ()) {
        if self.state == ProposalState::Proposed && self.decision.is_none() {
            self.superseded = true;
        }
    }

    /// Query `state`.
    #[query]
    pub fn state(&self, _ctx: &WorkflowContextView) -> ProposalState {
        self.state
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::messages::{StartProposal, Supersede};
    use temporalio_common::{SignalDefinition, WorkflowDefinition};

    /// Observations start proposals and supersede them by name; a proposal must answer to it.
    #[test]
    fn the_proposal_answers_to_the_names_others_use() {
        assert_eq!(ReconciliationProposal::run.name(), StartProposal.name());
        assert_eq!(ReconciliationProposal::supersede.name(), Supersede.name());
    }
}
