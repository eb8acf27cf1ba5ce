//! Integration events through the outbox relay to a real NATS JetStream server (one per test,
//! on its own port, so a test can stop and restart it).

use crate::common::nats::Nats;
use crate::common::{Db, Stack, StackOptions, eventually, text};
use serde_json::{Value, json};
use std::collections::BTreeMap;

fn with_nats(nats: &Nats) -> StackOptions {
    StackOptions::with_env("NATS_URL", nats.url())
}

/// Waits until the relay has published every outbox row.
async fn all_published(stack: &Stack) -> i64 {
    eventually(60, "the relay to publish the whole outbox", || async {
        let total = stack.count("outbox_events").await;
        let pending = stack
            .count_where("outbox_events", "published_at IS NULL")
            .await;
        (total > 0 && pending == 0).then_some(total)
    })
    .await
}

/// Every event type arrives on its topic as a CloudEvents envelope carrying the outbox payload.
#[tokio::test]
async fn every_event_type_arrives_on_its_subject() {
    let nats = Nats::start();
    let stack = Stack::with(with_nats(&nats)).await;
    let api = stack.operator("acme");
    let (id, _) = api.awaiting_approval("prod", 1).await;
    api.decide(&id, "approve").await.expect(202);
    api.wait_state(&id, "Applied").await;
    api.wait_observed_after(&stack, &id).await;
    stack.sandbox_cli(
        "acme",
        "prod",
        &["fail-next-apply", "--reason", "deployment/api: quota"],
    );
    api.declare("prod", &[("api", "1.1.0", 1)]).await;
    let failing = api
        .post("/factory/provisioning/runs", json!({ "environmentId": "prod", "kind": "promotion", "approvalId": api.approval_id("prod").await }))
        .await
        .expect(202);
    let failing = text(&failing["provisioningRunId"]);
    api.wait_state(&failing, "Failed").await;
    api.wait_observed_after(&stack, &failing).await;
    // Drift, a proposal and a decision.
    stack.sandbox_cli(
        "acme",
        "prod",
        &["scale", "--workload", "api", "--replicas", "3"],
    );
    let proposal = text(&api.observe(&stack, "prod").await["newProposal"]["proposalId"]);
    api.wait_proposal("prod", &proposal, "Proposed").await;
    api.post(
        &format!("/factory/reconciliation/proposals/{proposal}/decide"),
        json!({ "decision": "reject" }),
    )
    .await
    .expect(202);
    api.wait_proposal("prod", &proposal, "Rejected").await;

    let total = all_published(&stack).await;
    let messages = eventually(30, "every message in the stream", || async {
        let m = nats.messages().await;
        (m.len() as i64 >= total).then_some(m)
    })
    .await;
    assert_eq!(messages.len() as i64, total, "each outbox row once");
    let mut by_type: BTreeMap<String, Vec<&(String, String, Value)>> = BTreeMap::new();
    for m in &messages {
        by_type
            .entry(m.2["type"].as_str().unwrap_or_default().to_owned())
            .or_default()
            .push(m);
    }
    for topic in [
        "provisioning.specifications.v1.specification-declared",
        "provisioning.runs.v1.provisioning-planned",
        "provisioning.runs.v1.provisioning-applied",
        "provisioning.runs.v1.provisioning-failed",
        "provisioning.inventory.v1.observed-state-changed",
        "provisioning.inventory.v1.runtime-drift-detected",
        "provisioning.inventory.v1.reconciliation-proposed",
        "provisioning.inventory.v1.reconciliation-decided",
    ] {
        let found = by_type
            .get(topic)
            .unwrap_or_else(|| panic!("no {topic} in {:?}", by_type.keys()));
        for (subject, msg_id, body) in found {
            assert_eq!(subject, topic);
            assert_eq!(body["specversion"], "1.0");
            assert_eq!(body["id"], msg_id.as_str(), "the dedupe id is the event id");
            assert_eq!(body["datacontenttype"], "application/json");
            assert!(body["data"]["tenantId"].is_string(), "{body}");
        }
    }
    let applied = &by_type["provisioning.runs.v1.provisioning-applied"][0].2["data"];
    assert_eq!(applied["provisioningRunId"], id.as_str());
    assert_eq!(applied["specificationVersion"], 1);
    let failed = &by_type["provisioning.runs.v1.provisioning-failed"][0].2["data"];
    assert_eq!(failed["reason"], "deployment/api: quota");
}

/// NATS stopped while runs complete: the product keeps working, events wait in the outbox, and
/// once NATS is back every event arrives exactly once.
#[tokio::test]
async fn nats_down_then_back_delivers_every_event_once() {
    let mut nats = Nats::start();
    let stack = Stack::with(with_nats(&nats)).await;
    let api = stack.operator("acme");
    api.applied(&stack, "dev", &[("api", "1.0.0", 1)]).await;
    all_published(&stack).await;

    nats.stop();
    let second = api.plan_run("dev", "reconciliation").await;
    api.wait_state(&second, "Applied").await;
    // Let the observation this run starts finish too, so the outbox is complete.
    api.wait_observed_after(&stack, &second).await;
    api.declare("dev", &[("api", "1.1.0", 1)]).await;
    assert!(
        stack
            .count_where("outbox_events", "published_at IS NULL")
            .await
            > 0,
        "events wait in the outbox"
    );

    nats.restart();
    let total = all_published(&stack).await;
    let messages = eventually(30, "every message in the stream", || async {
        let m = nats.messages().await;
        (m.len() as i64 >= total).then_some(m)
    })
    .await;
    let mut ids: Vec<&str> = messages.iter().map(|m| m.1.as_str()).collect();
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len() as i64, total, "every event once");
    assert_eq!(messages.len() as i64, total, "no duplicates");
}

/// A relay that dies after JetStream acknowledged a batch but before marking it publishes the
/// batch again; the dedupe id keeps a consumer from seeing it twice.
#[tokio::test]
async fn republished_events_are_deduplicated() {
    let nats = Nats::start();
    let mut stack = Stack::with(with_nats(&nats)).await;
    let api = stack.operator("acme");
    api.applied(&stack, "dev", &[("api", "1.0.0", 1)]).await;
    let total = all_published(&stack).await;

    // The crash: rows acknowledged but not marked.
    stack.kill_worker();
    stack
        .execute("UPDATE outbox_events SET published_at = NULL")
        .await;
    stack.start_worker();
    all_published(&stack).await;
    let messages = nats.messages().await;
    assert_eq!(
        messages.len() as i64,
        total,
        "JetStream dropped the re-published copies"
    );
}

/// Two relays (two workers) on one PostgreSQL: batches are claimed with `SKIP LOCKED`, so no
/// row is published by both — JetStream never reports a duplicate — and every event arrives.
#[tokio::test]
async fn two_relays_on_postgres_publish_each_event_once() {
    let nats = Nats::start();
    let stack = Stack::with(StackOptions {
        db: Some(Db::Postgres),
        ..with_nats(&nats)
    })
    .await;
    let _second_relay = stack.spawn_worker();
    let api = stack.operator("acme");
    let mut runs = Vec::new();
    for e in 0..6 {
        let env = format!("env-{e}");
        api.environment(&env, "non-production").await;
        api.declare(&env, &[("api", "1.0.0", 1)]).await;
        runs.push(api.plan_run(&env, "baseline").await);
    }
    for run in &runs {
        api.wait_state(run, "Applied").await;
        api.wait_observed_after(&stack, run).await;
    }
    let total = all_published(&stack).await;
    let messages = eventually(30, "every message in the stream", || async {
        let m = nats.messages().await;
        (m.len() as i64 >= total).then_some(m)
    })
    .await;
    assert_eq!(messages.len() as i64, total, "every event once");
    let logs = stack.logs();
    assert!(
        !logs.contains("the re-publish was deduplicated"),
        "two relays published the same row"
    );
}
