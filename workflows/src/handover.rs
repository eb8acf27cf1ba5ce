//! Handing over what an observation or a re-plan decided: tell the proposals it replaced, and
//! start the workflow of each new one. Used by every workflow that records observations or
//! re-plans: `ObserveEnvironment`, a run's after-apply observation and the GitOps reconciler.
//! (The sweep's pages hand over from their activity, with the client: see
//! `runtime_cloud_activities::inventory`.)

use crate::contracts::ProposalInput;
use crate::ids::proposal_workflow_id;
use crate::messages::{StartProposal, Supersede};
use temporalio_sdk::{
    ChildWorkflowOptions, ParentClosePolicy, SignalWorkflowOptions, WorkflowContext,
};

/// Signals `supersede` to each of `superseded` and starts a proposal workflow for each of
/// `new_proposals`.
pub(crate) async fn hand_over<W>(
    ctx: &WorkflowContext<W>,
    superseded: &[String],
    new_proposals: impl IntoIterator<Item = ProposalInput>,
) {
    for superseded in superseded {
        // The proposal's workflow may have ended already; the row says Superseded anyway.
        let _ = ctx
            .external_workflow(proposal_workflow_id(superseded), None)
            .signal(Supersede, (), SignalWorkflowOptions::default())
            .await;
    }
    for proposal in new_proposals {
        let opts = ChildWorkflowOptions::builder()
            .workflow_id(proposal_workflow_id(&proposal.proposal_id))
            // The proposal lives on after the workflow that raised it ends.
            .parent_close_policy(ParentClosePolicy::Abandon)
            .build();
        // A retried record returns the same proposal; its workflow may already exist.
        let _ = ctx
            .start_child_workflow(StartProposal, proposal, opts)
            .await;
    }
}
