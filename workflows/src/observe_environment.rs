//! `observe/{tenant}/{env}/{window}`: read the target, record the inventory, raise and resolve
//! findings, and hand a new proposal to its own workflow.
//!
//! The id carries the observation window, so a sweep and an operator asking in the same window
//! share one observation instead of running two.

use crate::contracts::{
    InventoryActivities, ObserveRequest, ProposalInput, RecordOutcome, RecordRequest,
};
use crate::ids::time_ordered_id;
use crate::reconciliation_proposal::ReconciliationProposal;
use crate::search_attributes::{ENVIRONMENT_ID, TENANT_ID};
use runtime_cloud_models::observation::Observation;
use serde::{Deserialize, Serialize};
use std::time::Duration;
use temporalio_common::RetryPolicy;
use temporalio_macros::{workflow, workflow_methods};
use temporalio_sdk::{
    ActivityExecutionError, ActivityOptions, ChildWorkflowOptions, LocalActivityOptions,
    ParentClosePolicy, SignalWorkflowOptions, WorkflowContext, WorkflowContextView, WorkflowResult,
};

/// Which environment to observe.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ObserveInput {
    pub tenant_id: String,
    pub environment_id: String,
}

/// Patch id: observations recorded before it read and recorded with regular activities.
const LOCAL_OBSERVATION: &str = "local-observation";

/// The workflow id of an observation in `window` (`202611290935`, `manual-{id}`; runs recorded
/// before `lean-run` observed after their apply in `after-{runId}`).
pub fn observe_workflow_id(tenant_id: &str, environment_id: &str, window: &str) -> String {
    format!("observe/{tenant_id}/{environment_id}/{window}")
}

/// The workflow id of a proposal.
pub fn proposal_workflow_id(proposal_id: &str) -> String {
    format!("proposal/{proposal_id}")
}

/// The ObserveEnvironment workflow.
#[workflow]
pub struct ObserveEnvironment {
    input: ObserveInput,
}

#[workflow_methods]
impl ObserveEnvironment {
    #[init]
    pub fn new(_ctx: &WorkflowContextView, input: ObserveInput) -> Self {
        Self { input }
    }

    /// Observe → record → tell superseded proposals → start the new one.
    #[run]
    pub async fn run(ctx: &mut WorkflowContext<Self>) -> WorkflowResult<RecordOutcome> {
        let input = ctx.state(|s| s.input.clone());
        ctx.upsert_search_attributes([
            TENANT_ID.value_set(input.tenant_id.clone()),
            ENVIRONMENT_ID.value_set(input.environment_id.clone()),
        ]);
        // Reading and recording are local activities since `local-observation`: they run in
        // the workflow task that starts the observation, which then ends in one task instead
        // of three (docs/benchmarks.md). Observations recorded before it replay as they ran.
        let outcome = if ctx.patched(LOCAL_OBSERVATION) {
            let target = (input.tenant_id.as_str(), input.environment_id.as_str());
            observe_locally(ctx, target, local_record_opts()).await?
        } else {
            let request = ObserveRequest {
                tenant_id: input.tenant_id.clone(),
                environment_id: input.environment_id.clone(),
            };
            let observation = ctx
                .execute_activity(InventoryActivities::observe, request, observe_opts())
                .await
                .unwrap_or_else(unreachable);
            let record = RecordRequest {
                tenant_id: input.tenant_id.clone(),
                environment_id: input.environment_id.clone(),
                observation,
                proposal_id: time_ordered_id(ctx),
            };
            ctx.execute_activity(InventoryActivities::record, record, record_opts())
                .await?
        };

        hand_over(ctx, &outcome.superseded, outcome.new_proposal.clone()).await;
        Ok(outcome)
    }
}

/// Reads the environment `(tenant_id, environment_id)`'s target and records what it shows,
/// both as local activities in the current workflow task, recording with `record`'s retries:
/// an `ObserveEnvironment`, and a run observing after its apply.
pub(crate) async fn observe_locally<W>(
    ctx: &WorkflowContext<W>,
    (tenant_id, environment_id): (&str, &str),
    record: LocalActivityOptions,
) -> Result<RecordOutcome, ActivityExecutionError> {
    let read = ObserveRequest {
        tenant_id: tenant_id.to_owned(),
        environment_id: environment_id.to_owned(),
    };
    // An unreachable target is an answer (the environment becomes stale), not an error.
    let observation = ctx
        .execute_local_activity(InventoryActivities::observe, read, local_observe_opts())
        .await
        .unwrap_or_else(unreachable);
    let request = RecordRequest {
        tenant_id: tenant_id.to_owned(),
        environment_id: environment_id.to_owned(),
        observation,
        proposal_id: time_ordered_id(ctx),
    };
    ctx.execute_local_activity(InventoryActivities::record, request, record)
        .await
}

fn unreachable(e: ActivityExecutionError) -> Observation {
    Observation::Unreachable {
        reason: e.to_string(),
    }
}

/// Tells the proposals an observation replaced, and starts the workflow of each new one.
///
/// Shared by every workflow that records observations or re-plans (`ObserveEnvironment`, the
/// sweep's batches, the GitOps reconciler).
pub(crate) async fn hand_over<W>(
    ctx: &WorkflowContext<W>,
    superseded: &[String],
    new_proposals: impl IntoIterator<Item = ProposalInput>,
) {
    for superseded in superseded {
        // The proposal's workflow may have ended already; the row says Superseded anyway.
        let _ = ctx
            .external_workflow(proposal_workflow_id(superseded), None)
            .signal(
                ReconciliationProposal::supersede,
                (),
                SignalWorkflowOptions::default(),
            )
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
            .start_child_workflow(ReconciliationProposal::run, proposal, opts)
            .await;
    }
}

/// Reading a target as a local activity: a few quick retries, then the observation counts as
/// failed.
fn local_observe_opts() -> LocalActivityOptions {
    LocalActivityOptions::builder()
        .start_to_close_timeout(Duration::from_secs(60))
        .retry_policy(RetryPolicy::builder().maximum_attempts(3).build())
        .build()
}

/// Recording as a local activity: retried until the read DB takes it.
fn local_record_opts() -> LocalActivityOptions {
    crate::retries::must_succeed_locally(Duration::from_secs(60))
}

/// Reading a target: a few quick retries, then the observation counts as failed.
fn observe_opts() -> ActivityOptions {
    ActivityOptions::with_start_to_close_timeout(Duration::from_secs(60))
        .retry_policy(RetryPolicy::builder().maximum_attempts(3).build())
        .build()
}

/// Recording must not be lost: retried until the read DB takes it.
fn record_opts() -> ActivityOptions {
    crate::retries::must_succeed(Duration::from_secs(60))
}
