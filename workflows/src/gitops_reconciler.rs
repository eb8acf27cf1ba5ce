//! GitOpsReconciler (schedule `0 */4 * * *`): re-plan every environment's current
//! specification. A non-destructive difference outside production is applied through a
//! provisioning run when `AutoApplyNonDestructive`; anything destructive or in production
//! becomes a proposal. A plan with deletes in production is never applied automatically. A
//! specification that carries a quarantined version is neither applied nor proposed: held.

use crate::contracts::{EnvironmentPageRequest, ReplanOutcome, ReplanRequest, ScheduledActivities};
use crate::handover::hand_over;
use crate::ids::{run_workflow_id, time_ordered_id};
use crate::options::a_few_tries;
use crate::provisioning_run::ProvisioningRun;
use crate::search_attributes::run_attributes;
use serde::{Deserialize, Serialize};
use temporalio_common::search_attributes::SearchAttributes;
use temporalio_macros::{workflow, workflow_methods};
use temporalio_sdk::{
    ChildWorkflowOptions, ContinueAsNewOptions, ParentClosePolicy, WorkflowContext,
    WorkflowContextView, WorkflowResult,
};

const PAGE: u64 = 100;
/// Marking superseded proposals told: one small write.
const MARK_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

/// Where a reconciliation pass is; also its continue-as-new input.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ReconcileInput {
    pub after: Option<String>,
    pub applied: u64,
    pub proposed: u64,
    /// Held back: their specification carries a quarantined version.
    #[serde(default)]
    pub held: u64,
}

/// The GitOpsReconciler workflow.
#[workflow]
pub struct GitOpsReconciler {
    input: ReconcileInput,
}

#[workflow_methods]
impl GitOpsReconciler {
    #[init]
    pub fn new(_ctx: &WorkflowContextView, input: ReconcileInput) -> Self {
        Self { input }
    }

    #[run]
    pub async fn run(ctx: &mut WorkflowContext<Self>) -> WorkflowResult<ReconcileInput> {
        let mut totals = ctx.state(|s| s.input.clone());
        let page = ctx
            .execute_activity(
                ScheduledActivities::list_environments,
                EnvironmentPageRequest {
                    after: totals.after.clone(),
                    limit: PAGE,
                },
                a_few_tries(),
            )
            .await?;
        for env in page.environments {
            let request = ReplanRequest {
                environment: env,
                run_id: time_ordered_id(ctx),
                proposal_id: time_ordered_id(ctx),
            };
            let abandon = |id: String| {
                ChildWorkflowOptions::builder()
                    .workflow_id(id)
                    .parent_close_policy(ParentClosePolicy::Abandon)
                    .build()
            };
            // One environment that cannot be planned must not stop the pass.
            match ctx
                .execute_activity(ScheduledActivities::replan, request, a_few_tries())
                .await
            {
                Ok(ReplanOutcome::Apply { run }) => {
                    let mut opts = abandon(run_workflow_id(&run.run_id));
                    opts.search_attributes = Some(SearchAttributes::new(run_attributes(&run)));
                    opts.priority = Some(crate::fairness::of_tenant(&run.tenant_id));
                    let _ = ctx
                        .start_child_workflow(ProvisioningRun::run, *run, opts)
                        .await;
                    totals.applied += 1;
                }
                Ok(ReplanOutcome::Propose {
                    proposal,
                    superseded,
                }) => {
                    let mark = crate::options::must_succeed_locally(MARK_TIMEOUT);
                    hand_over(ctx, &superseded, Some(proposal), mark).await?;
                    totals.proposed += 1;
                }
                Ok(ReplanOutcome::Held { .. }) => totals.held += 1,
                Ok(ReplanOutcome::Nothing) | Err(_) => {}
            }
        }
        if page.next.is_some() {
            totals.after = page.next;
            ctx.continue_as_new(totals.clone(), ContinueAsNewOptions::default())?;
        }
        Ok(totals)
    }
}
