//! ObservationSweep (schedule `*/5 * * * *`): observe every environment with bounded fan-out,
//! then mark stale every environment not observed within `StalenessMinutes`.
//!
//! One page of environments per run, then continue-as-new with the cursor: history stays
//! bounded however many environments there are. A page is observed in batches, each one
//! activity (`inventory.observe-batch`) that reads and records its environments: a workflow
//! per environment cost four Temporal actions per environment and sweep, and the dev server
//! could not start them fast enough for 10,000 environments in one five-minute window
//! (docs/benchmarks.md). An operator's observation has its own
//! `observe/{tenant}/{env}/manual-{id}` workflow; a run observes after its apply inside its own.

use crate::contracts::{
    BatchEnvironment, EnvironmentKey, EnvironmentPageRequest, InventoryActivities,
    ObserveBatchRequest, ScheduledActivities,
};
use crate::handover::hand_over;
use crate::ids::time_ordered_id;
use serde::{Deserialize, Serialize};
use std::time::Duration;
use temporalio_macros::{workflow, workflow_methods};
use temporalio_sdk::{ContinueAsNewOptions, WorkflowContext, WorkflowContextView, WorkflowResult};

/// Environments per page (per workflow run).
const PAGE: u64 = 200;
/// Environments per batch activity; a page's batches run at once (8 in flight).
const BATCH: usize = 25;
/// Each attempt of listing a page or marking stale environments.
const STEP_TIMEOUT: Duration = Duration::from_secs(60);

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
                crate::options::must_succeed(STEP_TIMEOUT),
            )
            .await?;
        Self::observe_in_batches(ctx, &page.environments).await;
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
                crate::options::must_succeed(STEP_TIMEOUT),
            )
            .await?;
        Ok(SweepOutcome {
            window,
            observed,
            marked_stale,
        })
    }
}

impl ObservationSweep {
    /// Observes a page in batches, all in flight at once, then hands new proposals over.
    async fn observe_in_batches(ctx: &WorkflowContext<Self>, environments: &[EnvironmentKey]) {
        let batches = environments.chunks(BATCH).map(|chunk| ObserveBatchRequest {
            environments: chunk
                .iter()
                .map(|env| BatchEnvironment {
                    tenant_id: env.tenant_id.clone(),
                    environment_id: env.environment_id.clone(),
                    proposal_id: time_ordered_id(ctx),
                })
                .collect(),
        });
        let running: Vec<_> = batches
            .map(|batch| {
                ctx.execute_activity(
                    InventoryActivities::observe_batch,
                    batch,
                    crate::options::observe_batch(),
                )
            })
            .collect();
        // A batch that keeps failing must not stop the sweep: its environments go stale.
        for outcome in temporalio_sdk::workflows::join_all(running)
            .await
            .into_iter()
            .flatten()
        {
            hand_over(ctx, &outcome.superseded, outcome.new_proposals).await;
        }
    }
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
