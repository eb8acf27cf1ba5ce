//! `offboarding-order/{orderId}`: an instance leaving operation (`models::offboarding`).
//!
//! ```text
//! export the record ─ store the archive ─ read it back and verify ─▶ exported
//!   (an archive that does not verify is exported again, at most three times, then ─▶ failed)
//! record the decommission run ─▶ decommissioning ─ follow the run as a child
//!   ─ Applied ─▶ completed (the environment `offboarded`) │ otherwise ─▶ failed
//! ```
//!
//! Nothing is destroyed before the archive is stored and verified: the decommission is
//! recorded only from `exported` (`store::offboarding::mark_decommissioning_in`). Every step
//! is an activity idempotent by what the workflow chose (the order, the run id), so a worker
//! killed at any step repeats nothing that counts.

use crate::contracts::{
    EndOrder, OffboardingActivities, OffboardingDecommission, OrderInput, VerifyArchive,
};
use crate::ids::time_ordered_id;
use crate::provisioning_run::follow_as_child;
use crate::search_attributes::{ENVIRONMENT_ID, TENANT_ID};
use runtime_cloud_models::ProvisioningState;
use std::time::Duration;
use temporalio_macros::{workflow, workflow_methods};
use temporalio_sdk::{WorkflowContext, WorkflowContextView, WorkflowResult};

/// Each attempt of an export: the record and its logs read, the archive written.
const EXPORT_TIMEOUT: Duration = Duration::from_secs(300);
/// Each attempt of the other steps.
const STEP_TIMEOUT: Duration = Duration::from_secs(60);
/// Exports that do not verify before the order fails.
const EXPORTS: usize = 3;

/// The OffboardingOrder workflow.
#[workflow]
pub struct OffboardingOrder {
    input: OrderInput,
}

#[workflow_methods]
impl OffboardingOrder {
    #[init]
    pub fn new(_ctx: &WorkflowContextView, input: OrderInput) -> Self {
        Self { input }
    }

    /// Export and verify, then decommission, then end the order.
    #[run]
    pub async fn run(ctx: &mut WorkflowContext<Self>) -> WorkflowResult<()> {
        let input = ctx.state(|s| s.input.clone());
        ctx.upsert_search_attributes([
            TENANT_ID.value_set(input.tenant_id.clone()),
            ENVIRONMENT_ID.value_set(input.environment_id.clone()),
        ]);
        if !Self::export(ctx, &input).await? {
            let failure = format!("the archive did not verify after {EXPORTS} exports");
            return Self::end(ctx, &input, Some(failure)).await;
        }
        let failure = Self::decommission(ctx, &input).await?;
        Self::end(ctx, &input, failure).await
    }

    /// Exports the record until its archive verifies; whether it did.
    async fn export(ctx: &mut WorkflowContext<Self>, input: &OrderInput) -> WorkflowResult<bool> {
        for _ in 0..EXPORTS {
            let archive = ctx
                .execute_activity(
                    OffboardingActivities::export,
                    input.order_id.clone(),
                    crate::options::must_succeed(EXPORT_TIMEOUT),
                )
                .await?;
            let verify = VerifyArchive {
                order_id: input.order_id.clone(),
                archive,
            };
            let verified = ctx
                .execute_activity(
                    OffboardingActivities::verify,
                    verify,
                    crate::options::must_succeed(STEP_TIMEOUT),
                )
                .await?;
            if verified {
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// Records the decommission run and follows it; why it failed, if it did.
    async fn decommission(
        ctx: &mut WorkflowContext<Self>,
        input: &OrderInput,
    ) -> WorkflowResult<Option<String>> {
        let request = OffboardingDecommission {
            order_id: input.order_id.clone(),
            run_id: time_ordered_id(ctx),
        };
        let prepared = ctx
            .execute_activity(
                OffboardingActivities::prepare_decommission,
                request,
                crate::options::must_succeed(STEP_TIMEOUT),
            )
            .await?;
        let Some(run) = prepared else {
            return Ok(None);
        };
        let status = follow_as_child(ctx, run).await?;
        Ok(match status.state {
            Some(ProvisioningState::Applied) => None,
            state => Some(format!(
                "the decommission run ended {}: {}",
                state.map_or("unplanned", |s| s.as_str()),
                status.reason.unwrap_or_default()
            )),
        })
    }

    async fn end(
        ctx: &mut WorkflowContext<Self>,
        input: &OrderInput,
        failure: Option<String>,
    ) -> WorkflowResult<()> {
        let request = EndOrder {
            order_id: input.order_id.clone(),
            failure,
        };
        ctx.execute_activity(
            OffboardingActivities::end,
            request,
            crate::options::must_succeed(STEP_TIMEOUT),
        )
        .await?;
        Ok(())
    }
}
