//! Policy as code on every plan, end to end: a deny rejects the run with the policy's
//! message before anything applies; an allow opens the production gate of a baseline without a
//! human approval, its evidence on the run; the same through a PolicyEngineService with OPA's
//! REST data API (a stand-in).

use crate::common::opa_stand_in::{BANNED, OpaStandIn};
use crate::common::{Stack, StackOptions, text};
use temporalio_client::UntypedWorkflow;

/// A stack whose worker evaluates `policies` (file name, Rego) with the default bundle.
async fn with_policies(policies: &[(&str, &str)]) -> (Stack, tempfile::TempDir) {
    let dir = tempfile::tempdir().expect("policy dir");
    for (name, rego) in policies {
        std::fs::write(dir.path().join(name), rego).expect("policy");
    }
    let stack = Stack::with(StackOptions::with_env(
        "RUNTIME_CLOUD_POLICY_DIR",
        dir.path().display().to_string(),
    ))
    .await;
    (stack, dir)
}

const BAN: &str = r#"package runtime_cloud

deny contains msg if {
	some w in input.specification.workloads
	w.version == "6.6.6"
	msg := sprintf("%s 6.6.6 is banned (CVE-2026-0666)", [w.name])
}
"#;

const ALLOW_PRODUCTION_BASELINES: &str = r#"package runtime_cloud

allow if {
	input.run.kind == "baseline"
	input.environment.class == "production"
}
"#;

#[tokio::test]
async fn a_deny_rejects_the_plan_with_its_message_and_nothing_applies() {
    let (stack, _dir) = with_policies(&[("ban.rego", BAN)]).await;
    let api = stack.operator("acme");
    api.environment("dev", "non-production").await;
    api.declare("dev", &[("api", BANNED, 2)]).await;
    let id = api.plan_run("dev", "baseline").await;
    let run = api.wait_state(&id, "Rejected").await;
    assert_eq!(
        run["reason"],
        format!("denied by policy: api {BANNED} is banned (CVE-2026-0666)"),
        "{run}"
    );
    assert_eq!(
        run["policy"]["deny"][0],
        format!("api {BANNED} is banned (CVE-2026-0666)")
    );
    assert_eq!(run["policy"]["allow"], false);
    assert!(
        text(&run["policy"]["version"]).starts_with("sha256:"),
        "{run}"
    );
    assert!(run["applyReceipt"].is_null(), "nothing applied: {run}");
    assert!(
        stack.sandbox("acme", "dev")["workloads"]
            .as_array()
            .is_none_or(Vec::is_empty),
        "the target is untouched"
    );
}

#[tokio::test]
async fn a_policy_allow_applies_a_production_baseline_with_its_evidence() {
    let (stack, _dir) = with_policies(&[("allow.rego", ALLOW_PRODUCTION_BASELINES)]).await;
    let api = stack.operator("acme");
    api.environment("prod", "production").await;
    api.declare("prod", &[("api", "1.0.0", 2)]).await;
    let id = api.plan_run("prod", "baseline").await;
    let run = api.wait_state(&id, "Applied").await;
    let evidence = &run["approval"]["policy"];
    assert_eq!(evidence["allow"], true, "{run}");
    assert!(text(&evidence["version"]).starts_with("sha256:"), "{run}");
    assert!(text(&evidence["inputHash"]).starts_with("sha256:"), "{run}");
    assert!(text(&evidence["policyId"]).starts_with("rego:"), "{run}");
    assert_eq!(
        run["policy"], *evidence,
        "the run's decision is the evidence"
    );
    // A plan that deletes is never the policy's to allow in production: a person decides.
    api.declare("prod", &[]).await;
    let id = api.plan_run("prod", "baseline").await;
    let waiting = api.wait_state(&id, "AwaitingApproval").await;
    assert_eq!(waiting["policy"]["allow"], true, "{waiting}");
    assert!(waiting["approval"].is_null(), "{waiting}");
}

#[tokio::test]
async fn a_policy_engine_service_decides_through_opas_data_api() {
    let opa = OpaStandIn::start().await;
    let stack = Stack::with(StackOptions::with_env(
        "RUNTIME_CLOUD_POLICY_URL",
        opa.url.clone(),
    ))
    .await;
    let api = stack.operator("acme");
    api.environment("dev", "non-production").await;
    api.declare("dev", &[("api", BANNED, 1)]).await;
    let id = api.plan_run("dev", "baseline").await;
    let run = api.wait_state(&id, "Rejected").await;
    assert_eq!(
        run["reason"],
        format!("denied by policy: api {BANNED} is banned"),
        "{run}"
    );
    assert_eq!(run["policy"]["version"], "bundle-42");
    assert_eq!(run["policy"]["policyId"], format!("opa:{}", opa.url));
    let asked = opa.asked();
    assert_eq!(asked.len(), 1, "{asked:?}");
    assert_eq!(asked[0]["environment"]["class"], "non-production");
    assert_eq!(asked[0]["run"]["runId"], id.as_str());
    assert!(asked[0]["plan"]["inputsHash"].is_string(), "{:?}", asked[0]);
}

/// A policy engine that cannot answer holds the run after its plan (asked again and again,
/// in the run's workflow task at first, then by a scheduled activity, whose retries do not
/// grow the run's history), and a plan is never applied undecided; once the engine answers,
/// the run goes on. The run shows `Planned` while the scheduled activity waits (the state it
/// passed through is recorded before it waits).
#[tokio::test]
async fn a_policy_engine_that_cannot_answer_holds_the_run_until_it_does() {
    let opa = OpaStandIn::start().await;
    opa.set_down(true);
    let stack = Stack::with(StackOptions::with_env(
        "RUNTIME_CLOUD_POLICY_URL",
        opa.url.clone(),
    ))
    .await;
    let api = stack.operator("acme");
    api.environment("dev", "non-production").await;
    api.declare("dev", &[("api", "1.0.0", 1)]).await;
    let id = api.plan_run("dev", "baseline").await;
    crate::common::eventually(60, "the engine to be asked again", || async {
        (opa.refused() >= 2).then_some(())
    })
    .await;
    let held = api.run(&id).await;
    assert!(
        held["state"].is_null() || held["state"] == "Planned",
        "nothing past the plan: {held}"
    );
    assert!(held["policy"].is_null(), "undecided: {held}");
    let client = stack.temporal_client().await;
    let workflow_id = format!("provisioning-run/{id}");
    crate::common::eventually(90, "a scheduled activity to wait for the engine", || {
        let handle = client.get_workflow_handle::<UntypedWorkflow>(workflow_id.clone());
        async move {
            let json = handle
                .fetch_history(Default::default())
                .to_json()
                .await
                .ok()?;
            // Scheduled activities name their type in the clear; local ones only in markers.
            String::from_utf8_lossy(json.as_ref())
                .contains("\"provisioning.evaluate-policy\"")
                .then_some(())
        }
    })
    .await;
    let waiting = api.run(&id).await;
    assert_eq!(waiting["state"], "Planned", "{waiting}");
    assert!(waiting["policy"].is_null(), "undecided: {waiting}");
    assert_eq!(stack.events("ProvisioningPlanned").await.len(), 1);
    opa.set_down(false);
    let run = api.wait_state(&id, "Applied").await;
    assert_eq!(run["policy"]["version"], "bundle-42", "{run}");
    assert_eq!(opa.asked().len(), 1, "decided once");
}
