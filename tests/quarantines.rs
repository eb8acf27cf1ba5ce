//! Quarantine end to end on the sandbox: a rollout rolled back quarantines its release; from
//! then on a new rollout, the GitOps reconciler's re-plan, an auto-accepted proposal and a run
//! nobody overrode refuse a specification that carries it, each saying why; an Operator's
//! explicit run with a reason goes through, recorded; lifting it is recorded and lets it run.

use crate::common::{Api, Stack, eventually, text};
use crate::rollouts::wait_rollout;
use serde_json::{Value, json};

/// Rolls `api` 2.0.0 out to `shop-00` and `shop-01` (running 1.0.0), lets `shop-01`'s apply
/// fail so the wave halts, and rolls the rollout back; returns its id.
async fn rolled_back_release(stack: &Stack, api: &Api) -> String {
    for env in ["shop-00", "shop-01"] {
        api.applied(stack, env, &[("api", "1.0.0", 1)]).await;
    }
    stack.sandbox_cli(
        "acme",
        "shop-01",
        &["fail-next-apply", "--reason", "crash loop"],
    );
    let started = api
        .post(
            "/fleet/rollouts",
            json!({ "productId": "shop", "versions": { "api": "2.0.0" },
                    "bakeSeconds": 0, "convergeDeadlineSeconds": 60 }),
        )
        .await
        .expect(202);
    let id = text(&started["rolloutId"]);
    wait_rollout(api, &id, "Halted").await;
    api.post(&format!("/fleet/rollouts/{id}/rollback"), json!({}))
        .await
        .expect(202);
    wait_rollout(api, &id, "RolledBack").await;
    id
}

fn run_request(env: &str, reason: Option<&str>) -> Value {
    let mut body = json!({ "environmentId": env, "kind": "promotion" });
    if let Some(reason) = reason {
        body["quarantineOverride"] = json!({ "reason": reason });
    }
    body
}

#[tokio::test]
async fn a_rolled_back_release_is_refused_by_automation_and_run_only_by_an_operator_who_says_why() {
    let stack = Stack::start().await;
    let api = stack.operator("acme");
    let rollout = rolled_back_release(&stack, &api).await;

    // The rollback quarantined the release, once, and says so.
    let listed = api
        .get("/factory/quarantines?state=in-force")
        .await
        .expect(200);
    let items = listed["items"].as_array().expect("items");
    assert_eq!(items.len(), 1, "{listed}");
    let q = &items[0];
    assert_eq!(
        (&q["workload"], &q["version"], &q["source"], &q["state"]),
        (
            &json!("api"),
            &json!("2.0.0"),
            &json!("rollback"),
            &json!("in-force")
        ),
        "{q}"
    );
    assert_eq!(q["rolloutId"], rollout.as_str());
    assert!(text(&q["reason"]).contains("rolled back"), "{q}");
    let quarantine_id = text(&q["quarantineId"]);
    let placed = stack.events("VersionQuarantined").await;
    assert_eq!(placed.len(), 1, "{placed:?}");
    assert_eq!(placed[0]["payload"]["quarantineId"], quarantine_id.as_str());

    // A new rollout of it is refused, saying why.
    let refused = api
        .post(
            "/fleet/rollouts",
            json!({ "productId": "shop", "versions": { "api": "2.0.0" } }),
        )
        .await
        .expect_problem(409);
    assert!(
        text(&refused["detail"]).contains("workload `api` version 2.0.0 is quarantined"),
        "{refused}"
    );

    // A pipeline declares it again: the reconciler's re-plan neither applies nor proposes it,
    // and says why once.
    api.declare("shop-00", &[("api", "2.0.0", 1)]).await;
    stack.trigger_schedule("gitops-reconciler");
    let held = eventually(60, "the reconciler to hold shop-00", || {
        let stack = &stack;
        async move {
            stack
                .events("ReconciliationHeld")
                .await
                .into_iter()
                .find(|e| e["payload"]["environmentId"] == "shop-00")
        }
    })
    .await;
    assert_eq!(
        held["payload"]["quarantines"][0]["quarantineId"],
        quarantine_id.as_str()
    );
    assert!(
        text(&held["payload"]["reason"]).contains("rolled back"),
        "{held}"
    );
    let reconciled = api
        .get("/factory/provisioning/runs?environmentId=shop-00&kind=reconciliation")
        .await
        .expect(200);
    assert_eq!(
        reconciled["items"],
        json!([]),
        "nothing applied: {reconciled}"
    );

    // The drift the observation finds is proposed but not accepted on its own: the
    // proposal waits for a person, and says why.
    let outcome = api.observe(&stack, "shop-00").await;
    let proposal = &outcome["newProposal"];
    assert_eq!(proposal["autoAccept"], false, "{outcome}");
    let proposal_id = text(&proposal["proposalId"]);
    let waiting = api.wait_proposal("shop-00", &proposal_id, "Proposed").await;
    let deny = waiting["policy"]["deny"].to_string();
    assert!(
        deny.contains("not accepted on its own: workload `api` version 2.0.0 is quarantined"),
        "{waiting}"
    );

    // A run nobody overrode is refused at once, saying why.
    let refused = api
        .post("/factory/provisioning/runs", run_request("shop-00", None))
        .await
        .expect_problem(409);
    assert!(
        text(&refused["detail"]).contains("quarantineOverride.reason"),
        "{refused}"
    );
    // An override needs an Operator, and a reason.
    let intern = stack.without_roles("acme", &["factory.provisioning.apply"]);
    intern
        .post(
            "/factory/provisioning/runs",
            run_request("shop-00", Some("hotfix")),
        )
        .await
        .expect_problem(403);
    api.post(
        "/factory/provisioning/runs",
        run_request("shop-00", Some(" ")),
    )
    .await
    .expect_problem(422);
    // The Operator's explicit run goes through, recorded.
    let run = api
        .post(
            "/factory/provisioning/runs",
            run_request("shop-00", Some("2.0.0 carries the fix shop-00 needs")),
        )
        .await
        .expect(202);
    let run_id = text(&run["provisioningRunId"]);
    let applied = api.wait_state(&run_id, "Applied").await;
    let o = &applied["quarantineOverride"];
    assert_eq!(o["by"], "tester", "{applied}");
    assert_eq!(o["reason"], "2.0.0 carries the fix shop-00 needs");
    assert_eq!(o["quarantines"][0]["quarantineId"], quarantine_id.as_str());
    assert_eq!(
        stack.sandbox("acme", "shop-00")["workloads"][0]["version"],
        "2.0.0"
    );
    let overridden = stack.events("QuarantineOverridden").await;
    assert_eq!(overridden.len(), 1, "{overridden:?}");
    assert_eq!(
        overridden[0]["payload"]["provisioningRunId"],
        run_id.as_str()
    );

    // Lifted by an Operator, with a reason: recorded, and the version runs without one.
    api.post(
        &format!("/factory/quarantines/{quarantine_id}/lift"),
        json!({ "reason": "" }),
    )
    .await
    .expect_problem(422);
    let lifted = api
        .post(
            &format!("/factory/quarantines/{quarantine_id}/lift"),
            json!({ "reason": "fixed by 2.0.0's second build" }),
        )
        .await
        .expect(200);
    assert_eq!(lifted["state"], "lifted");
    assert_eq!(lifted["liftedBy"], "tester");
    assert_eq!(stack.events("QuarantineLifted").await.len(), 1);
    api.declare("shop-01", &[("api", "2.0.0", 1)]).await;
    let free = api
        .post("/factory/provisioning/runs", run_request("shop-01", None))
        .await
        .expect(202);
    api.wait_state(&text(&free["provisioningRunId"]), "Applied")
        .await;
}

/// The run's own gate holds where no request was checked: a quarantine an Operator places
/// after a proposal was raised refuses the run a person's acceptance starts, with the reason.
#[tokio::test]
async fn a_quarantine_placed_after_a_proposal_holds_its_run_at_the_gate() {
    let stack = Stack::with(crate::common::StackOptions::proposals_wait_for_a_decision()).await;
    let api = stack.operator("acme");
    api.applied(&stack, "dev", &[("api", "1.0.0", 1)]).await;
    api.declare("dev", &[("api", "3.0.0", 1)]).await;
    let outcome = api.observe(&stack, "dev").await;
    let proposal_id = text(&outcome["newProposal"]["proposalId"]);

    let placed = api
        .post(
            "/factory/quarantines",
            json!({ "workload": "api", "version": "3.0.0", "reason": "leaks memory" }),
        )
        .await
        .expect(201);
    assert_eq!(placed["source"], "operator");
    // Placing it again answers the same quarantine.
    let again = api
        .post(
            "/factory/quarantines",
            json!({ "workload": "api", "version": "3.0.0", "reason": "still leaks" }),
        )
        .await
        .expect(200);
    assert_eq!(again["quarantineId"], placed["quarantineId"]);

    api.post(
        &format!("/factory/reconciliation/proposals/{proposal_id}/decide"),
        json!({ "decision": "accept", "reason": "looks right" }),
    )
    .await
    .expect(202);
    let accepted = api.wait_proposal("dev", &proposal_id, "Accepted").await;
    let run = api
        .wait_state(&text(&accepted["provisioningRunId"]), "Rejected")
        .await;
    let reason = text(&run["reason"]);
    assert!(
        reason.contains("workload `api` version 3.0.0 is quarantined")
            && reason.contains("leaks memory"),
        "{run}"
    );
    assert_eq!(
        stack.sandbox("acme", "dev")["workloads"][0]["version"],
        "1.0.0",
        "nothing applied"
    );
}

/// A run that waited for its approval weighs the quarantines again before it applies: a
/// quarantine placed while it waited ends it `Rejected` with the reason, nothing applied.
#[tokio::test]
async fn a_quarantine_placed_while_a_run_awaits_its_approval_holds_it_before_the_apply() {
    let stack = Stack::start().await;
    let api = stack.operator("acme");
    let (run_id, _) = api.awaiting_approval("prod-eu", 1).await;
    api.post(
        "/factory/quarantines",
        json!({ "workload": "api", "version": "1.0.0", "reason": "corrupts orders" }),
    )
    .await
    .expect(201);
    api.decide(&run_id, "approve").await.expect(202);
    let run = api.wait_state(&run_id, "Rejected").await;
    let reason = text(&run["reason"]);
    assert!(
        reason.starts_with("denied by quarantine: workload `api` version 1.0.0 is quarantined")
            && reason.contains("corrupts orders"),
        "{run}"
    );
    let applied = stack.sandbox("acme", "prod-eu")["workloads"]
        .as_array()
        .map_or(0, Vec::len);
    assert_eq!(applied, 0, "nothing applied");
}
