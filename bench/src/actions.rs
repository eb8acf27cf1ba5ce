//! Temporal actions, the unit a hosted Temporal bills by, estimated from event histories.
//!
//! The estimate counts one action per history event of these types, in every workflow run
//! involved: a workflow run started (by a client, a schedule, a parent or continue-as-new), an
//! activity scheduled, a timer started, a signal received, a search-attribute upsert, a marker
//! recorded (side effects, patches) and a workflow-properties change. The matching events on the
//! other side (child started, signal sent, continued-as-new) are not counted again, nor are
//! workflow tasks, which are not billed. Activity retries and heartbeats would add more; the
//! benchmarks run none. This follows the categories of Temporal Cloud's pricing page; the
//! provider's own meter is the authority.

use futures::StreamExt;
use std::collections::BTreeMap;
use temporalio_client::{Client, WorkflowExecutionInfo, WorkflowListOptions};

/// Histories fetched per workflow type (all runs of one type have the same shape here).
const SAMPLE: usize = 50;

/// Whether an event type (its proto name) is billed as an action.
pub fn is_action(event_type: &str) -> bool {
    matches!(
        event_type,
        "EVENT_TYPE_WORKFLOW_EXECUTION_STARTED"
            | "EVENT_TYPE_ACTIVITY_TASK_SCHEDULED"
            | "EVENT_TYPE_TIMER_STARTED"
            | "EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED"
            | "EVENT_TYPE_UPSERT_WORKFLOW_SEARCH_ATTRIBUTES"
            | "EVENT_TYPE_MARKER_RECORDED"
            | "EVENT_TYPE_WORKFLOW_PROPERTIES_MODIFIED"
    )
}

/// What the workflow runs matching a query cost.
#[derive(Debug, Clone, Default)]
pub struct Tally {
    /// Workflow runs (continue-as-new runs count separately).
    pub runs: usize,
    /// History events, summed over every run (exact, from visibility).
    pub events: i64,
    /// Estimated actions: every run counted, per-type means from up to 50 histories each.
    pub actions: f64,
    /// Workflow runs by type.
    pub by_type: BTreeMap<String, usize>,
}

/// Counts the workflow runs matching `query` (e.g. `TaskQueue='q'`).
pub async fn tally(client: &Client, query: &str) -> anyhow::Result<Tally> {
    let mut stream = client.list_workflows(query, WorkflowListOptions::default());
    let mut tally = Tally::default();
    let mut samples: BTreeMap<String, Vec<(String, String)>> = BTreeMap::new();
    while let Some(w) = stream.next().await {
        let w = w?;
        tally.runs += 1;
        tally.events += w.history_length();
        *tally
            .by_type
            .entry(w.workflow_type().to_owned())
            .or_default() += 1;
        let sample = samples.entry(w.workflow_type().to_owned()).or_default();
        if sample.len() < SAMPLE {
            sample.push((w.id().to_owned(), w.run_id().to_owned()));
        }
    }
    for (ty, runs) in &samples {
        let mut actions = 0usize;
        for (id, run) in runs {
            actions += actions_of(client, id, run).await?;
        }
        let mean = actions as f64 / runs.len().max(1) as f64;
        tally.actions += mean * tally.by_type[ty] as f64;
    }
    Ok(tally)
}

/// The actions in one run's history.
pub async fn actions_of(client: &Client, workflow_id: &str, run_id: &str) -> anyhow::Result<usize> {
    let info = WorkflowExecutionInfo::builder()
        .namespace("default")
        .workflow_id(workflow_id)
        .run_id(run_id.to_owned())
        .build();
    let mut history = info
        .bind_untyped(client.clone())
        .fetch_history(Default::default());
    let mut n = 0;
    while let Some(event) = history.next().await {
        if is_action(event?.event_type().as_str_name()) {
            n += 1;
        }
    }
    Ok(n)
}

#[cfg(test)]
mod tests {
    #[test]
    fn workflow_tasks_are_not_actions() {
        assert!(super::is_action("EVENT_TYPE_ACTIVITY_TASK_SCHEDULED"));
        assert!(!super::is_action("EVENT_TYPE_WORKFLOW_TASK_COMPLETED"));
        assert!(!super::is_action(
            "EVENT_TYPE_START_CHILD_WORKFLOW_EXECUTION_INITIATED"
        ));
    }
}
