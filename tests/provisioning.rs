//! Provisioning runs: plan → approval when production → apply → receipts.

use crate::common::{Db, Stack, StackOptions, eventually, text};
use runtime_cloud_store::semaphores;
use serde_json::json;

/// A non-production run plans, applies without an approval, converges the sandbox and
/// records its receipts and events.
async fn non_production_run_applies_on(db: Db) {
    let stack = Stack::on(db).await;
    let api = stack.operator("acme");
    api.environment("dev-1", "non-production").await;
    api.declare("dev-1", &[("api", "1.0.0", 2), ("web", "2.1.0", 1)])
        .await;

    let id = api.plan_run("dev-1", "baseline").await;
    let run = api.wait_state(&id, "Applied").await;

    assert_eq!(
        run["planReceipt"]["adds"].as_array().map(Vec::len),
        Some(2),
        "{run}"
    );
    assert!(
        run["planReceipt"]["inputsHash"]
            .as_str()
            .unwrap_or_default()
            .starts_with("sha256:")
    );
    assert_eq!(run["applyReceipt"]["result"], "succeeded");
    assert_eq!(run["applyReceipt"]["outputs"]["versions"]["api"], "1.0.0");
    assert!(run["completedAt"].is_string());
    assert_eq!(
        run["approval"],
        serde_json::Value::Null,
        "no approval for non-production"
    );
    assert_eq!(
        run["refusedApprovals"],
        json!([]),
        "no approval was refused"
    );

    // The list passes the stored receipts through as text: it shows exactly what GET shows.
    let listed = api.list_runs("?environmentId=dev-1").await;
    assert_eq!(listed["items"][0], run, "{listed}");

    let target = stack.sandbox("acme", "dev-1");
    assert_eq!(target["workloads"].as_array().map(Vec::len), Some(2));
    assert!(target["appliedRuns"][&id].is_object());

    let planned = stack.events("ProvisioningPlanned").await;
    assert_eq!(planned.len(), 1);
    assert_eq!(
        planned[0]["topic"],
        "provisioning.runs.v1.provisioning-planned"
    );
    assert_eq!(planned[0]["payload"]["provisioningRunId"], id.as_str());
    assert_eq!(planned[0]["payload"]["planSummary"]["adds"], 2);
    let applied = stack.events("ProvisioningApplied").await;
    assert_eq!(applied.len(), 1);
    let p = &applied[0]["payload"];
    assert_eq!(
        applied[0]["topic"],
        "provisioning.runs.v1.provisioning-applied"
    );
    let mut fields: Vec<&str> = p
        .as_object()
        .map(|o| o.keys().map(String::as_str).collect())
        .unwrap_or_default();
    fields.sort();
    assert_eq!(
        fields,
        [
            "environmentId",
            "kind",
            "outputs",
            "projectId",
            "promotionId",
            "provisioningRunId",
            "specificationVersion",
            "tenantId"
        ]
    );
    assert_eq!(p["specificationVersion"], 1);
    assert_eq!(p["projectId"], "shop");
    assert_eq!(stack.events("SpecificationDeclared").await.len(), 1);
}

#[tokio::test]
async fn non_production_run_applies_sqlite() {
    non_production_run_applies_on(Db::Sqlite).await;
}

#[tokio::test]
async fn non_production_run_applies_postgres() {
    non_production_run_applies_on(Db::Postgres).await;
}

/// A production run waits for an approval of its exact plan; an approval naming another plan
/// is refused with 409; the matching one applies it.
async fn production_run_waits_for_approval_on(db: Db) {
    let stack = Stack::on(db).await;
    let api = stack.operator("acme");
    api.environment("prod", "production").await;
    api.declare("prod", &[("api", "1.0.0", 3)]).await;

    let id = api.plan_run("prod", "promotion").await;
    let run = api.wait_state(&id, "AwaitingApproval").await;
    assert_eq!(
        stack.sandbox("acme", "prod"),
        serde_json::Value::Null,
        "nothing applied before approval"
    );

    let wrong = api
        .post(
            &format!("/factory/provisioning/runs/{id}/approval"),
            json!({ "decision": "approve", "reason": "x", "inputsHash": "sha256:another-plan" }),
        )
        .await
        .expect_problem(409);
    assert!(
        wrong["detail"]
            .as_str()
            .unwrap_or_default()
            .contains("plan"),
        "{wrong}"
    );

    // The approval of a production plan is an Operator's: the scope alone is not enough.
    let intern = stack.without_roles(
        "acme",
        &["factory.provisioning.read", "factory.provisioning.apply"],
    );
    intern.decide(&id, "approve").await.expect_problem(403);

    api.decide(&id, "approve").await.expect(202);
    let run_after = api.wait_state(&id, "Applied").await;
    assert_eq!(run_after["approval"]["decision"]["approver"], "tester");
    assert_eq!(
        run_after["approval"]["decision"]["inputsHash"],
        run["planReceipt"]["inputsHash"]
    );
    assert_eq!(stack.sandbox("acme", "prod")["workloads"][0]["replicas"], 3);

    // Approving again is a conflict, not a second apply.
    api.decide(&id, "approve").await.expect_problem(409);
}

#[tokio::test]
async fn production_run_waits_for_approval_sqlite() {
    production_run_waits_for_approval_on(Db::Sqlite).await;
}

#[tokio::test]
async fn production_run_waits_for_approval_postgres() {
    production_run_waits_for_approval_on(Db::Postgres).await;
}

/// The approval can be sent with `temporal workflow signal` and the documented payload.
#[tokio::test]
async fn approval_signal_works_from_the_temporal_cli() {
    let stack = Stack::start().await;
    let api = stack.operator("acme");
    let (id, run) = api.awaiting_approval("prod", 1).await;
    let hash = run["planReceipt"]["inputsHash"].as_str();
    let approval = api.record_approval("prod", hash).await;
    let approval_id = approval["approvalId"].as_str();
    stack.approve_with_cli(&run, "alice", "CAB-9", approval_id);
    let run = api.wait_state(&id, "Applied").await;
    // Who granted it is what was recorded, not what the signal claims.
    assert_eq!(run["approval"]["decision"]["approver"], "tester", "{run}");
    assert_eq!(run["approval"]["approvalId"], approval["approvalId"]);
}

/// A signal straight to the workflow, past the API, opens nothing without a recorded
/// approval behind it: the run keeps waiting and shows the refusal.
#[tokio::test]
async fn an_approval_signal_without_a_recorded_approval_opens_nothing() {
    let stack = Stack::start().await;
    let api = stack.operator("acme");
    let (id, run) = api.awaiting_approval("prod", 1).await;
    stack.approve_with_cli(&run, "mallory", "trust me", None);
    let run = eventually(60, "the refusal to be recorded", || async {
        let run = api.run(&id).await;
        (run["refusedApprovals"].as_array().map(Vec::len) == Some(1)).then_some(run)
    })
    .await;
    assert_eq!(run["state"], "AwaitingApproval", "{run}");
    assert_eq!(run["refusedApprovals"][0]["why"], "not-recorded");
    assert_eq!(run["refusedApprovals"][0]["approver"], "mallory");
    assert!(
        stack.sandbox("acme", "prod")["appliedRuns"]
            .as_object()
            .is_none_or(|o| o.is_empty())
    );
    // An Operator's decision through the API still opens it.
    api.decide(&id, "approve").await.expect(202);
    api.wait_state(&id, "Applied").await;
}

/// A rejected production run ends `Rejected` and applies nothing.
#[tokio::test]
async fn production_run_rejected() {
    let stack = Stack::start().await;
    let api = stack.operator("acme");
    let (id, _) = api.awaiting_approval("prod", 1).await;
    api.decide(&id, "reject").await.expect(202);
    let run = api.wait_state(&id, "Rejected").await;
    assert!(
        run["reason"].as_str().unwrap_or_default().contains("CAB-7"),
        "{run}"
    );
    assert_eq!(stack.sandbox("acme", "prod"), serde_json::Value::Null);
    assert!(stack.events("ProvisioningApplied").await.is_empty());
}

/// Without a decision within `ApprovalTimeoutHours` the run expires to `Rejected`.
#[tokio::test]
async fn production_run_approval_expires() {
    // 0.0005 hours = 1.8 s
    let stack = Stack::with(StackOptions::with_env(
        "RuntimeCloud__Provisioning__ApprovalTimeoutHours",
        "0.0005",
    ))
    .await;
    let api = stack.operator("acme");
    api.environment("prod", "production").await;
    api.declare("prod", &[("api", "1.0.0", 1)]).await;
    let id = api.plan_run("prod", "baseline").await;
    let run = api.wait_state(&id, "Rejected").await;
    assert_eq!(run["approval"]["expired"], true, "{run}");
    assert_eq!(run["reason"], "approval expired");
}

/// A production run that came with the promotion's approval applies without waiting.
#[tokio::test]
async fn production_run_with_approval_id_applies() {
    let stack = Stack::start().await;
    let api = stack.operator("acme");
    api.environment("prod", "production").await;
    api.declare("prod", &[("api", "1.0.0", 1)]).await;
    let approval = text(&api.record_approval("prod", None).await["approvalId"]);
    let promotion = uuid::Uuid::new_v4().to_string();
    let run = api
        .post(
            "/factory/provisioning/runs",
            json!({ "environmentId": "prod", "kind": "promotion", "approvalId": approval, "promotionId": promotion }),
        )
        .await
        .expect(202);
    let id = text(&run["provisioningRunId"]);
    let run = api.wait_state(&id, "Applied").await;
    assert_eq!(run["approvalId"], approval.as_str());
    assert_eq!(run["approval"]["approvalId"], approval.as_str());
    assert_eq!(run["approval"]["decision"]["approver"], "tester", "{run}");
    assert_eq!(
        stack.events("ProvisioningApplied").await[0]["payload"]["promotionId"],
        promotion.as_str()
    );
    // Spent on this run, once.
    let spent = api
        .get(&format!("/factory/approvals/{approval}"))
        .await
        .expect(200);
    assert_eq!(spent["spentByRunId"], id.as_str(), "{spent}");
}

/// A run is cancelled before apply; after apply, cancel is a 409.
#[tokio::test]
async fn cancel_before_apply_only() {
    let stack = Stack::start().await;
    let api = stack.operator("acme");
    let (id, _) = api.awaiting_approval("prod", 1).await;
    api.post(
        &format!("/factory/provisioning/runs/{id}/cancel"),
        json!({ "reason": "wrong window" }),
    )
    .await
    .expect(202);
    let run = api.wait_state(&id, "Cancelled").await;
    assert!(
        run["reason"]
            .as_str()
            .unwrap_or_default()
            .contains("wrong window")
    );
    assert_eq!(stack.sandbox("acme", "prod"), serde_json::Value::Null);

    api.environment("dev", "non-production").await;
    api.declare("dev", &[("api", "1.0.0", 1)]).await;
    let applied = api.plan_run("dev", "baseline").await;
    api.wait_state(&applied, "Applied").await;
    api.post(
        &format!("/factory/provisioning/runs/{applied}/cancel"),
        json!({}),
    )
    .await
    .expect_problem(409);
}

/// The same Idempotency-Key gives the same run; with another body it is a 422.
#[tokio::test]
async fn idempotent_start() {
    let stack = Stack::start().await;
    let api = stack.operator("acme");
    api.environment("dev", "non-production").await;
    api.declare("dev", &[("api", "1.0.0", 1)]).await;
    let body = json!({ "environmentId": "dev", "kind": "baseline" });
    let key = [("Idempotency-Key", "deploy-42")];
    let first = api
        .send(
            reqwest::Method::POST,
            "/factory/provisioning/runs",
            Some(body.clone()),
            &key,
        )
        .await
        .expect(202);
    let again = api
        .send(
            reqwest::Method::POST,
            "/factory/provisioning/runs",
            Some(body),
            &key,
        )
        .await
        .expect(200);
    assert_eq!(first["provisioningRunId"], again["provisioningRunId"]);
    let other = json!({ "environmentId": "dev", "kind": "reconciliation" });
    api.send(
        reqwest::Method::POST,
        "/factory/provisioning/runs",
        Some(other),
        &key,
    )
    .await
    .expect_problem(422);
    let id = first["provisioningRunId"].as_str().unwrap_or_default();
    api.wait_state(id, "Applied").await;
    assert_eq!(stack.count("provisioning_runs").await, 1);
}

/// Two runs on one environment never apply at once: the second waits (no state) while the
/// first awaits approval, then plans against the state the first left.
#[tokio::test]
async fn second_run_waits_its_turn_and_plans_on_what_the_first_left() {
    let stack = Stack::start().await;
    let api = stack.operator("acme");
    let (first, _) = api.awaiting_approval("prod", 1).await;

    api.declare("prod", &[("api", "1.1.0", 1)]).await;
    let second = api.plan_run("prod", "promotion").await;
    // The second run is queued behind the first: wait until the environment's lock lists it
    // as waiting, then check it has not planned.
    let db = stack.db().await;
    let lock = format!("environment/{}/prod", api.tenant);
    let waiting = format!("provisioning-run/{second}");
    eventually(
        30,
        "the second run to queue on the environment lock",
        || async {
            let state = semaphores::holders(&db, &lock).await.ok()??;
            state.queue.contains(&waiting).then_some(())
        },
    )
    .await;
    let queued = api.run(&second).await;
    assert_eq!(
        queued["state"],
        serde_json::Value::Null,
        "second run planned while the first held the lock: {queued}"
    );

    api.decide(&first, "approve").await.expect(202);
    api.wait_state(&first, "Applied").await;
    let second_run = api.wait_state(&second, "AwaitingApproval").await;
    // Planned against 1.0.0 as the first run left it: one change (version), no add.
    assert_eq!(
        second_run["planReceipt"]["adds"].as_array().map(Vec::len),
        Some(0),
        "{second_run}"
    );
    assert_eq!(
        second_run["planReceipt"]["changes"][0]["fields"],
        json!(["version"])
    );
    api.decide(&second, "approve").await.expect(202);
    api.wait_state(&second, "Applied").await;
    assert_eq!(
        stack.sandbox("acme", "prod")["workloads"][0]["version"],
        "1.1.0"
    );
}

/// A runner failure ends the run `Failed` with the reason and `ProvisioningFailed`; the apply
/// is not retried.
#[tokio::test]
async fn failing_apply_ends_failed_with_event() {
    let stack = Stack::start().await;
    let api = stack.operator("acme");
    api.environment("dev", "non-production").await;
    api.declare("dev", &[("api", "1.0.0", 1)]).await;
    stack.sandbox_cli(
        "acme",
        "dev",
        &[
            "fail-next-apply",
            "--reason",
            "deployment/api: quota exceeded",
        ],
    );
    let id = api.plan_run("dev", "baseline").await;
    let run = api.wait_state(&id, "Failed").await;
    assert_eq!(run["reason"], "deployment/api: quota exceeded");
    assert_eq!(run["applyReceipt"]["result"], "failed");
    let failed = stack.events("ProvisioningFailed").await;
    assert_eq!(failed.len(), 1);
    assert_eq!(
        failed[0]["topic"],
        "provisioning.runs.v1.provisioning-failed"
    );
    assert_eq!(
        failed[0]["payload"]["reason"],
        "deployment/api: quota exceeded"
    );
    assert!(
        stack.sandbox("acme", "dev")["workloads"]
            .as_array()
            .is_none_or(Vec::is_empty)
    );
}

/// A plan whose program version cannot be found fails the run with the reference.
#[tokio::test]
async fn missing_program_version_fails_the_run() {
    let stack = Stack::start().await;
    let api = stack.operator("acme");
    api.environment("dev", "non-production").await;
    api.post(
        "/factory/provisioning/specifications",
        json!({ "environmentId": "dev", "kind": "environment", "programRef": "git://infra//shop",
                "programVersion": "no-such-tag", "configRefs": {}, "secretRefs": {}, "workloads": [] }),
    )
    .await
    .expect(201);
    let id = api.plan_run("dev", "baseline").await;
    let run = api.wait_state(&id, "Failed").await;
    assert!(
        run["reason"]
            .as_str()
            .unwrap_or_default()
            .contains("no-such-tag"),
        "{run}"
    );
}

/// A run terminated by hand while it holds its environment (here: awaiting approval) never
/// releases the lock; the next run must not wait forever. The lock re-grants to its holder
/// every `LockHolderCheckMinutes` while a run waits, finds it gone and moves on.
#[tokio::test]
async fn a_run_terminated_by_hand_does_not_block_its_environment() {
    let stack = Stack::with(StackOptions::holder_checks_every_second()).await;
    let api = stack.operator("acme");
    let (first, _) = api.awaiting_approval("prod", 1).await;
    stack.temporal_ok(&[
        "workflow",
        "terminate",
        "--workflow-id",
        &format!("provisioning-run/{first}"),
        "--reason",
        "operator cleanup",
    ]);

    let second = api.plan_run("prod", "baseline").await;
    api.wait_state(&second, "AwaitingApproval").await;
    api.decide(&second, "approve").await.expect(202);
    api.wait_state(&second, "Applied").await;
}

/// A holder and the waiter after it both terminated by hand: the run queued behind them must
/// not wait for good. A waiting run checks the holders and every waiter before it, so the third
/// run finds both gone and takes the lock.
#[tokio::test]
async fn a_run_behind_a_terminated_holder_and_a_terminated_waiter_takes_the_lock() {
    let stack = Stack::with(StackOptions::holder_checks_every_second()).await;
    let api = stack.operator("acme");
    let (first, _) = api.awaiting_approval("prod", 1).await;
    let db = stack.db().await;
    let lock = format!("environment/{}/prod", api.tenant);
    let queued = |id: String| {
        let (db, lock) = (db.clone(), lock.clone());
        async move {
            let waiting = format!("provisioning-run/{id}");
            eventually(30, "the run to queue on the environment lock", || async {
                let state = semaphores::holders(&db, &lock).await.ok()??;
                state.queue.contains(&waiting).then_some(())
            })
            .await;
        }
    };
    let second = api.plan_run("prod", "baseline").await;
    queued(second.clone()).await;
    let third = api.plan_run("prod", "baseline").await;
    queued(third.clone()).await;
    for run in [&first, &second] {
        stack.temporal_ok(&[
            "workflow",
            "terminate",
            "--workflow-id",
            &format!("provisioning-run/{run}"),
            "--reason",
            "operator cleanup",
        ]);
    }

    api.wait_state(&third, "AwaitingApproval").await;
    api.decide(&third, "approve").await.expect(202);
    api.wait_state(&third, "Applied").await;
    // The lock goes just after the ending is recorded (so no other run applies before it is).
    eventually(30, "the gone runs dropped, the third released", || async {
        let state = semaphores::holders(&db, &lock).await.ok()??;
        (state.holders.is_empty() && state.queue.is_empty()).then_some(())
    })
    .await;
}

/// A run takes a free lock in a local activity. If the take was written but its answer lost
/// (the worker died before recording it), the retried step asks again and learns it holds the
/// slot already, instead of waiting for a grant it has; and it lets the lock go when done.
#[tokio::test]
async fn a_run_whose_lock_take_answer_was_lost_still_gets_the_lock() {
    let mut stack = Stack::start().await;
    let (api, id, lock) = stack.run_whose_lock_take_answer_was_lost().await;
    api.wait_state(&id, "Applied").await;
    let db = stack.db().await;
    eventually(30, "the lock released by its holder", || async {
        let state = semaphores::holders(&db, &lock).await.ok()??;
        (state.holders.is_empty() && state.queue.is_empty()).then_some(())
    })
    .await;
}

/// A worker killed between plan and apply is replaced and the run still applies exactly once.
#[tokio::test]
async fn worker_killed_between_plan_and_apply_applies_once() {
    let mut stack = Stack::start().await;
    let api = stack.operator("acme");
    let (id, _) = api.awaiting_approval("prod", 2).await;

    stack.kill_worker();
    api.decide(&id, "approve").await.expect(202);
    stack.start_worker();

    let run = api.wait_state(&id, "Applied").await;
    let target = stack.sandbox("acme", "prod");
    assert_eq!(target["appliedRuns"].as_object().map(|o| o.len()), Some(1));
    assert_eq!(
        target["appliedRuns"][&id]["outputs"],
        run["applyReceipt"]["outputs"]
    );
    assert_eq!(stack.events("ProvisioningApplied").await.len(), 1);
}

/// An approval can reach the workflow before its worker has seen the plan: a worker that
/// projected `AwaitingApproval` and died before reporting its task hands the task on, and the
/// next worker sees the plan and the signal together. Sending the approval while no worker
/// runs recreates that order for certain; the run must count it and apply, not wait forever.
#[tokio::test]
async fn approval_signalled_before_the_worker_sees_the_plan_is_counted() {
    let mut stack = Stack::start().await;
    let (api, id, hash) = stack.run_approved_before_its_plan().await;
    let run = api.wait_state(&id, "Applied").await;
    assert_eq!(run["planReceipt"]["inputsHash"], hash);
    // The recorded approval's grantor (the operator's token), not the signal's claim.
    assert_eq!(run["approval"]["decision"]["approver"], "tester", "{run}");
    assert_eq!(stack.events("ProvisioningApplied").await.len(), 1);
    // Both runs, with an approval record, a rejection reason and receipts, list as GET shows them.
    let listed = api.list_runs("?environmentId=prod").await;
    assert_eq!(listed["items"].as_array().map(Vec::len), Some(2));
}

/// Runs are listed by environment, kind and state with cursor pagination.
#[tokio::test]
async fn runs_are_listed_with_filters_and_cursor() {
    let stack = Stack::start().await;
    let api = stack.operator("acme");
    api.environment("dev", "non-production").await;
    api.declare("dev", &[("api", "1.0.0", 1)]).await;
    let mut ids = Vec::new();
    for kind in ["baseline", "reconciliation", "reconciliation"] {
        let id = api.plan_run("dev", kind).await;
        api.wait_state(&id, "Applied").await;
        ids.push(id);
    }
    let page = api.list_runs("?environmentId=dev&limit=2").await;
    assert_eq!(page["items"].as_array().map(Vec::len), Some(2));
    assert_eq!(
        page["items"][0]["provisioningRunId"],
        ids[2].as_str(),
        "newest first"
    );
    let cursor = page["nextCursor"]
        .as_str()
        .expect("a next cursor")
        .to_owned();
    let rest = api
        .list_runs(&format!("?environmentId=dev&limit=2&cursor={cursor}"))
        .await;
    assert_eq!(rest["items"].as_array().map(Vec::len), Some(1));
    assert_eq!(rest["items"][0]["provisioningRunId"], ids[0].as_str());
    assert_eq!(rest["nextCursor"], serde_json::Value::Null);

    let recon = api
        .get("/factory/provisioning/runs?kind=reconciliation&state=Applied")
        .await
        .expect(200);
    assert_eq!(recon["items"].as_array().map(Vec::len), Some(2));
    let none = api
        .get("/factory/provisioning/runs?state=Failed")
        .await
        .expect(200);
    assert_eq!(none["items"].as_array().map(Vec::len), Some(0));
}

/// The run's search attributes let an operator filter in the Temporal UI and CLI.
#[tokio::test]
async fn runs_are_filterable_by_search_attributes() {
    let stack = Stack::start().await;
    let api = stack.operator("acme");
    let tenant = api.tenant.clone();
    api.environment("dev", "non-production").await;
    api.declare("dev", &[("api", "1.0.0", 1)]).await;
    let id = api.plan_run("dev", "baseline").await;
    api.wait_state(&id, "Applied").await;
    let query = format!(
        "TenantId='{tenant}' AND EnvironmentId='dev' AND ProvisioningState='Applied' AND RunKind='baseline'"
    );
    eventually(30, "visibility to list the run", || {
        let out = stack.temporal_cli(&["workflow", "list", "--query", &query]);
        let text = String::from_utf8_lossy(&out.stdout).to_string();
        let id = id.clone();
        async move {
            text.contains(&format!("provisioning-run/{id}"))
                .then_some(())
        }
    })
    .await;
}

/// Specifications keep every version; versions count up per environment.
#[tokio::test]
async fn specification_versions_count_up_and_are_kept() {
    // Applying version 1 while version 2 is declared is drift; keep the reconciliation it would
    // trigger out of this test.
    let stack = Stack::with(StackOptions::proposals_wait_for_a_decision()).await;
    let api = stack.operator("acme");
    api.environment("a", "non-production").await;
    api.environment("b", "non-production").await;
    assert_eq!(api.declare("a", &[("api", "1.0.0", 1)]).await["version"], 1);
    assert_eq!(api.declare("a", &[("api", "1.1.0", 1)]).await["version"], 2);
    assert_eq!(api.declare("b", &[("api", "1.0.0", 1)]).await["version"], 1);
    let list = api
        .get("/factory/provisioning/specifications?environmentId=a")
        .await
        .expect(200);
    let versions: Vec<i64> = list["items"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|s| s["version"].as_i64())
        .collect();
    assert_eq!(versions, [2, 1]);
    assert_eq!(
        list["items"][1]["workloads"][0]["version"], "1.0.0",
        "version 1 is unchanged"
    );

    // A run of an older version plans that version.
    let run = api
        .post(
            "/factory/provisioning/runs",
            json!({ "environmentId": "a", "kind": "baseline", "specificationVersion": 1 }),
        )
        .await
        .expect(202);
    let id = run["provisioningRunId"].as_str().unwrap_or_default();
    let run = api.wait_state(id, "Applied").await;
    assert_eq!(run["specificationVersion"], 1);
    assert_eq!(
        stack.sandbox("acme", "a")["workloads"][0]["version"],
        "1.0.0"
    );
}

/// An approval the run does not count is not dropped: the run's GET shows it under
/// `refusedApprovals`, with who sent it, when and why, and the run applies on the approval it
/// counted.
#[tokio::test]
async fn refused_approvals_are_kept_for_the_audit() {
    let stack = Stack::start().await;
    let api = stack.operator("acme");
    let (id, _) = api.awaiting_approval("prod", 2).await;
    // An approval for another plan, signalled past the API (which answers such a one 409).
    let other =
        json!({ "provisioningRunId": id, "planReceipt": { "inputsHash": "sha256:another-plan" } });
    stack.approve_with_cli(&other, "mallory", "an old ticket", None);
    api.decide(&id, "approve").await.expect(202);
    let run = api.wait_state(&id, "Applied").await;
    let refused = run["refusedApprovals"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert_eq!(refused.len(), 1, "{run}");
    assert_eq!(refused[0]["approver"], "mallory");
    assert_eq!(refused[0]["why"], "other-plan");
    assert_eq!(refused[0]["inputsHash"], "sha256:another-plan");
    assert_eq!(refused[0]["reason"], "an old ticket");
    let received = refused[0]["receivedAt"].as_str().unwrap_or_default();
    assert!(
        chrono::DateTime::parse_from_rfc3339(received).is_ok(),
        "receivedAt {received:?}"
    );
    assert_eq!(run["approval"]["decision"]["approver"], "tester", "{run}");
    // The list shows the same refusals as GET.
    api.list_runs("?environmentId=prod").await;
}
