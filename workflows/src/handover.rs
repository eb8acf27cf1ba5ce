//! Handing over what an observation or a re-plan decided: tell the proposals it replaced, and
//! start the workflow of each new one. Used by every workflow that records observations or
//! re-plans: `ObserveEnvironment`, a run's after-apply observation and the GitOps reconciler.
//! (The sweep's pages hand over from their activity, with the client: see
//! `runtime_cloud_activities::inventory`.)

use crate::contracts::{InventoryActivities, ProposalInput};
use crate::ids::proposal_workflow_id;
use crate::messages::{StartProposal, Supersede};
use temporalio_sdk::{
    ActivityExecutionError, ChildWorkflowOptions, LocalActivityOptions, ParentClosePolicy,
    SignalWorkflowOptions, WorkflowContext,
};

/// Signals `supersede` to each of `superseded`, starts a proposal workflow for each of
/// `new_proposals`, then marks the superseded told, with `mark`'s retries. Until marked, every
/// record of their environment names them again: a record retried after a worker was killed
/// between its commit and these signals finds them superseded already. An error is only the
/// mark's: whoever hands over may give it up, the next record tells them again.
pub(crate) async fn hand_over<W>(
    ctx: &WorkflowContext<W>,
    superseded: &[String],
    new_proposals: impl IntoIterator<Item = ProposalInput>,
    mark: LocalActivityOptions,
) -> Result<(), ActivityExecutionError> {
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
    if !superseded.is_empty() {
        ctx.execute_local_activity(InventoryActivities::mark_told, superseded.to_vec(), mark)
            .await?;
    }
    Ok(())
}
