//! ObservationSweep (schedule `*/5 * * * *`): observe every environment with bounded fan-out,
//! then mark stale every environment not observed within `StalenessMinutes`.
//!
//! A page of environments is one activity (`inventory.observe-page`) that lists, reads and
//! records them and starts the workflows of the proposals they raise; the sweep runs its
//! pages one after another and continues as new every [`PAGES_PER_RUN`] pages, so history
//! stays bounded however many environments there are. The shape is the cost: a workflow per
//! environment cost four Temporal actions per environment and sweep, and pages of 200 in
//! batch activities of 25 (their proposals started as child workflows one at a time) spent
//! most of a sweep in round trips to the server (docs/benchmarks.md, section 2). An
//! operator's observation has its own `observe/{tenant}/{env}/manual-{id}` workflow; a run
//! observes after its apply inside its own.

use crate::contracts::{
    EnvironmentPageRequest, InventoryActivities, ObservePageRequest, ScheduledActivities,
};
use serde::{Deserialize, Serialize};
use std::time::Duration;
use temporalio_macros::{workflow, workflow_methods};
use temporalio_sdk::{ContinueAsNewOptions, WorkflowContext, WorkflowContextView, WorkflowResult};

/// Environments per page (per activity).
const PAGE: u64 = 1000;
/// Pages per workflow run, then continue-as-new (about eight history events a page).
const PAGES_PER_RUN: u32 = 25;
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
        let (mut after, mut observed) = (input.after, input.observed);
        let mut pages = 0;
        loop {
            let request = ObservePageRequest {
                after: after.clone(),
                limit: PAGE,
                proposal_seed: format!("{}/{pages}", ctx.run_id()),
                proposed_at_millis: millis(ctx.workflow_time()),
            };
            let outcome = ctx
                .execute_activity(
                    InventoryActivities::observe_page,
                    request,
                    crate::options::observe_page(),
                )
                .await;
            let next = match outcome {
                Ok(page) => {
                    observed += u64::from(page.observed);
                    page.next
                }
                // A page that keeps failing must not stop the sweep: its environments go
                // stale, and the sweep goes on after them.
                Err(_) => {
                    let skipped = EnvironmentPageRequest {
                        after: after.clone(),
                        limit: PAGE,
                    };
                    ctx.execute_activity(
                        ScheduledActivities::list_environments,
                        skipped,
                        crate::options::must_succeed(STEP_TIMEOUT),
                    )
                    .await?
                    .next
                }
            };
            pages += 1;
            let Some(next) = next else { break };
            after = Some(next);
            if pages >= PAGES_PER_RUN || ctx.continue_as_new_suggested() {
                let next = SweepInput {
                    window: Some(window.clone()),
                    after: after.clone(),
                    observed,
                };
                ctx.continue_as_new(next, ContinueAsNewOptions::default())?;
            }
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

/// Milliseconds since the epoch of a workflow time.
fn millis(time: Option<std::time::SystemTime>) -> u64 {
    time.and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map_or(0, |d| d.as_millis() as u64)
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
