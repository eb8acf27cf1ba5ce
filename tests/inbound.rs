//! Inbound events end to end, on a real NATS JetStream server of the test's own: each event has
//! its effect once under redelivery and while the API is down; a malformed one lands on the
//! dead-letter subject with the reason; `PromotionApproved` plans a promotion run that spends
//! the promotion's approval; `ApprovalDecided` approves the production run that waits for it.

use crate::common::nats::Nats;
use crate::common::{Api, Stack, StackOptions, eventually, text};
use futures::StreamExt;
use serde_json::{Value, json};

async fn stack(nats: &Nats) -> Stack {
    Stack::with(StackOptions::with_env("NATS_URL", nats.url())).await
}

/// Publishes a CloudEvents 1.0 envelope of `event_type` with `data` (JetStream's dedupe id:
/// `msg_id`, so a producer's re-publish is a second message when it differs).
async fn publish(nats: &Nats, event_id: &str, event_type: &str, data: Value, msg_id: &str) {
    let body = json!({ "specversion": "1.0", "id": event_id, "source": "test-producer",
                       "type": event_type, "time": chrono::Utc::now().to_rfc3339(),
                       "datacontenttype": "application/json", "data": data });
    publish_raw(nats, event_type, body.to_string().into_bytes(), msg_id).await;
}

async fn publish_raw(nats: &Nats, subject: &str, body: Vec<u8>, msg_id: &str) {
    let client = async_nats::connect(nats.url()).await.expect("connect NATS");
    let js = async_nats::jetstream::new(client);
    // The consumer creates the stream; wait for it, as a producer's deployment would.
    eventually(30, "the inbound stream", || {
        let js = js.clone();
        async move {
            js.get_stream("RUNTIME_CLOUD_INBOUND")
                .await
                .ok()
                .map(|_| ())
        }
    })
    .await;
    let mut headers = async_nats::HeaderMap::new();
    headers.insert("Nats-Msg-Id", msg_id);
    js.publish_with_headers(subject.to_owned(), headers, body.into())
        .await
        .expect("publish")
        .await
        .expect("ack");
}

fn desired(version: &str) -> Value {
    json!({ "programRef": "git://infra//shop", "programVersion": "a1b2c3d4e5",
            "workloads": [{ "name": "api", "kind": "deployment", "version": version, "replicas": 2,
                            "configRefs": {}, "secretRefs": {} }] })
}

/// The environment's runs, once there are `n`.
async fn runs_of(api: &Api, env: &str, n: usize) -> Vec<Value> {
    eventually(60, "the runs the events planned", || {
        let api = api.clone();
        let env = env.to_owned();
        async move {
            let page = api.list_runs(&format!("?environmentId={env}")).await;
            let items = page["items"].as_array().cloned().unwrap_or_default();
            (items.len() >= n).then_some(items)
        }
    })
    .await
}

#[tokio::test]
async fn an_inbound_event_has_its_effect_once_under_redelivery_and_while_the_api_is_down() {
    let nats = Nats::start();
    let mut stack = stack(&nats).await;
    let tenant = stack.tenant("acme");
    let created = json!({ "tenantId": tenant, "environmentId": "dev-eu", "projectId": "shop",
                          "class": "non-production", "specification": desired("1.0.0") });
    // The producer publishes the same event twice (two messages, one event id).
    publish(
        &nats,
        "evt-1",
        "environment.environments.v1.environment-created",
        created.clone(),
        "m1",
    )
    .await;
    publish(
        &nats,
        "evt-1",
        "environment.environments.v1.environment-created",
        created,
        "m2",
    )
    .await;
    let api = stack.operator("acme");
    let runs = runs_of(&api, "dev-eu", 1).await;
    let run = text(&runs[0]["provisioningRunId"]);
    let applied = api.wait_state(&run, "Applied").await;
    assert_eq!(applied["kind"], "baseline");
    // Both messages handled (the lag back to 0) and still one environment, one version, one run.
    let lag = eventually(30, "both messages handled", || {
        let url = stack.base_url.clone();
        async move {
            let text = reqwest::get(format!("{url}/metrics"))
                .await
                .ok()?
                .text()
                .await
                .ok()?;
            text.contains(
                "connectsoft_factory_runtime_inbox_lag{consumer=\"runtime-cloud-inbox\"} 0",
            )
            .then_some(text)
        }
    })
    .await;
    assert!(
        lag.contains("connectsoft_factory_fleet_host_inbox_lag{module=\"inventory\"} 0\n"),
        "nothing waits, so the oldest waiting event has no age: {lag}"
    );
    assert_eq!(
        stack
            .count_where("inbox_events", "event_id = 'evt-1'")
            .await,
        1
    );
    assert_eq!(
        stack
            .count_where("provisioning_runs", "environment_id = 'dev-eu'")
            .await,
        1
    );
    assert_eq!(
        stack
            .count_where("deployment_specifications", "environment_id = 'dev-eu'")
            .await,
        1
    );
    assert_eq!(
        stack
            .count_where("environments", "environment_id = 'dev-eu'")
            .await,
        1
    );

    // With the API down the event waits in the durable consumer and is handled once it is back.
    stack.api = None;
    let promoted = json!({ "promotionId": "promo-7", "tenantId": tenant, "environmentId": "dev-eu",
                           "specification": desired("1.1.0"),
                           "approval": { "grantedBy": "release-manager", "grantedByRoles": ["Operator"] } });
    publish(
        &nats,
        "evt-2",
        "promotion.promotions.v1.promotion-approved",
        promoted,
        "m3",
    )
    .await;
    stack.start_api();
    let api = stack.operator("acme");
    let runs = runs_of(&api, "dev-eu", 2).await;
    let promotion = runs
        .iter()
        .find(|r| r["kind"] == "promotion")
        .unwrap_or_else(|| panic!("a promotion run: {runs:?}"));
    assert_eq!(promotion["promotionId"], "promo-7");
    api.wait_state(&text(&promotion["provisioningRunId"]), "Applied")
        .await;
}

#[tokio::test]
async fn a_malformed_event_lands_on_the_dead_letter_subject_with_the_reason() {
    let nats = Nats::start();
    let stack = stack(&nats).await;
    let client = async_nats::connect(nats.url()).await.expect("connect NATS");
    let mut dead = client
        .subscribe("runtime-cloud.dead-letter.>")
        .await
        .expect("subscribe");
    publish_raw(
        &nats,
        "environment.environments.v1.environment-created",
        b"{not json".to_vec(),
        "bad-1",
    )
    .await;
    let broken = json!({ "tenantId": stack.tenant("acme"), "environmentId": "has spaces",
                         "class": "staging" });
    publish(
        &nats,
        "evt-bad",
        "environment.environments.v1.environment-created",
        broken,
        "bad-2",
    )
    .await;
    let mut reasons = Vec::new();
    for _ in 0..2 {
        let message = tokio::time::timeout(std::time::Duration::from_secs(60), dead.next())
            .await
            .expect("a dead letter in time")
            .expect("a message");
        assert_eq!(
            message.subject.as_str(),
            "runtime-cloud.dead-letter.environment.environments.v1.environment-created"
        );
        let reason = message
            .headers
            .as_ref()
            .and_then(|h| h.get("Runtime-Cloud-Reason"))
            .map(|v| v.to_string())
            .unwrap_or_default();
        reasons.push(reason);
    }
    assert!(
        reasons[0].contains("not a CloudEvents JSON envelope"),
        "{reasons:?}"
    );
    assert!(
        reasons[1]
            .contains("does not match the environment.environments.v1.environment-created schema"),
        "{reasons:?}"
    );
    assert!(
        reasons[1].contains("/environmentId") && reasons[1].contains("projectId"),
        "{reasons:?}"
    );
    assert_eq!(stack.count("environments").await, 0, "nothing half-written");
}

#[tokio::test]
async fn a_decision_from_run_control_approves_the_production_run_that_waits() {
    let nats = Nats::start();
    let stack = stack(&nats).await;
    let api = stack.operator("acme");
    api.environment("prod", "production").await;
    api.declare("prod", &[("api", "1.0.0", 2)]).await;
    let run = api.plan_run("prod", "baseline").await;
    let waiting = api.wait_state(&run, "AwaitingApproval").await;
    let decided = json!({ "tenantId": stack.tenant("acme"), "provisioningRunId": run,
                          "decision": "approve", "decidedBy": "cab-chair", "decidedByRoles": ["Operator"],
                          "reason": "CHG-1234", "inputsHash": waiting["planReceipt"]["inputsHash"] });
    publish(
        &nats,
        "evt-9",
        "runcontrol.approvals.v1.approval-decided",
        decided,
        "d1",
    )
    .await;
    let applied = api.wait_state(&run, "Applied").await;
    assert_eq!(
        applied["approval"]["decision"]["approver"], "cab-chair",
        "{applied}"
    );
    assert!(
        applied["approval"]["approvalId"].is_string(),
        "recorded and spent: {applied}"
    );
}

/// In production the promotion's approval opens the gate of its run only if the Approvals
/// port verifies it: granted by an Operator it is spent and the run applies; granted by someone
/// without the role it is refused and the run waits for a person.
#[tokio::test]
async fn a_production_promotion_spends_the_promotions_approval_only_when_it_verifies() {
    let nats = Nats::start();
    let stack = stack(&nats).await;
    let api = stack.operator("acme");
    api.environment("prod", "production").await;
    let tenant = stack.tenant("acme");
    let promoted = |id: &str, roles: Value| {
        json!({ "promotionId": id, "tenantId": tenant, "environmentId": "prod",
                "specification": desired("2.0.0"),
                "approval": { "grantedBy": "release-manager", "grantedByRoles": roles,
                              "reason": "release 2.0" } })
    };
    publish(
        &nats,
        "evt-p1",
        "promotion.promotions.v1.promotion-approved",
        promoted("promo-1", json!(["Operator"])),
        "p1",
    )
    .await;
    let runs = runs_of(&api, "prod", 1).await;
    let run = text(&runs[0]["provisioningRunId"]);
    let applied = api.wait_state(&run, "Applied").await;
    assert_eq!(applied["promotionId"], "promo-1");
    assert_eq!(
        applied["approval"]["decision"]["approver"], "release-manager",
        "{applied}"
    );

    publish(
        &nats,
        "evt-p2",
        "promotion.promotions.v1.promotion-approved",
        promoted("promo-2", json!([])),
        "p2",
    )
    .await;
    let runs = runs_of(&api, "prod", 2).await;
    let second = runs
        .iter()
        .find(|r| r["promotionId"] == "promo-2")
        .map(|r| text(&r["provisioningRunId"]))
        .unwrap_or_else(|| panic!("the second promotion's run: {runs:?}"));
    let waiting = api.wait_state(&second, "AwaitingApproval").await;
    assert_eq!(
        waiting["refusedApprovals"][0]["why"], "grantor-not-allowed",
        "a grantor without the role does not open the gate: {waiting}"
    );
}
