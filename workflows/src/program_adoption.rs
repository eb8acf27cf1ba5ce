//! `program-adoption/{proposalId}/{attempt}`: a proposal's unmanaged workloads adopted into its
//! Pulumi program (`models::program_adoption`), as asked for the `attempt`th time.
//!
//! ```text
//! generate the code (pulumi import) and push it to a new branch ─▶ published
//!   │ the program, the import or the repository refuses ─▶ failed, with the reason
//!   │ still out of reach after a few attempts ─▶ failed, with the last error
//! ```
//!
//! The publish is idempotent (the same change is the same commit, and a branch holding the
//! product's commit for this proposal is answered as published), so an attempt after a lost
//! worker repeats nothing that counts; it heartbeats, so a lost worker's attempt is given up
//! within a minute.

use crate::contracts::{AdoptionActivities, AdoptionInput, FailAdoption};
use std::time::Duration;
use temporalio_common::RetryPolicy;
use temporalio_macros::{workflow, workflow_methods};
use temporalio_sdk::{ActivityOptions, WorkflowContext, WorkflowContextView, WorkflowResult};

/// Each attempt of the publish: a checkout, `pulumi import`, a push.
const PUBLISH_TIMEOUT: Duration = Duration::from_secs(600);
/// Attempts of the publish before the adoption fails.
const PUBLISH_ATTEMPTS: u32 = 4;
/// The record of a failure.
const STEP_TIMEOUT: Duration = Duration::from_secs(60);
/// A publish whose worker stopped heartbeating for this long is tried again elsewhere.
const HEARTBEAT_TIMEOUT: Duration = Duration::from_secs(60);

/// The ProgramAdoption workflow.
#[workflow]
pub struct ProgramAdoption {
    input: AdoptionInput,
}

#[workflow_methods]
impl ProgramAdoption {
    #[init]
    pub fn new(_ctx: &WorkflowContextView, input: AdoptionInput) -> Self {
        Self { input }
    }

    #[run]
    pub async fn run(ctx: &mut WorkflowContext<Self>) -> WorkflowResult<()> {
        let input = ctx.state(|s| s.input.clone());
        let options = ActivityOptions::with_start_to_close_timeout(PUBLISH_TIMEOUT)
            .heartbeat_timeout(HEARTBEAT_TIMEOUT)
            .retry_policy(
                RetryPolicy::builder()
                    .maximum_attempts(PUBLISH_ATTEMPTS)
                    .maximum_interval(Duration::from_secs(30))
                    .build(),
            )
            .build();
        let published = ctx
            .execute_activity(AdoptionActivities::publish, input.clone(), options)
            .await;
        if let Err(e) = published {
            let request = FailAdoption {
                adoption: input,
                reason: format!("the adoption could not be published: {e}"),
            };
            ctx.execute_activity(
                AdoptionActivities::fail,
                request,
                crate::options::must_succeed(STEP_TIMEOUT),
            )
            .await?;
        }
        Ok(())
    }
}
