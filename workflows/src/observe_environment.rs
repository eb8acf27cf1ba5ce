//! `observe/{tenant}/{env}/{window}`: read the target, record the inventory, raise and resolve
//! findings, and hand a new proposal to its own workflow.
//!
//! An operator's observation (`POST …/observe`), and a watched cluster's: a change to an
//! object of the environment is signalled (`changed`) to `observe/{tenant}/{env}/watched`,
//! started by the signal when it is not running, and a change signalled during an observation
//! makes exactly one more, however many came. The sweep observes in batches and a run observes
//! after its apply inside its own workflow, both with [`observe_locally`]'s steps.

use crate::contracts::{InventoryActivities, ObserveRequest, RecordOutcome};
use crate::handover::hand_over;
use crate::ids::time_ordered_id;
use crate::search_attributes::{ENVIRONMENT_ID, TENANT_ID};
use serde::{Deserialize, Serialize};
use std::time::Duration;
use temporalio_macros::{workflow, workflow_methods};
use temporalio_sdk::{
    ActivityExecutionError, LocalActivityOptions, SyncWorkflowContext, WorkflowContext,
    WorkflowContextView, WorkflowResult,
};

/// Which environment to observe.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ObserveInput {
    pub tenant_id: String,
    pub environment_id: String,
}

/// Each attempt to observe and record (three reads of the target at most, then the record).
const RECORD_TIMEOUT: Duration = Duration::from_secs(120);

/// The ObserveEnvironment workflow.
#[workflow]
pub struct ObserveEnvironment {
    input: ObserveInput,
    /// A change was signalled since the observation under way read the target.
    changed: bool,
}

#[workflow_methods]
impl ObserveEnvironment {
    #[init]
    pub fn new(_ctx: &WorkflowContextView, input: ObserveInput) -> Self {
        Self {
            input,
            changed: false,
        }
    }

    /// Signal `changed`: an object of the environment changed (a watched cluster's event):
    /// observe again once the observation under way is recorded.
    #[signal]
    pub fn changed(&mut self, _ctx: &mut SyncWorkflowContext<Self>, _unit: ()) {
        self.changed = true;
    }

    /// Observe → record → tell superseded proposals → start the new one; again while a change
    /// was signalled meanwhile.
    #[run]
    pub async fn run(ctx: &mut WorkflowContext<Self>) -> WorkflowResult<RecordOutcome> {
        let input = ctx.state(|s| s.input.clone());
        ctx.upsert_search_attributes([
            TENANT_ID.value_set(input.tenant_id.clone()),
            ENVIRONMENT_ID.value_set(input.environment_id.clone()),
        ]);
        // Reading and recording run as a local activity, in the workflow task that starts
        // the observation, which then ends in one task instead of three (docs/benchmarks.md).
        let target = (input.tenant_id.as_str(), input.environment_id.as_str());
        let record = crate::options::must_succeed_locally(RECORD_TIMEOUT);
        loop {
            ctx.state_mut(|s| s.changed = false);
            let outcome = observe_locally(ctx, target, record.clone()).await?;
            hand_over(
                ctx,
                &outcome.superseded,
                outcome.new_proposal.clone(),
                record.clone(),
            )
            .await?;
            if !ctx.state(|s| s.changed) {
                return Ok(outcome);
            }
        }
    }
}

/// Reads the environment `(tenant_id, environment_id)`'s target and records what it shows, in
/// one local activity in the current workflow task (a few quick reads, then the target counts as
/// unreachable), with `record`'s retries: an `ObserveEnvironment`, and a run observing after its
/// apply.
pub(crate) async fn observe_locally<W>(
    ctx: &WorkflowContext<W>,
    (tenant_id, environment_id): (&str, &str),
    record: LocalActivityOptions,
) -> Result<RecordOutcome, ActivityExecutionError> {
    let request = observe_request(ctx, (tenant_id, environment_id));
    ctx.execute_local_activity(InventoryActivities::observe, request, record)
        .await
}

/// The request to observe the environment `(tenant_id, environment_id)`, naming the proposal it
/// may raise (from the workflow, so a retry raises the same one).
pub(crate) fn observe_request<W>(
    ctx: &WorkflowContext<W>,
    (tenant_id, environment_id): (&str, &str),
) -> ObserveRequest {
    ObserveRequest {
        tenant_id: tenant_id.to_owned(),
        environment_id: environment_id.to_owned(),
        proposal_id: time_ordered_id(ctx),
    }
}
