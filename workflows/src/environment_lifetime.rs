//! `environment-lifetime/{tenant}/{env}`: an ephemeral environment is warned before its expiry
//! and decommissioned at it; any environment is decommissioned when an operator asks.
//!
//! read the row → (retired: end | warn when due | wait for the warning, the expiry or a
//! signal | decommission: record the run, follow it as a child) → read again.
//!
//! The timer is durable: a worker down at the expiry decommissions when one is back, once (the
//! run's record is idempotent by its id, minted here, and the child's start is in the
//! history). The row is the truth an extension writes (`POST …/extend`), so the workflow reads
//! it again whenever it wakes; the `changed` signal only wakes it early. An applied
//! decommission retires the environment in the transaction that ends the run
//! (`transactions::end_run`); a failed one leaves it active, tried again after
//! [`RETRY_DECOMMISSION`] when it expired, or when an operator asks again.

use crate::contracts::{DecommissionRequest, EnvironmentKey, LifetimeActivities, WarnRequest};
use crate::ids::time_ordered_id;
use crate::provisioning_run::follow_as_child;
use crate::search_attributes::{ENVIRONMENT_ID, TENANT_ID};
use chrono::{DateTime, Utc};
use runtime_cloud_models::ProvisioningState;
use runtime_cloud_models::lifetime::{Next, RETRY_DECOMMISSION, next};
use serde::{Deserialize, Serialize};
use std::time::Duration;
use temporalio_macros::{workflow, workflow_methods};
use temporalio_sdk::{SyncWorkflowContext, WorkflowContext, WorkflowContextView, WorkflowResult};

/// Each read or write of the row.
const WRITE_TIMEOUT: Duration = Duration::from_secs(30);

/// Who asked for a decommission, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DecommissionAsked {
    pub by: String,
    #[serde(default)]
    pub reason: String,
}

/// The EnvironmentLifetime workflow.
#[workflow]
pub struct EnvironmentLifetime {
    environment: EnvironmentKey,
    /// Told of a change to the row (an extension): read it again now.
    woken: bool,
    /// An operator asked for the decommission.
    asked: Option<DecommissionAsked>,
    /// When a decommission that failed at expiry is tried again.
    retry_at: Option<DateTime<Utc>>,
}

#[workflow_methods]
impl EnvironmentLifetime {
    #[init]
    pub fn new(_ctx: &WorkflowContextView, environment: EnvironmentKey) -> Self {
        Self {
            environment,
            woken: false,
            asked: None,
            retry_at: None,
        }
    }

    #[run]
    pub async fn run(ctx: &mut WorkflowContext<Self>) -> WorkflowResult<()> {
        let environment = ctx.state(|s| s.environment.clone());
        ctx.upsert_search_attributes([
            TENANT_ID.value_set(environment.tenant_id.clone()),
            ENVIRONMENT_ID.value_set(environment.environment_id.clone()),
        ]);
        loop {
            let opts = crate::options::must_succeed_locally(WRITE_TIMEOUT);
            let read = LifetimeActivities::read;
            let Some(life) = ctx
                .execute_local_activity(read, environment.clone(), opts)
                .await?
            else {
                return Ok(());
            };
            let (asked, retry_at) = ctx.state(|s| (s.asked.is_some(), s.retry_at));
            match next(&life, asked, retry_at, now(ctx)) {
                Next::Done => return Ok(()),
                Next::WaitUntil(at) => Self::sleep_until(ctx, at).await?,
                Next::Warn(expires_at) => {
                    let request = WarnRequest {
                        environment: environment.clone(),
                        expires_at,
                    };
                    let opts = crate::options::must_succeed(WRITE_TIMEOUT);
                    ctx.execute_activity(LifetimeActivities::warn, request, opts)
                        .await?;
                }
                Next::Decommission => Self::decommission(ctx, &environment).await?,
            }
        }
    }

    /// Until `at`, or until a signal wakes the workflow.
    async fn sleep_until(ctx: &mut WorkflowContext<Self>, at: DateTime<Utc>) -> WorkflowResult<()> {
        let left = (at - now(ctx))
            .to_std()
            .unwrap_or_default()
            .max(Duration::from_secs(1));
        temporalio_sdk::workflows::select! {
            r = ctx.wait_condition(|s| s.woken || s.asked.is_some()) => { r?; }
            _ = ctx.timer(left) => {}
        };
        ctx.state_mut(|s| s.woken = false);
        Ok(())
    }

    /// Records the decommission run and follows it to its end.
    async fn decommission(
        ctx: &mut WorkflowContext<Self>,
        environment: &EnvironmentKey,
    ) -> WorkflowResult<()> {
        let request = DecommissionRequest {
            environment: environment.clone(),
            run_id: time_ordered_id(ctx),
        };
        let opts = crate::options::must_succeed(WRITE_TIMEOUT);
        let prepared = ctx
            .execute_activity(LifetimeActivities::prepare_decommission, request, opts)
            .await?;
        ctx.state_mut(|s| s.asked = None);
        // Retired meanwhile: the next read ends the workflow.
        let Some(run) = prepared else { return Ok(()) };
        let status = follow_as_child(ctx, run).await?;
        if status.state != Some(ProvisioningState::Applied) {
            let retry_at = now(ctx) + RETRY_DECOMMISSION;
            ctx.state_mut(|s| s.retry_at = Some(retry_at));
        }
        Ok(())
    }

    /// Signal `changed`: the row changed (an extension); read it again now.
    #[signal]
    pub fn changed(&mut self, _ctx: &mut SyncWorkflowContext<Self>, _unit: ()) {
        self.woken = true;
    }

    /// Signal `decommission`: an operator asks for the environment's decommission now.
    #[signal]
    pub fn decommission_now(
        &mut self,
        _ctx: &mut SyncWorkflowContext<Self>,
        asked: DecommissionAsked,
    ) {
        if self.asked.is_none() {
            self.asked = Some(asked);
        }
    }
}

fn now(ctx: &WorkflowContext<EnvironmentLifetime>) -> DateTime<Utc> {
    ctx.workflow_time()
        .map(DateTime::<Utc>::from)
        .unwrap_or_default()
}
