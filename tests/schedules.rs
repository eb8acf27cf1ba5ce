//! The ObservationSweep and GitOpsReconciler schedules.

use crate::common::{Stack, StackOptions, eventually};
use serde_json::{Value, json};

fn describe(stack: &Stack, id: &str) -> Option<Value> {
    let out = stack.temporal_cli(&["schedule", "describe", "--schedule-id", id, "-o", "json"]);
    out.status
        .success()
        .then(|| serde_json::from_slice(&out.stdout).ok())
        .flatten()
}

/// Both schedules exist after start-up with their crons, and a second start updates them
/// instead of adding more.
#[tokio::test]
async fn schedules_exist_after_start_up_and_are_not_duplicated() {
    let mut stack = Stack::start().await;
    let sweep = format!("{}/observation-sweep", stack.task_queue);
    let reconciler = format!("{}/gitops-reconciler", stack.task_queue);
    let described = eventually(30, "the schedules to exist", || {
        let (a, b) = (describe(&stack, &sweep), describe(&stack, &reconciler));
        async move { a.zip(b) }
    })
    .await;
    let text = described.0.to_string() + &described.1.to_string();
    assert!(
        text.contains("*/5 * * * *") || text.contains("\"minute\""),
        "sweep cron: {}",
        described.0
    );
    assert!(
        text.contains("ObservationSweep") && text.contains("GitOpsReconciler"),
        "{text}"
    );

    // Start the worker again: the schedules are updated in place.
    stack.kill_worker();
    stack.start_worker();
    eventually(30, "the restarted worker to update the schedules", || {
        let logs = stack.logs();
        async move { (logs.matches("schedule updated").count() >= 2).then_some(()) }
    })
    .await;
    let listed = eventually(60, "the schedule list to show both once", || {
        let out = stack.temporal_cli(&["schedule", "list"]);
        let text = String::from_utf8_lossy(&out.stdout).to_string();
        let (sweep, reconciler) = (sweep.clone(), reconciler.clone());
        async move { (text.contains(&sweep) && text.contains(&reconciler)).then_some(text) }
    })
    .await;
    assert_eq!(listed.matches(&sweep).count(), 1, "{listed}");
    assert_eq!(listed.matches(&reconciler).count(), 1, "{listed}");
}

/// One sweep observes every environment: drift in one is found, an unreachable one is
/// marked stale without findings.
#[tokio::test]
async fn sweep_observes_every_environment() {
    let stack = Stack::with(StackOptions::proposals_wait_for_a_decision()).await;
    let api = stack.operator("acme");
    api.applied(&stack, "a", &[("api", "1.0.0", 2)]).await;
    api.applied(&stack, "b", &[("api", "1.0.0", 1)]).await;
    stack.sandbox_cli(
        "acme",
        "a",
        &["scale", "--workload", "api", "--replicas", "4"],
    );
    stack.sandbox_cli(
        "acme",
        "b",
        &["set-version", "--workload", "api", "--version", "6.6.6"],
    );
    stack.sandbox_cli("acme", "b", &["unreachable", "--on"]);

    stack.trigger_schedule("observation-sweep");
    let open = eventually(60, "the sweep to find the replica drift in a", || {
        let api = api.clone();
        async move {
            let open = api.drift("a", Some("open")).await;
            (!open.is_empty()).then_some(open)
        }
    })
    .await;
    assert_eq!(open[0]["kind"], "replica");
    // The sweep's batch handed the new proposal to its own workflow, which waits for a decision.
    let proposal = eventually(60, "the sweep's proposal for a", || {
        let api = api.clone();
        async move { api.proposals("a").await.into_iter().next() }
    })
    .await;
    assert_eq!(proposal["state"], "Proposed", "{proposal}");
    let id = format!("proposal/{}", proposal["proposalId"].as_str().unwrap());
    let described = stack.described_workflow(&id).await;
    assert_eq!(
        described["workflowExecutionInfo"]["status"], "WORKFLOW_EXECUTION_STATUS_RUNNING",
        "{described}"
    );
    let b = eventually(60, "the sweep to mark b stale", || {
        let api = api.clone();
        async move {
            let inv = api
                .get("/factory/environments/b/inventory")
                .await
                .expect(200);
            (inv["lastError"].is_string()).then_some(inv)
        }
    })
    .await;
    assert_eq!(b["stale"], true);
    assert!(
        api.drift("b", None).await.is_empty(),
        "a failed observation raises nothing"
    );
}

/// The GitOps reconciler applies a non-destructive difference outside production and turns a
/// destructive one into a proposal.
#[tokio::test]
async fn gitops_reconciler_applies_safe_differences_and_proposes_destructive_ones() {
    // Keep observation-driven proposals out of the way: only the reconciler acts here.
    let stack = Stack::with(StackOptions::proposals_wait_for_a_decision()).await;
    let api = stack.operator("acme");
    api.applied(&stack, "safe", &[("api", "1.0.0", 1)]).await;
    api.applied(&stack, "risky", &[("api", "1.0.0", 1)]).await;
    api.declare("safe", &[("api", "1.1.0", 1)]).await;
    stack.sandbox_cli("acme", "risky", &["add-unmanaged", "--workload", "miner"]);

    stack.trigger_schedule("gitops-reconciler");
    let run = eventually(60, "a reconciliation run to apply 1.1.0 on safe", || {
        let api = api.clone();
        async move {
            let runs = api.get("/factory/provisioning/runs?environmentId=safe&kind=reconciliation&state=Applied").await.expect(200);
            runs["items"].as_array().and_then(|r| r.first().cloned())
        }
    })
    .await;
    assert_eq!(run["specificationVersion"], 2);
    assert_eq!(
        stack.sandbox("acme", "safe")["workloads"][0]["version"],
        "1.1.0"
    );

    let proposal = eventually(60, "a destructive proposal on risky", || {
        let api = api.clone();
        async move {
            api.proposals("risky")
                .await
                .into_iter()
                .find(|p| p["state"] == "Proposed")
        }
    })
    .await;
    assert_eq!(proposal["destructive"], true);
    assert_eq!(proposal["planSummary"]["deletes"], 1);
    assert_eq!(
        stack.sandbox("acme", "risky")["workloads"]
            .as_array()
            .map(Vec::len),
        Some(2),
        "nothing deleted"
    );
    let runs = api
        .get("/factory/provisioning/runs?environmentId=risky&kind=reconciliation")
        .await
        .expect(200);
    assert_eq!(
        runs["items"],
        json!([]),
        "a destructive plan is never applied automatically"
    );
}
