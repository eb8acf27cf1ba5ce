//! The production gate: an approval opens it only when it verifies (it exists, is this
//! tenant's and environment's, of production class, granted and unexpired, by someone allowed
//! to grant it, and unspent), and then only once.

use crate::common::run_control_stand_in::{RunControlStandIn, TOKEN};
use crate::common::{Api, Stack, StackOptions, eventually, text};
use serde_json::{Value, json};

/// A production environment with a declared specification.
async fn production(api: &Api, env: &str) {
    api.environment(env, "production").await;
    api.declare(env, &[("api", "6.6.6", 1)]).await;
}

/// `POST /factory/provisioning/runs` naming `approval_id`.
async fn run_with(api: &Api, env: &str, approval_id: &str) -> crate::common::Res {
    api.post(
        "/factory/provisioning/runs",
        json!({ "environmentId": env, "kind": "baseline", "approvalId": approval_id }),
    )
    .await
}

/// The 422's detail, checked to name the refusal.
fn refused(res: crate::common::Res, why: &str) -> Value {
    let problem = res.expect(422);
    let detail = text(&problem["detail"]);
    assert!(detail.contains(why), "{why} in {problem}");
    problem
}

/// The defect as found: a client with the apply scope and no role names an invented
/// approval id for a production run. Refused with the reason; no run exists.
#[tokio::test]
async fn an_invented_approval_id_is_refused_and_nothing_is_created() {
    let stack = Stack::start().await;
    let operator = stack.operator("acme");
    production(&operator, "prod").await;
    let client = stack.without_roles(
        "acme",
        &["factory.provisioning.apply", "factory.provisioning.read"],
    );
    let invented = uuid::Uuid::new_v4().to_string();
    refused(
        run_with(&client, "prod", &invented).await,
        "unknown-approval",
    );
    let runs = operator.list_runs("?environmentId=prod").await;
    assert_eq!(runs["items"].as_array().map(Vec::len), Some(0), "{runs}");
    assert!(stack.events("ProvisioningPlanned").await.is_empty());
}

/// Every other way an approval fails to verify is refused at the API with its reason.
#[tokio::test]
async fn an_approval_that_does_not_verify_is_refused_with_its_reason() {
    let stack = Stack::start().await;
    let api = stack.operator("acme");
    production(&api, "prod").await;
    production(&api, "prod-eu").await;
    api.environment("dev", "non-production").await;

    // Another environment's approval.
    let eu = text(&api.record_approval("prod-eu", None).await["approvalId"]);
    refused(run_with(&api, "prod", &eu).await, "other-environment");
    // A non-production environment's approval is another environment's too. (An approval
    // of non-production class for a production environment cannot be recorded here; the
    // rule's unit tests cover it.)
    let dev = text(&api.record_approval("dev", None).await["approvalId"]);
    refused(run_with(&api, "prod", &dev).await, "other-environment");
    // A recorded rejection.
    let rejection = api
        .post(
            "/factory/approvals",
            json!({ "environmentId": "prod", "decision": "reject", "reason": "not now" }),
        )
        .await
        .expect(201);
    refused(
        run_with(&api, "prod", &text(&rejection["approvalId"])).await,
        "approval-rejected",
    );
    // Another tenant's approval is unknown to this one.
    let other = stack.operator("globex");
    production(&other, "prod").await;
    let theirs = text(&other.record_approval("prod", None).await["approvalId"]);
    refused(run_with(&api, "prod", &theirs).await, "unknown-approval");
    // An expired one.
    let soon = (chrono::Utc::now() + chrono::Duration::seconds(1)).to_rfc3339();
    let short = api
        .post(
            "/factory/approvals",
            json!({ "environmentId": "prod", "decision": "approve", "expiresAt": soon }),
        )
        .await
        .expect(201);
    let expires = chrono::DateTime::parse_from_rfc3339(&text(&short["expiresAt"])).unwrap();
    let short = text(&short["approvalId"]);
    eventually(10, "the approval to expire", || async {
        (chrono::Utc::now() > expires).then_some(())
    })
    .await;
    refused(run_with(&api, "prod", &short).await, "approval-expired");

    let runs = api.list_runs("?environmentId=prod").await;
    assert_eq!(runs["items"].as_array().map(Vec::len), Some(0), "{runs}");
}

/// Only an Operator or Platform admin records an approval; nothing is recorded otherwise.
#[tokio::test]
async fn an_approval_is_recorded_only_by_someone_allowed_to_grant_it() {
    let stack = Stack::start().await;
    let api = stack.operator("acme");
    production(&api, "prod").await;
    let client = stack.without_roles(
        "acme",
        &["factory.provisioning.apply", "factory.provisioning.read"],
    );
    client
        .post(
            "/factory/approvals",
            json!({ "environmentId": "prod", "decision": "approve" }),
        )
        .await
        .expect(403);
    let listed = api
        .get("/factory/approvals?environmentId=prod")
        .await
        .expect(200);
    assert_eq!(
        listed["items"].as_array().map(Vec::len),
        Some(0),
        "{listed}"
    );
}

/// An approval opens the gate once. A second run naming a spent approval is refused at the
/// API; one that passed the API's check before the first spent it (both requested at once)
/// is refused where the change happens, and waits for an operator instead of applying.
#[tokio::test]
async fn an_approval_opens_the_gate_once() {
    let stack = Stack::start().await;
    let api = stack.operator("acme");
    production(&api, "prod").await;
    let approval = text(&api.record_approval("prod", None).await["approvalId"]);

    // Both pass the API's check; the environment's lock makes them take turns, in whichever
    // order their workflows reach it. The first to hold it spends the approval.
    let a = text(&run_with(&api, "prod", &approval).await.expect(202)["provisioningRunId"]);
    let b = text(&run_with(&api, "prod", &approval).await.expect(202)["provisioningRunId"]);
    let (applied, waiting) = eventually(120, "one run applied, the other waiting", || async {
        let (ra, rb) = (api.run(&a).await, api.run(&b).await);
        match (ra["state"].as_str(), rb["state"].as_str()) {
            (Some("Applied"), Some("AwaitingApproval")) => Some((a.clone(), rb)),
            (Some("AwaitingApproval"), Some("Applied")) => Some((b.clone(), ra)),
            _ => None,
        }
    })
    .await;
    assert_eq!(
        waiting["refusedApprovals"][0]["why"], "already-spent",
        "{waiting}"
    );
    assert_eq!(
        waiting["refusedApprovals"][0]["approvalId"],
        approval.as_str()
    );
    assert_eq!(stack.events("ProvisioningApplied").await.len(), 1);

    let spent = api
        .get(&format!("/factory/approvals/{approval}"))
        .await
        .expect(200);
    assert_eq!(spent["spentByRunId"], applied.as_str(), "{spent}");
    refused(run_with(&api, "prod", &approval).await, "already-spent");
}

/// An approval bound to a plan opens only that plan: a run whose plan differs waits.
#[tokio::test]
async fn an_approval_for_another_plan_leaves_the_run_waiting() {
    let stack = Stack::start().await;
    let api = stack.operator("acme");
    production(&api, "prod").await;
    let approval = api
        .record_approval("prod", Some("sha256:another-plan"))
        .await;
    let id = text(
        &run_with(&api, "prod", &text(&approval["approvalId"]))
            .await
            .expect(202)["provisioningRunId"],
    );
    let run = api.wait_state(&id, "AwaitingApproval").await;
    assert_eq!(run["refusedApprovals"][0]["why"], "other-plan", "{run}");
    api.decide(&id, "approve").await.expect(202);
    let run = api.wait_state(&id, "Applied").await;
    assert_eq!(run["approval"]["decision"]["approver"], "tester", "{run}");
}

/// With RunControlService configured, an approval the product has not recorded is claimed
/// there (the stand-in under `tests/common`, speaking the documented contract) and opens the
/// gate only when its answer verifies by the same rule: a grant by a principal without the
/// role is refused whatever the service says, and a spent one opens nothing.
#[tokio::test]
async fn approvals_held_by_run_control_are_claimed_there_and_verified_here() {
    let rc = RunControlStandIn::start().await;
    let stack = Stack::with(StackOptions {
        env: vec![
            ("RUNTIME_CLOUD_RUN_CONTROL_URL".into(), rc.url.clone()),
            ("RUNTIME_CLOUD_RUN_CONTROL_TOKEN".into(), TOKEN.into()),
        ],
        ..Default::default()
    })
    .await;
    let api = stack.operator("acme");
    production(&api, "prod").await;
    let held = |id: &str, roles: &[&str]| {
        json!({
            "approvalId": id, "tenantId": api.tenant, "environmentId": "prod",
            "class": "production", "decision": "approve", "grantedBy": "cab-chair",
            "grantedByRoles": roles, "reason": "CAB-77", "source": "run-control",
            "decidedAt": chrono::Utc::now(),
            "expiresAt": chrono::Utc::now() + chrono::Duration::hours(1),
        })
    };
    let granted = uuid::Uuid::new_v4().to_string();
    let by_an_observer = uuid::Uuid::new_v4().to_string();
    rc.hold(held(&granted, &["Operator"]));
    rc.hold(held(&by_an_observer, &["Observer"]));

    // Granted by an Operator: claimed there, applied, the service's grantor on the run.
    let first = text(&run_with(&api, "prod", &granted).await.expect(202)["provisioningRunId"]);
    let run = api.wait_state(&first, "Applied").await;
    assert_eq!(
        run["approval"]["decision"]["approver"], "cab-chair",
        "{run}"
    );
    let claims = rc.claims();
    assert_eq!(claims[0]["authorization"], format!("Bearer {TOKEN}"));
    assert_eq!(claims[0]["body"]["runId"], first.as_str());
    assert_eq!(
        claims[0]["body"]["inputsHash"],
        run["planReceipt"]["inputsHash"]
    );

    // Granted by someone without the role: the run waits, refused with the reason.
    let second =
        text(&run_with(&api, "prod", &by_an_observer).await.expect(202)["provisioningRunId"]);
    let run = api.wait_state(&second, "AwaitingApproval").await;
    assert_eq!(
        run["refusedApprovals"][0]["why"], "grantor-not-allowed",
        "{run}"
    );
    api.post(
        &format!("/factory/provisioning/runs/{second}/cancel"),
        json!({ "reason": "not this one" }),
    )
    .await
    .expect(202);
    api.wait_state(&second, "Cancelled").await;

    // Spent on the first run: the service answers 409, the run waits.
    let third = text(&run_with(&api, "prod", &granted).await.expect(202)["provisioningRunId"]);
    let run = api.wait_state(&third, "AwaitingApproval").await;
    assert_eq!(run["refusedApprovals"][0]["why"], "already-spent", "{run}");
    assert_eq!(stack.events("ProvisioningApplied").await.len(), 1);
}
