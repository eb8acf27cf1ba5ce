//! ObservationSweep (schedule `*/5 * * * *`): observe every environment with bounded fan-out,
//! then mark stale every environment not observed within `StalenessMinutes`.
//!
//! One page of environments per run, then continue-as-new with the cursor: history stays
//! bounded however many environments there are.

use crate::contracts::{EnvironmentPageRequest, ScheduledActivities};
use crate::observe_environment::{ObserveEnvironment, ObserveInput, observe_workflow_id};
use serde::{Deserialize, Serialize};
use std::time::Duration;
use temporalio_common::RetryPolicy;
use temporalio_macros::{workflow, workflow_methods};
use temporalio_sdk::{
    ActivityOptions, ChildWorkflowOptions, ContinueAsNewOptions, WorkflowContext,
    WorkflowContextView, WorkflowResult,
};

/// Environments per page (per workflow run).
const PAGE: u64 = 200;
/// Observations in flight at once.
const FAN_OUT: usize = 25;

/// Where a sweep is; also its continue-as-new input.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SweepInput {
    /// The observation window (`202611290935`), fixed by the first run of the sweep.
    pub window: Option<String>,
    /// The page to start from.
    pub after: Option<String>,
    /// Environments observed by earlier runs of this sweep.
    pub observed: u64,
}

/// What a whole sweep did.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SweepOutcome {
    pub window: String,
    pub observed: u64,
    pub marked_stale: u64,
}

/// The ObservationSweep workflow.
#[workflow]
pub struct ObservationSweep {
    input: SweepInput,
}

/// The five-minute window a time falls in, as `YYYYMMDDHHMM`.
pub fn window_of(time: Option<std::time::SystemTime>) -> String {
    let secs = time
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map_or(0, |d| d.as_secs());
    let floored = secs - secs % 300;
    let days = floored / 86_400;
    let (h, m) = ((floored % 86_400) / 3600, (floored % 3600) / 60);
    // Civil date from days since the epoch (Howard Hinnant's algorithm).
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let mo = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(mo <= 2);
    format!("{y:04}{mo:02}{d:02}{h:02}{m:02}")
}

#[workflow_methods]
impl ObservationSweep {
    #[init]
    pub fn new(_ctx: &WorkflowContextView, input: SweepInput) -> Self {
        Self { input }
    }

    #[run]
    pub async fn run(ctx: &mut WorkflowContext<Self>) -> WorkflowResult<SweepOutcome> {
        let input = ctx.state(|s| s.input.clone());
        let window = input
            .window
            .clone()
            .unwrap_or_else(|| window_of(ctx.workflow_time()));
        let page = ctx
            .execute_activity(
                ScheduledActivities::list_environments,
                EnvironmentPageRequest {
                    after: input.after.clone(),
                    limit: PAGE,
                },
                quick_opts(),
            )
            .await?;
        for chunk in page.environments.chunks(FAN_OUT) {
            let mut results = Vec::new();
            for env in chunk {
                let id = observe_workflow_id(&env.tenant_id, &env.environment_id, &window);
                let observe = ObserveInput {
                    tenant_id: env.tenant_id.clone(),
                    environment_id: env.environment_id.clone(),
                };
                // Already observed in this window (a retried page): skip it.
                if let Ok(started) = ctx
                    .start_child_workflow(
                        ObserveEnvironment::run,
                        observe,
                        ChildWorkflowOptions::workflow_id(id),
                    )
                    .await
                {
                    results.push(started.result());
                }
            }
            // One environment's failure must not stop the sweep.
            let _ = temporalio_sdk::workflows::join_all(results).await;
        }
        let observed = input.observed + page.environments.len() as u64;
        if page.next.is_some() {
            let next = SweepInput {
                window: Some(window.clone()),
                after: page.next,
                observed,
            };
            ctx.continue_as_new(next, ContinueAsNewOptions::default())?;
        }
        let marked_stale = ctx
            .execute_activity(
                ScheduledActivities::mark_stale,
                window.clone(),
                quick_opts(),
            )
            .await?;
        Ok(SweepOutcome {
            window,
            observed,
            marked_stale,
        })
    }
}

fn quick_opts() -> ActivityOptions {
    ActivityOptions::with_start_to_close_timeout(Duration::from_secs(60))
        .retry_policy(
            RetryPolicy::builder()
                .maximum_interval(Duration::from_secs(10))
                .build(),
        )
        .build()
}

#[cfg(test)]
mod tests {
    use super::window_of;
    use std::time::{Duration, UNIX_EPOCH};

    #[test]
    fn windows_are_five_minute_buckets() {
        // 2026-11-29T09:37:12Z
        let t = UNIX_EPOCH + Duration::from_secs(1_795_945_032);
        assert_eq!(window_of(Some(t)), "202611290935");
        assert_eq!(window_of(Some(UNIX_EPOCH)), "197001010000");
    }
}
