//! `observe/{tenant}/{env}/{window}`: read the target, record the inventory, raise and resolve
//! findings, and hand a new proposal to its own workflow.
//!
//! An operator's observation (`POST …/observe`); the sweep observes in batches and a run
//! observes after its apply inside its own workflow, both with [`observe_locally`]'s steps.

use crate::contracts::{InventoryActivities, ObserveRequest, RecordOutcome, RecordRequest};
use crate::handover::hand_over;
use crate::ids::time_ordered_id;
use crate::search_attributes::{ENVIRONMENT_ID, TENANT_ID};
use runtime_cloud_models::observation::Observation;
use serde::{Deserialize, Serialize};
use std::time::Duration;
use temporalio_macros::{workflow, workflow_methods};
use temporalio_sdk::{
    ActivityExecutionError, LocalActivityOptions, WorkflowContext, WorkflowContextView,
    WorkflowResult,
};

/// Which environment to observe.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ObserveInput {
    pub tenant_id: String,
    pub environment_id: String,
}

/// Each attempt to record an observation.
const RECORD_TIMEOUT: Duration = Duration::from_secs(60);

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
        // Reading and recording run as local activities, in the workflow task that starts
        // the observation, which then ends in one task instead of three (docs/benchmarks.md).
        let target = (input.tenant_id.as_str(), input.environment_id.as_str());
        let record = crate::options::must_succeed_locally(RECORD_TIMEOUT);
        let outcome = observe_locally(ctx, target, record.clone()).await?;
        hand_over(
            ctx,
            &outcome.superseded,
            outcome.new_proposal.clone(),
            record,
        )
        .await?;
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
        .execute_local_activity(
            InventoryActivities::observe,
            read,
            crate::options::read_target(),
        )
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
