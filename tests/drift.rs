//! Observed state, drift findings and reconciliation proposals, end to end: drift is made
//! with the sandbox CLI the way a person with cluster access would, then observed.

use crate::common::{Api, Stack, StackOptions, eventually, text};
use serde_json::{Value, json};

/// An environment whose baseline (api 1.0.0 ×2, web 2.0.0 ×1) is applied.
async fn applied_environment(stack: &Stack, class: &str) -> Api {
    let api = stack.operator("acme");
    api.environment("env", class).await;
    api.declare("env", &[("api", "1.0.0", 2), ("web", "2.0.0", 1)])
        .await;
    let body = json!({ "environmentId": "env", "kind": "baseline", "approvalId": api.approval_id("env").await });
    let run = api
        .post("/factory/provisioning/runs", body)
        .await
        .expect(202);
    let run_id = text(&run["provisioningRunId"]);
    api.wait_state(&run_id, "Applied").await;
    // The apply starts an observation of its own; let it finish so it does not race the
    // drift each test makes next.
    api.wait_observed_after(stack, &run_id).await;
    api
}

fn of_kind<'a>(findings: &'a [Value], kind: &str) -> Vec<&'a Value> {
    findings.iter().filter(|f| f["kind"] == kind).collect()
}

/// Produces one drift kind outside production, observes it, and follows the auto-accepted
/// proposal through its reconciliation run to the re-observation that resolves the finding.
async fn drift_is_found_reconciled_and_resolved(kind: &str, cli: &[&str], resource: &str) {
    let stack = Stack::start().await;
    let api = applied_environment(&stack, "non-production").await;
    let clean = api.observe(&stack, "env").await;
    assert_eq!(
        clean["newFindings"], 0,
        "no drift right after the apply: {clean}"
    );

    stack.sandbox_cli("acme", "env", cli);
    let outcome = api.observe(&stack, "env").await;
    assert_eq!(outcome["newFindings"], 1, "{outcome}");
    let open = api.drift("env", Some("open")).await;
    let found = of_kind(&open, kind);
    assert_eq!(found.len(), 1, "one {kind} finding: {open:?}");
    assert_eq!(found[0]["resource"], resource);
    let finding_id = text(&found[0]["findingId"]);
    let events = stack.events("RuntimeDriftDetected").await;
    assert!(
        events
            .iter()
            .any(|e| e["payload"]["findingId"] == finding_id.as_str()
                && e["payload"]["kind"] == kind)
    );

    // Non-destructive outside production: accepted by policy, reconciled, applied.
    let proposal = outcome["newProposal"]["proposalId"]
        .as_str()
        .expect("a proposal")
        .to_owned();
    let applied = api.wait_proposal("env", &proposal, "Applied").await;
    assert_eq!(applied["decidedBy"], "policy");
    let run_id = applied["provisioningRunId"]
        .as_str()
        .expect("its run")
        .to_owned();
    let run = api.run(&run_id).await;
    assert_eq!(run["kind"], "reconciliation");
    assert_eq!(run["state"], "Applied");

    // The observation after the apply resolves the finding; nothing else is open.
    let resolved = eventually(60, "the finding to be resolved", || {
        let api = api.clone();
        let finding_id = finding_id.clone();
        async move {
            api.drift("env", Some("resolved"))
                .await
                .into_iter()
                .find(|f| f["findingId"] == finding_id.as_str())
        }
    })
    .await;
    assert!(resolved["resolvedAt"].is_string());
    assert!(api.drift("env", Some("open")).await.is_empty());
    let decided = stack.events("ReconciliationDecided").await;
    assert!(
        decided
            .iter()
            .any(|e| e["payload"]["proposalId"] == proposal.as_str()
                && e["payload"]["state"] == "Accepted")
    );
}

#[tokio::test]
async fn version_drift_is_reconciled() {
    drift_is_found_reconciled_and_resolved(
        "version",
        &[
            "set-version",
            "--workload",
            "api",
            "--version",
            "1.0.1-hotfix",
        ],
        "deployment/api",
    )
    .await;
}

#[tokio::test]
async fn replica_drift_is_reconciled() {
    drift_is_found_reconciled_and_resolved(
        "replica",
        &["scale", "--workload", "web", "--replicas", "5"],
        "deployment/web",
    )
    .await;
}

#[tokio::test]
async fn configuration_drift_is_reconciled() {
    let cli = [
        "set-config",
        "--workload",
        "api",
        "--key",
        "settings",
        "--reference",
        "config://shop/other",
    ];
    drift_is_found_reconciled_and_resolved("configuration", &cli, "deployment/api").await;
}

#[tokio::test]
async fn secret_binding_drift_is_reconciled() {
    drift_is_found_reconciled_and_resolved(
        "secret-binding",
        &["set-secret", "--workload", "web", "--key", "db"],
        "deployment/web",
    )
    .await;
}

#[tokio::test]
async fn missing_workload_is_reconciled() {
    drift_is_found_reconciled_and_resolved(
        "missing",
        &["delete", "--workload", "web"],
        "deployment/web",
    )
    .await;
}

/// Only an unmanaged workload: the proposal adopts it (declares a new version that matches
/// what runs) instead of deleting it.
#[tokio::test]
async fn unmanaged_workload_is_adopted() {
    drift_is_found_reconciled_and_resolved(
        "unmanaged",
        &["add-unmanaged", "--workload", "debug", "--version", "0.9.0"],
        "deployment/debug",
    )
    .await;
}

/// After adoption the declared specification includes the adopted workload.
#[tokio::test]
async fn adoption_declares_what_was_observed() {
    let stack = Stack::start().await;
    let api = applied_environment(&stack, "non-production").await;
    stack.sandbox_cli(
        "acme",
        "env",
        &["add-unmanaged", "--workload", "debug", "--version", "0.9.0"],
    );
    let outcome = api.observe(&stack, "env").await;
    assert_eq!(outcome["newProposal"]["direction"], "adopt-observed");
    let proposal = text(&outcome["newProposal"]["proposalId"]);
    api.wait_proposal("env", &proposal, "Applied").await;
    let specs = api
        .get("/factory/provisioning/specifications?environmentId=env")
        .await
        .expect(200);
    let latest = &specs["items"][0];
    assert_eq!(latest["version"], 2);
    let names: Vec<&str> = latest["workloads"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|w| w["name"].as_str())
        .collect();
    assert!(
        names.contains(&"debug") && names.contains(&"api"),
        "{latest}"
    );
    assert_eq!(
        stack.sandbox("acme", "env")["workloads"]
            .as_array()
            .map(Vec::len),
        Some(3),
        "nothing was deleted"
    );
}

/// In production nothing is auto-accepted: the operator decides, and only with the Operator
/// role; accepting applies and the finding resolves.
#[tokio::test]
async fn production_proposal_waits_for_an_operator() {
    let stack = Stack::start().await;
    let api = applied_environment(&stack, "production").await;
    stack.sandbox_cli(
        "acme",
        "env",
        &["scale", "--workload", "api", "--replicas", "7"],
    );
    let outcome = api.observe(&stack, "env").await;
    let proposal = outcome["newProposal"]["proposalId"]
        .as_str()
        .expect("a proposal")
        .to_owned();
    let p = api.wait_proposal("env", &proposal, "Proposed").await;
    assert_eq!(p["destructive"], false);

    let intern = stack.without_roles("acme", &["factory.runtime.read", "factory.runtime.operate"]);
    let decide = format!("/factory/reconciliation/proposals/{proposal}/decide");
    intern
        .post(
            &decide,
            json!({ "decision": "accept", "reason": "looks fine" }),
        )
        .await
        .expect_problem(403);
    let reader = stack.client("acme", &["factory.runtime.read"]);
    reader
        .post(&decide, json!({ "decision": "accept" }))
        .await
        .expect_problem(403);

    api.post(&decide, json!({ "decision": "accept", "reason": "INC-42" }))
        .await
        .expect(202);
    let applied = api.wait_proposal("env", &proposal, "Applied").await;
    assert_eq!(applied["decidedBy"], "tester");
    assert_eq!(applied["decisionReason"], "INC-42");
    eventually(60, "the replica finding to resolve", || {
        let api = api.clone();
        async move {
            api.drift("env", Some("open"))
                .await
                .is_empty()
                .then_some(())
        }
    })
    .await;
    assert_eq!(stack.sandbox("acme", "env")["workloads"][0]["replicas"], 2);
    api.post(&decide, json!({ "decision": "reject" }))
        .await
        .expect_problem(409);
}

/// A rejected proposal changes nothing; its finding stays open.
#[tokio::test]
async fn rejected_proposal_changes_nothing() {
    let stack = Stack::start().await;
    let api = applied_environment(&stack, "production").await;
    stack.sandbox_cli(
        "acme",
        "env",
        &["set-version", "--workload", "web", "--version", "2.0.1"],
    );
    let outcome = api.observe(&stack, "env").await;
    let proposal = outcome["newProposal"]["proposalId"]
        .as_str()
        .expect("a proposal")
        .to_owned();
    api.wait_proposal("env", &proposal, "Proposed").await;
    api.post(
        &format!("/factory/reconciliation/proposals/{proposal}/decide"),
        json!({ "decision": "reject", "reason": "hotfix stays" }),
    )
    .await
    .expect(202);
    let rejected = api.wait_proposal("env", &proposal, "Rejected").await;
    assert_eq!(rejected["provisioningRunId"], Value::Null);
    assert_eq!(api.drift("env", Some("open")).await.len(), 1);
    assert_eq!(
        stack.sandbox("acme", "env")["workloads"][1]["version"],
        "2.0.1"
    );
}

/// A newer proposal for the environment supersedes the open one.
#[tokio::test]
async fn newer_proposal_supersedes_the_open_one() {
    let stack = Stack::start().await;
    let api = applied_environment(&stack, "production").await;
    stack.sandbox_cli(
        "acme",
        "env",
        &["scale", "--workload", "api", "--replicas", "3"],
    );
    let first = text(&api.observe(&stack, "env").await["newProposal"]["proposalId"]);
    api.wait_proposal("env", &first, "Proposed").await;
    // Observing again without a change keeps the open proposal.
    assert_eq!(api.observe(&stack, "env").await["newProposal"], Value::Null);

    stack.sandbox_cli(
        "acme",
        "env",
        &["set-version", "--workload", "web", "--version", "9.9.9"],
    );
    let second = api.observe(&stack, "env").await;
    assert_eq!(second["superseded"], json!([first]));
    let second = text(&second["newProposal"]["proposalId"]);
    api.wait_proposal("env", &first, "Superseded").await;
    let p = api.wait_proposal("env", &second, "Proposed").await;
    assert_eq!(p["findingIds"].as_array().map(Vec::len), Some(2));
    // A superseded proposal can no longer be decided.
    api.post(
        &format!("/factory/reconciliation/proposals/{first}/decide"),
        json!({ "decision": "accept" }),
    )
    .await
    .expect_problem(409);
}

/// Deleting an unmanaged workload is destructive: outside production it still waits.
#[tokio::test]
async fn destructive_proposal_is_not_auto_accepted() {
    let stack = Stack::start().await;
    let api = applied_environment(&stack, "non-production").await;
    stack.sandbox_cli("acme", "env", &["add-unmanaged", "--workload", "miner"]);
    stack.sandbox_cli(
        "acme",
        "env",
        &["set-version", "--workload", "api", "--version", "0.1.0"],
    );
    let outcome = api.observe(&stack, "env").await;
    assert_eq!(outcome["newProposal"]["destructive"], true);
    assert_eq!(outcome["newProposal"]["autoAccept"], false);
    let proposal = text(&outcome["newProposal"]["proposalId"]);
    let p = api.wait_proposal("env", &proposal, "Proposed").await;
    assert_eq!(p["direction"], "apply-declared");
    assert_eq!(p["planSummary"]["deletes"], 1);
}

/// An unreachable target marks the environment stale and raises no finding.
#[tokio::test]
async fn unreachable_target_is_stale_without_findings() {
    let stack = Stack::start().await;
    let api = applied_environment(&stack, "non-production").await;
    api.observe(&stack, "env").await;
    stack.sandbox_cli(
        "acme",
        "env",
        &["scale", "--workload", "api", "--replicas", "9"],
    );
    stack.sandbox_cli("acme", "env", &["unreachable", "--on"]);
    let outcome = api.observe(&stack, "env").await;
    assert_eq!(outcome["stale"], true);
    assert_eq!(outcome["newFindings"], 0);
    let inventory = api
        .get("/factory/environments/env/inventory")
        .await
        .expect(200);
    assert_eq!(inventory["stale"], true);
    assert!(
        inventory["lastError"]
            .as_str()
            .unwrap_or_default()
            .contains("unreachable"),
        "{inventory}"
    );
    assert_eq!(
        inventory["workloads"].as_array().map(Vec::len),
        Some(2),
        "the last good observation is kept"
    );
    assert!(api.drift("env", None).await.is_empty());
    let changed = stack.events("ObservedStateChanged").await;
    assert_eq!(
        changed.last().map(|e| e["payload"]["stale"].clone()),
        Some(json!(true))
    );
}

/// Without an observation within `StalenessMinutes` the inventory is stale.
#[tokio::test]
async fn inventory_goes_stale_after_the_window() {
    // 0.02 minutes = 1.2 s
    let stack = Stack::with(StackOptions::with_env(
        "RuntimeCloud__Inventory__StalenessMinutes",
        "0.02",
    ))
    .await;
    let api = applied_environment(&stack, "non-production").await;
    api.observe(&stack, "env").await;
    let fresh = api
        .get("/factory/environments/env/inventory")
        .await
        .expect(200);
    assert!(fresh["observedAt"].is_string());
    let inv = eventually(30, "the inventory to go stale", || {
        let api = api.clone();
        async move {
            let inv = api
                .get("/factory/environments/env/inventory")
                .await
                .expect(200);
            (inv["stale"] == true).then_some(inv)
        }
    })
    .await;
    assert_eq!(inv["observedAt"], fresh["observedAt"]);
}

/// The inventory shows workloads with versions, replicas, endpoints and bindings by reference.
#[tokio::test]
async fn inventory_shows_observed_workloads() {
    let stack = Stack::start().await;
    let api = applied_environment(&stack, "non-production").await;
    let never = stack.operator("acme");
    never.environment("empty", "non-production").await;
    let empty = never
        .get("/factory/environments/empty/inventory")
        .await
        .expect(200);
    assert_eq!(empty["stale"], true, "never observed is stale, not assumed");
    assert_eq!(empty["observedAt"], Value::Null);

    // The apply itself triggers an observation.
    let inv = eventually(30, "the observation after the apply", || {
        let api = api.clone();
        async move {
            let inv = api
                .get("/factory/environments/env/inventory")
                .await
                .expect(200);
            (inv["stale"] == false).then_some(inv)
        }
    })
    .await;
    let api_w = inv["workloads"]
        .as_array()
        .and_then(|w| w.iter().find(|w| w["name"] == "api"))
        .cloned()
        .unwrap_or_default();
    assert_eq!(api_w["version"], "1.0.0");
    assert_eq!(api_w["replicasReady"], 2);
    assert_eq!(api_w["replicasDesired"], 2);
    assert_eq!(api_w["secretRefs"]["db"], "secretbroker://shop/api/db");
    assert!(
        api_w["endpoints"][0]
            .as_str()
            .unwrap_or_default()
            .starts_with("https://api.")
    );
    assert_eq!(inv["specificationVersion"], 1);

    let other = stack.operator("globex");
    other
        .get("/factory/environments/env/inventory")
        .await
        .expect_problem(404);
    other
        .get("/factory/environments/env/drift")
        .await
        .expect_problem(404);
    other
        .post("/factory/environments/env/observe", json!({}))
        .await
        .expect_problem(404);
    stack
        .client("acme", &["factory.provisioning.read"])
        .get("/factory/environments/env/inventory")
        .await
        .expect_problem(403);
}

/// A proposal whose reconciliation run fails stays `Accepted` with its run; the next
/// observation raises a new proposal for the drift that is still there.
#[tokio::test]
async fn failed_reconciliation_leads_to_a_new_proposal() {
    let stack = Stack::start().await;
    let api = applied_environment(&stack, "production").await;
    stack.sandbox_cli(
        "acme",
        "env",
        &["scale", "--workload", "web", "--replicas", "4"],
    );
    let first = text(&api.observe(&stack, "env").await["newProposal"]["proposalId"]);
    api.wait_proposal("env", &first, "Proposed").await;
    stack.sandbox_cli(
        "acme",
        "env",
        &[
            "fail-next-apply",
            "--reason",
            "deployment/web: node pool exhausted",
        ],
    );
    api.post(
        &format!("/factory/reconciliation/proposals/{first}/decide"),
        json!({ "decision": "accept" }),
    )
    .await
    .expect(202);
    let accepted = api.wait_proposal("env", &first, "Accepted").await;
    let run = text(&accepted["provisioningRunId"]);
    let failed = api.wait_state(&run, "Failed").await;
    assert_eq!(failed["reason"], "deployment/web: node pool exhausted");

    let second = eventually(60, "a new proposal for the drift still there", || {
        let api = api.clone();
        let stack = &stack;
        let first = first.clone();
        async move {
            // The observation after the failed apply may have raised it already.
            api.observe(stack, "env").await;
            api.proposals("env")
                .await
                .into_iter()
                .find(|p| p["proposalId"] != first.as_str() && p["state"] == "Proposed")
                .and_then(|p| p["proposalId"].as_str().map(str::to_owned))
        }
    })
    .await;
    api.wait_proposal("env", &second, "Proposed").await;
    assert_eq!(
        api.proposals("env")
            .await
            .iter()
            .find(|p| p["proposalId"] == first.as_str())
            .map(|p| p["state"].clone()),
        Some(json!("Accepted"))
    );
}

/// Several observations of one drifted environment at the same moment on PostgreSQL (where
/// their transactions do not serialize) raise each finding once.
#[tokio::test]
async fn concurrent_observations_raise_each_finding_once() {
    let stack = Stack::with(StackOptions {
        db: Some(crate::common::Db::Postgres),
        ..StackOptions::proposals_wait_for_a_decision()
    })
    .await;
    let api = applied_environment(&stack, "non-production").await;
    stack.sandbox_cli(
        "acme",
        "env",
        &["scale", "--workload", "api", "--replicas", "5"],
    );
    stack.sandbox_cli(
        "acme",
        "env",
        &["set-version", "--workload", "web", "--version", "2.1.0"],
    );

    let observations = (0..4).map(|_| api.observe(&stack, "env"));
    futures::future::join_all(observations).await;

    let open = api.drift("env", Some("open")).await;
    let mut keys: Vec<(String, String)> = open
        .iter()
        .map(|f| (f["kind"].to_string(), f["resource"].to_string()))
        .collect();
    keys.sort();
    let total = keys.len();
    keys.dedup();
    assert_eq!(keys.len(), total, "a finding was raised twice: {open:?}");
    assert_eq!(total, 2, "{open:?}");
}

/// An environment in `observe` mode (detect-only) raises findings and their events but no
/// proposal; switched to `propose`, its open findings are grouped into a proposal at once that
/// waits for an operator even outside production; the switches are recorded as events.
#[tokio::test]
async fn an_observe_environment_finds_drift_but_proposes_nothing_until_it_may() {
    let stack = Stack::start().await;
    let api = applied_environment(&stack, "non-production").await;
    let env = api
        .send(
            reqwest::Method::PUT,
            "/factory/environments/env/mode",
            Some(json!({ "mode": "observe" })),
            &[],
        )
        .await
        .expect(200);
    assert_eq!(env["mode"], "observe");
    stack.sandbox_cli(
        "acme",
        "env",
        &["scale", "--workload", "web", "--replicas", "3"],
    );
    let outcome = api.observe(&stack, "env").await;
    assert_eq!(outcome["newFindings"], 1, "{outcome}");
    assert_eq!(outcome["newProposal"], Value::Null, "{outcome}");
    assert_eq!(stack.events("RuntimeDriftDetected").await.len(), 1);
    assert!(api.proposals("env").await.is_empty());
    assert!(stack.events("ReconciliationProposed").await.is_empty());

    let env = api
        .send(
            reqwest::Method::PUT,
            "/factory/environments/env/mode",
            Some(json!({ "mode": "propose" })),
            &[],
        )
        .await
        .expect(200);
    assert_eq!(env["mode"], "propose");
    let proposal = eventually(30, "the open finding grouped into a proposal", || {
        let api = api.clone();
        async move { api.proposals("env").await.into_iter().next() }
    })
    .await;
    let id = text(&proposal["proposalId"]);
    // Not auto-accepted although non-destructive and outside production: `propose` mode.
    let waiting = api.wait_proposal("env", &id, "Proposed").await;
    assert_eq!(waiting["findingIds"].as_array().map(Vec::len), Some(1));
    let changes = stack.events("EnvironmentModeChanged").await;
    let moves: Vec<(Value, Value)> = changes
        .iter()
        .map(|e| {
            (
                e["payload"]["before"].clone(),
                e["payload"]["after"].clone(),
            )
        })
        .collect();
    assert_eq!(
        moves,
        [
            (json!("auto"), json!("observe")),
            (json!("observe"), json!("propose"))
        ]
    );
    let bad = api
        .send(
            reqwest::Method::PUT,
            "/factory/environments/env/mode",
            Some(json!({ "mode": "yolo" })),
            &[],
        )
        .await;
    assert!(
        matches!(bad.status.as_u16(), 400 | 422),
        "an unknown mode is refused: {}",
        bad.status
    );
}

/// What an observation's first step records: acme's `env` seen running `workloads` now.
fn observed_now(
    stack: &Stack,
    workloads: Vec<runtime_cloud_models::observation::ObservedWorkload>,
) -> runtime_cloud_models::inventory::RecordRequest {
    use runtime_cloud_models::observation::Observation;
    runtime_cloud_models::inventory::RecordRequest {
        tenant_id: stack.tenant("acme"),
        environment_id: "env".into(),
        observation: Observation::Observed {
            workloads,
            resources: Vec::new(),
            posture: Vec::new(),
            resource_types: Default::default(),
            observed_at: Some(chrono::Utc::now()),
        },
        proposal_id: uuid::Uuid::now_v7().to_string(),
    }
}

/// An observation records its proposal and then starts the proposal's workflow; an operator
/// who decides in between (the proposal is listed already) is not refused: the decision starts
/// the workflow itself, with the decision, and the observation's own start finds it running.
#[tokio::test]
async fn a_proposal_decided_before_its_workflow_started_is_decided() {
    use runtime_cloud_models::observation::ObservedWorkload;
    let stack = Stack::with(StackOptions::proposals_wait_for_a_decision()).await;
    let api = applied_environment(&stack, "non-production").await;
    // Record an observation of drift the way the observation's first step does, and stop
    // there: the proposal's row exists, its workflow does not.
    let inventory = api
        .get("/factory/environments/env/inventory")
        .await
        .expect(200);
    let mut workloads: Vec<ObservedWorkload> =
        serde_json::from_value(inventory["workloads"].clone()).expect("workloads");
    workloads[1].version = "2.0.1".into();
    let db = stack.db().await;
    let recorded = runtime_cloud_transactions::record_observation(
        &db,
        &observed_now(&stack, workloads),
        runtime_cloud_store::proposals::Acceptance::default(),
    )
    .await
    .expect("record");
    let proposal = recorded.new_proposal.expect("a proposal").proposal_id;
    api.post(
        &format!("/factory/reconciliation/proposals/{proposal}/decide"),
        json!({ "decision": "reject", "reason": "the hotfix stays" }),
    )
    .await
    .expect(202);
    let rejected = api.wait_proposal("env", &proposal, "Rejected").await;
    assert_eq!(rejected["decidedBy"], "tester", "{rejected}");
    // A decided proposal's workflow has ended; deciding again is refused, not restarted.
    api.post(
        &format!("/factory/reconciliation/proposals/{proposal}/decide"),
        json!({ "decision": "accept" }),
    )
    .await
    .expect_problem(409);
}

/// A sweep's page records its batch, then starts the batch's proposals' workflows; an
/// observation that supersedes one of them in between cannot tell a workflow that does not
/// exist yet. The workflow, once started, reads its row first and ends `Superseded`: it neither
/// waits for a decision nobody can give nor, auto-accepted, plans a run for stale drift.
#[tokio::test(flavor = "multi_thread")]
async fn a_proposal_superseded_before_its_workflow_started_ends_superseded() {
    use runtime_cloud_models::observation::ObservedWorkload;
    use runtime_cloud_workflows::ReconciliationProposal;
    use runtime_cloud_workflows::ids::proposal_workflow_id;
    use temporalio_client::{WorkflowGetResultOptions, WorkflowStartOptions};
    let stack = Stack::start().await;
    let api = applied_environment(&stack, "non-production").await;
    let inventory = api
        .get("/factory/environments/env/inventory")
        .await
        .expect(200);
    let applied: Vec<ObservedWorkload> =
        serde_json::from_value(inventory["workloads"].clone()).expect("workloads");
    let db = stack.db().await;
    // Two observations recorded the way a page records them: the first raises a proposal,
    // the second (more drift) supersedes it. Neither starts a workflow.
    let record = |api_replicas: u32| {
        let mut workloads = applied.clone();
        workloads[0].replicas_desired = api_replicas;
        workloads[0].replicas_ready = api_replicas;
        workloads[1].version = "2.0.1".into();
        observed_now(&stack, workloads)
    };
    // What the page knows of a fresh observation the policy allows, with the option on.
    let acceptance = runtime_cloud_store::proposals::Acceptance {
        option: true,
        policy_allows: true,
        fresh: true,
    };
    let first = runtime_cloud_transactions::record_observation(&db, &record(2), acceptance)
        .await
        .expect("record")
        .new_proposal
        .expect("a proposal");
    assert!(first.auto_accept, "outside production, non-destructive");
    let second = runtime_cloud_transactions::record_observation(&db, &record(5), acceptance)
        .await
        .expect("record again");
    assert_eq!(second.superseded, vec![first.proposal_id.clone()]);

    // Now the first page's hand-over starts the superseded proposal's workflow.
    let client = stack.temporal_client().await;
    let id = proposal_workflow_id(&first.proposal_id);
    let opts = WorkflowStartOptions::new(stack.task_queue.clone(), id.clone()).build();
    let handle = client
        .start_workflow(ReconciliationProposal::run, first.clone(), opts)
        .await
        .expect("start");
    let ended = tokio::time::timeout(
        std::time::Duration::from_secs(60),
        handle.get_result(WorkflowGetResultOptions::default()),
    )
    .await
    .expect("the workflow ends")
    .expect("its result");
    assert_eq!(
        ended,
        runtime_cloud_models::drift::ProposalState::Superseded
    );
    let row = api
        .proposals("env")
        .await
        .into_iter()
        .find(|p| p["proposalId"] == first.proposal_id.as_str())
        .expect("the proposal is listed");
    assert_eq!(row["state"], "Superseded", "{row}");
    assert_eq!(
        row["provisioningRunId"],
        Value::Null,
        "no run for stale drift"
    );
}

/// An unmanaged sandbox workload's proposal offers its generated `workloads[]` entry, as
/// observed; a proposal of other drift offers nothing.
#[tokio::test]
async fn an_unmanaged_workloads_proposal_offers_its_generated_entry() {
    let stack = Stack::with(StackOptions::proposals_wait_for_a_decision()).await;
    let api = applied_environment(&stack, "non-production").await;
    stack.sandbox_cli("acme", "env", &["add-unmanaged", "--workload", "miner"]);
    let outcome = api.observe(&stack, "env").await;
    let id = text(&outcome["newProposal"]["proposalId"]);
    let proposal = api.wait_proposal("env", &id, "Proposed").await;
    let inventory = api
        .get("/factory/environments/env/inventory")
        .await
        .expect(200);
    let miner = inventory["workloads"]
        .as_array()
        .and_then(|w| w.iter().find(|w| w["name"] == "miner"))
        .cloned()
        .expect("miner observed");
    assert_eq!(
        proposal["generated"],
        json!([{ "workload": "miner", "format": "specification",
                 "manifest": { "name": "miner", "kind": miner["kind"], "version": miner["version"],
                               "replicas": miner["replicasDesired"],
                               "configRefs": miner["configRefs"], "secretRefs": miner["secretRefs"] } }]),
        "{proposal}"
    );
}
