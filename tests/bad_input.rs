//! Bad input gets RFC 7807 problem JSON with the right status, and nothing is written.

use crate::common::{Db, Stack};
use reqwest::Method;
use serde_json::json;

async fn bad_input_is_refused_on(db: Db) {
    let stack = Stack::on(db).await;
    let api = stack.operator("acme");
    api.environment("dev", "non-production").await;
    let before = (
        stack.count("environments").await,
        stack.count("deployment_specifications").await,
        stack.count("provisioning_runs").await,
        stack.count("outbox_events").await,
    );

    // Malformed JSON: 400.
    api.send_raw(
        Method::POST,
        "/factory/provisioning/runs",
        b"{\"environmentId\": ".to_vec(),
        "application/json",
    )
    .await
    .expect_problem(400);
    // Not JSON at all: 415.
    api.send_raw(
        Method::POST,
        "/factory/provisioning/runs",
        b"environmentId=dev".to_vec(),
        "text/plain",
    )
    .await
    .expect_problem(415);
    // Unknown fields would be silently lost: 422.
    api.post(
        "/factory/provisioning/runs",
        json!({ "environmentId": "dev", "kind": "baseline", "dryRun": true }),
    )
    .await
    .expect_problem(422);
    // Unknown kind: 422.
    api.post(
        "/factory/provisioning/runs",
        json!({ "environmentId": "dev", "kind": "yolo" }),
    )
    .await
    .expect_problem(422);
    // Unknown environment: 404.
    api.post(
        "/factory/provisioning/runs",
        json!({ "environmentId": "nope", "kind": "baseline" }),
    )
    .await
    .expect_problem(404);
    api.post(
        "/factory/provisioning/specifications",
        json!({ "environmentId": "nope", "kind": "environment", "programRef": "r", "programVersion": "abcdef12",
                "configRefs": {}, "secretRefs": {}, "workloads": [] }),
    )
    .await
    .expect_problem(404);
    // No specification yet: 409.
    api.post(
        "/factory/provisioning/runs",
        json!({ "environmentId": "dev", "kind": "baseline" }),
    )
    .await
    .expect_problem(409);
    // Negative replicas: 422.
    api.post(
        "/factory/provisioning/specifications",
        json!({ "environmentId": "dev", "kind": "environment", "programRef": "r", "programVersion": "abcdef12",
                "configRefs": {}, "secretRefs": {},
                "workloads": [{ "name": "api", "kind": "deployment", "version": "1", "replicas": -1 }] }),
    )
    .await
    .expect_problem(422);
    // Duplicate workload names: 422.
    api.post(
        "/factory/provisioning/specifications",
        json!({ "environmentId": "dev", "kind": "environment", "programRef": "r", "programVersion": "abcdef12",
                "configRefs": {}, "secretRefs": {},
                "workloads": [{ "name": "api", "kind": "d", "version": "1", "replicas": 1 },
                              { "name": "api", "kind": "d", "version": "2", "replicas": 1 }] }),
    )
    .await
    .expect_problem(422);
    // A body over 1 MiB: 413.
    let huge =
        json!({ "environmentId": "dev", "kind": "baseline", "pad": "x".repeat(1024 * 1024 + 10) });
    api.post("/factory/provisioning/runs", huge)
        .await
        .expect_problem(413);
    // An invalid environment class and a duplicate environment.
    api.post(
        "/factory/environments",
        json!({ "environmentId": "x", "projectId": "p", "class": "prod" }),
    )
    .await
    .expect_problem(422);
    api.post(
        "/factory/environments",
        json!({ "environmentId": "dev", "projectId": "p", "class": "production" }),
    )
    .await
    .expect_problem(409);
    api.post(
        "/factory/environments",
        json!({ "environmentId": "../etc", "projectId": "p", "class": "production" }),
    )
    .await
    .expect_problem(422);
    // Invalid cursor, limit and filters: 400.
    api.get("/factory/provisioning/runs?cursor=not-a-cursor")
        .await
        .expect_problem(400);
    api.get("/factory/provisioning/runs?limit=0")
        .await
        .expect_problem(400);
    api.get("/factory/provisioning/runs?limit=201")
        .await
        .expect_problem(400);
    api.get("/factory/provisioning/runs?limit=9223372036854775808")
        .await
        .expect_problem(400);
    api.get("/factory/provisioning/runs?state=Exploded")
        .await
        .expect_problem(400);
    // Unknown run: 404; unknown route: 404.
    api.get("/factory/provisioning/runs/does-not-exist")
        .await
        .expect_problem(404);
    api.get("/factory/nothing-here").await.expect_problem(404);

    // Unknown specification version: 404 (after declaring one).
    api.declare("dev", &[("api", "1.0.0", 1)]).await;
    api.post(
        "/factory/provisioning/runs",
        json!({ "environmentId": "dev", "kind": "baseline", "specificationVersion": 7 }),
    )
    .await
    .expect_problem(404);

    let after = (
        stack.count("environments").await,
        stack.count("deployment_specifications").await - 1,
        stack.count("provisioning_runs").await,
        stack.count("outbox_events").await - 1,
    );
    assert_eq!(before, after, "a rejected request wrote a row");
}

#[tokio::test]
async fn bad_input_is_refused_sqlite() {
    bad_input_is_refused_on(Db::Sqlite).await;
}

#[tokio::test]
async fn bad_input_is_refused_postgres() {
    bad_input_is_refused_on(Db::Postgres).await;
}
