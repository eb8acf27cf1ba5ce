//! The starter: starts the workflows of runs the API wrote but did not start
//! (`store::run_starts`), so no run's row is left without its workflow.
//!
//! A request writes its run and the run's start in one transaction, then starts the workflow
//! and forgets the start. A process killed in between leaves the start behind; so does a
//! request whose start Temporal refused when the database would not take the run back. Once a
//! start is older than `UnstartedRunGraceSeconds` its request is over (a request waits at
//! most 10 s for Temporal, `RUN_START_TIMEOUT`, and the grace is never shorter than
//! `RUN_START_IN_FLIGHT`), and every API process's starter may start it: a start is idempotent
//! by the workflow's id, so two starters or a start that had in fact reached Temporal change
//! nothing.
//!
//! Each round also admits the runs deferred for capacity that fit their project's free slots
//! (`temporal::admission`): a release admits them as it happens, this catches the rest (a
//! release whose admission failed, a start deferred just after a release looked, a holder
//! that vanished without its lease being expired yet).

use crate::AppState;
use runtime_cloud_store::run_starts;
use std::time::Duration;

/// Starts at most this many runs a round; the next round takes the rest.
const BATCH: u64 = 100;

/// Starts due runs every third of the grace until `shutdown`.
pub async fn run(state: AppState, shutdown: impl std::future::Future<Output = ()>) {
    let grace = state.options.unstarted_run_grace();
    let mut every = tokio::time::interval(grace / 3);
    every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    tokio::pin!(shutdown);
    loop {
        tokio::select! {
            () = &mut shutdown => return,
            _ = every.tick() => {
                if let Err(e) = round(&state, grace).await {
                    tracing::warn!(error = %e, "unstarted runs not started this round");
                }
            }
        }
    }
}

/// One round: starts every run due now, oldest first, then admits deferred runs; stops at
/// the first start Temporal refuses (the next round tries again).
async fn round(state: &AppState, grace: Duration) -> Result<(), crate::Error> {
    start_due(state, grace).await?;
    runtime_cloud_temporal::admission::admit_all(&state.db, &state.temporal, &state.task_queue)
        .await
        .map_err(|e| crate::Error::Unavailable(e.to_string()))?;
    Ok(())
}

async fn start_due(state: &AppState, grace: Duration) -> Result<(), crate::Error> {
    loop {
        let before = chrono::Utc::now() - grace;
        let due = run_starts::due(&state.db, before, BATCH).await?;
        let full = due.len() as u64 == BATCH;
        for input in due {
            let run_id = input.run_id.clone();
            crate::http::start_run(state, input).await?;
            crate::http::forget_start(state, &run_id).await;
            tracing::info!(%run_id, "started a run whose request ended before its workflow started");
        }
        if !full {
            return Ok(());
        }
    }
}
