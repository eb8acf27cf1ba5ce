//! Liveness and readiness as Kubernetes probes: readiness checks the read DB and the Temporal
//! frontend, reports each, and answers 503 while either is unreachable.

use crate::common::proxy::Proxy;
use crate::common::{Db, Stack, StackOptions, eventually, temporal_address};
use serde_json::Value;

async fn readiness(stack: &Stack) -> (u16, Value) {
    let res = stack.anonymous().get("/readyz").await;
    (res.status.as_u16(), res.body)
}

/// Waits until `/readyz` answers `status` with these checks.
async fn wait_ready(stack: &Stack, status: u16, database: bool, temporal: bool) {
    eventually(
        30,
        &format!("/readyz {status} db={database} temporal={temporal}"),
        || async {
            let (code, body) = readiness(stack).await;
            (code == status
                && body["checks"]["database"] == database
                && body["checks"]["temporal"] == temporal)
                .then_some(())
        },
    )
    .await;
}

// Multi-threaded: the proxy must keep forwarding while the harness blocks on a process.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readiness_reports_each_dependency_and_answers_503_without_it() {
    let postgres = Proxy::start("127.0.0.1:5432").await;
    let temporal = Proxy::start(&temporal_address()).await;
    let stack = Stack::with(StackOptions {
        db: Some(Db::Postgres),
        postgres_via: Some(postgres.addr.clone()),
        env: vec![("TEMPORAL_ADDRESS".into(), temporal.addr.clone())],
        ..Default::default()
    })
    .await;
    wait_ready(&stack, 200, true, true).await;
    let (_, body) = readiness(&stack).await;
    assert_eq!(body["status"], "ok");

    postgres.cut();
    wait_ready(&stack, 503, false, true).await;
    let (_, body) = readiness(&stack).await;
    assert_eq!(body["status"], "unavailable");
    // Liveness does not depend on anything: the process is alive.
    assert_eq!(stack.anonymous().get("/healthz").await.status.as_u16(), 200);
    postgres.restore();
    wait_ready(&stack, 200, true, true).await;

    temporal.cut();
    wait_ready(&stack, 503, true, false).await;
    assert_eq!(stack.anonymous().get("/healthz").await.status.as_u16(), 200);
    temporal.restore();
    wait_ready(&stack, 200, true, true).await;
}
