//! `program-adoption/{proposalId}`: a proposal's unmanaged workloads adopted into its Pulumi
//! program (`models::program_adoption`).
//!
//! ```text
//! generate the code (pulumi import) and push it to a new branch ─▶ published
//!   │ the program, the import or the repository refuses ─▶ failed, with the reason
//!   │ still out of reach after a few attempts ─▶ failed, with the last error
//! ```
//!
//! The publish is idempotent (the same change is the same commit, and a branch holding it is
//! left as it is), so an attempt after a lost worker repeats nothing that counts.

use crate::contracts::{AdoptionActivities, FailAdoption};
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

/// The ProgramAdoption workflow; its input is the proposal id.
#[workflow]
pub struct ProgramAdoption {
    proposal_id: String,
}

#[workflow_methods]
impl ProgramAdoption {
    #[init]
    pub fn new(_ctx: &WorkflowContextView, proposal_id: String) -> Self {
        Self { proposal_id }
    }

    #[run]
    pub async fn run(ctx: &mut WorkflowContext<Self>) -> WorkflowResult<()> {
        let proposal_id = ctx.state(|s| s.proposal_id.clone());
        let options = ActivityOptions::with_start_to_close_timeout(PUBLISH_TIMEOUT)
            .retry_policy(
                RetryPolicy::builder()
                    .maximum_attempts(PUBLISH_ATTEMPTS)
                    .maximum_interval(Duration::from_secs(30))
                    .build(),
            )
            .build();
        let published = ctx
            .execute_activity(AdoptionActivities::publish, proposal_id.clone(), options)
            .await;
        if let Err(e) = published {
            let request = FailAdoption {
                proposal_id,
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
