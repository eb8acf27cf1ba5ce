//! Authentication, scopes, tenant isolation and secret handling.

use crate::common::Stack;
use reqwest::Method;
use serde_json::json;

/// Every route but health needs a valid bearer token; health needs none.
#[tokio::test]
async fn every_route_but_health_needs_a_token() {
    let stack = Stack::start().await;
    let anon = stack.anonymous();
    let routes: &[(Method, &str)] = &[
        (Method::GET, "/factory/environments"),
        (Method::POST, "/factory/environments"),
        (Method::GET, "/factory/provisioning/specifications"),
        (Method::POST, "/factory/provisioning/specifications"),
        (Method::GET, "/factory/provisioning/runs"),
        (Method::POST, "/factory/provisioning/runs"),
        (Method::GET, "/factory/provisioning/runs/x"),
        (Method::POST, "/factory/provisioning/runs/x/cancel"),
        (Method::POST, "/factory/provisioning/runs/x/approval"),
    ];
    for (method, path) in routes {
        let res = anon.send(method.clone(), path, Some(json!({})), &[]).await;
        assert_eq!(res.status, 401, "{method} {path} without a token");
        res.expect_problem(401);
    }
    anon.get("/healthz").await.expect(200);
    let ready = anon.get("/readyz").await.expect(200);
    assert_eq!(ready["checks"]["database"], true);
    assert_eq!(ready["checks"]["temporal"], true);

    // A forged token (another key) and garbage are 401 too.
    let forged = runtime_cloud_api::auth::JwtKeys::from_secret(b"another key")
        .mint(
            "mallory",
            "acme",
            &["factory.provisioning.read".into()],
            &[],
            60,
        )
        .expect("mint");
    let res = reqwest::Client::new()
        .get(format!("{}/factory/provisioning/runs", stack.base_url))
        .bearer_auth(forged)
        .send()
        .await
        .expect("request");
    assert_eq!(res.status(), 401);
}

/// A token without the route's scope gets 403.
#[tokio::test]
async fn missing_scope_is_forbidden() {
    let stack = Stack::start().await;
    let reader = stack.client("acme", &["factory.provisioning.read"]);
    reader
        .post(
            "/factory/environments",
            json!({ "environmentId": "dev", "projectId": "p", "class": "production" }),
        )
        .await
        .expect_problem(403);
    reader
        .post(
            "/factory/provisioning/runs",
            json!({ "environmentId": "dev", "kind": "baseline" }),
        )
        .await
        .expect_problem(403);
    reader.get("/factory/provisioning/runs").await.expect(200);
    let writer = stack.client("acme", &["factory.provisioning.apply"]);
    writer
        .get("/factory/provisioning/runs")
        .await
        .expect_problem(403);
    writer
        .get("/factory/provisioning/specifications")
        .await
        .expect_problem(403);
}

/// Another tenant's environments, specifications and runs are "not found", never "forbidden".
#[tokio::test]
async fn other_tenants_see_nothing() {
    let stack = Stack::start().await;
    let acme = stack.operator("acme");
    let (id, run) = acme.awaiting_approval("prod", 1).await;

    let globex = stack.operator("globex");
    globex
        .get(&format!("/factory/provisioning/runs/{id}"))
        .await
        .expect_problem(404);
    globex
        .post(
            &format!("/factory/provisioning/runs/{id}/cancel"),
            json!({}),
        )
        .await
        .expect_problem(404);
    globex
        .post(
            &format!("/factory/provisioning/runs/{id}/approval"),
            json!({ "decision": "approve", "inputsHash": run["planReceipt"]["inputsHash"] }),
        )
        .await
        .expect_problem(404);
    globex
        .post(
            "/factory/provisioning/runs",
            json!({ "environmentId": "prod", "kind": "baseline" }),
        )
        .await
        .expect_problem(404);
    assert_eq!(
        globex.get("/factory/provisioning/runs").await.expect(200)["items"],
        json!([])
    );
    assert_eq!(
        globex
            .get("/factory/provisioning/specifications")
            .await
            .expect(200)["items"],
        json!([])
    );
    assert_eq!(
        globex.get("/factory/environments").await.expect(200)["items"],
        json!([])
    );
    // globex may use the same environment id for its own environment.
    globex.environment("prod", "non-production").await;
    assert_eq!(acme.run(&id).await["state"], "AwaitingApproval");
}

/// Secret references are stored; a secret value is refused and reaches no table, event, log
/// or workflow payload.
#[tokio::test]
async fn secret_values_never_reach_tables_events_logs_or_workflows() {
    const VALUE: &str = "hunter2-Sup3r-S3cret-Value";
    let stack = Stack::start().await;
    let api = stack.operator("acme");
    api.environment("dev", "non-production").await;

    let spec = |secret_refs: serde_json::Value, workload_refs: serde_json::Value| {
        json!({ "environmentId": "dev", "kind": "environment", "programRef": "git://infra//shop",
                "programVersion": "a1b2c3d4e5", "configRefs": {}, "secretRefs": secret_refs,
                "workloads": [{ "name": "api", "kind": "deployment", "version": "1", "replicas": 1,
                                "secretRefs": workload_refs }] })
    };
    let attempts = [
        spec(json!({ "db": VALUE }), json!({})),
        spec(json!({}), json!({ "db": VALUE })),
        spec(json!({ "db": { "value": VALUE } }), json!({})),
        {
            let mut s = spec(json!({}), json!({}));
            s["secretValues"] = json!({ "db": VALUE });
            s
        },
    ];
    for body in attempts {
        let res = api.post("/factory/provisioning/specifications", body).await;
        let problem = res.expect_problem(422);
        assert!(
            !problem.to_string().contains(VALUE),
            "the error echoed the secret: {problem}"
        );
    }
    assert_eq!(
        stack.count("deployment_specifications").await,
        0,
        "nothing written"
    );

    // References are accepted, stored and carried, and the run applies.
    api.post(
        "/factory/provisioning/specifications",
        spec(
            json!({ "db": "secretbroker://shop/db" }),
            json!({ "tls": "secretbroker://shop/tls" }),
        ),
    )
    .await
    .expect(201);
    let id = api.plan_run("dev", "baseline").await;
    api.wait_state(&id, "Applied").await;
    let stored = api
        .get("/factory/provisioning/specifications")
        .await
        .expect(200);
    assert_eq!(
        stored["items"][0]["secretRefs"]["db"],
        "secretbroker://shop/db"
    );

    // The value is nowhere: not in the read DB file, the outbox, the logs, or the history.
    // With WAL the newest pages may still be in the log file: read both.
    let db_bytes = stack.read_db_bytes();
    assert!(
        String::from_utf8_lossy(&db_bytes).contains("secretbroker://shop/db"),
        "the check reads where the rows are"
    );
    assert!(
        !String::from_utf8_lossy(&db_bytes).contains(VALUE),
        "secret in the read DB"
    );
    assert!(!stack.logs().contains(VALUE), "secret in the logs");
    let history = stack.history_payloads(&format!("provisioning-run/{id}"));
    assert!(
        history.contains("secretbroker://shop/db"),
        "the history carries references"
    );
    assert!(!history.contains(VALUE), "secret in the workflow history");
}
