//! Hostile input, generated from the OpenAPI document by Schemathesis (PyPI): every route, with
//! a valid operator token. Invalid requests must be refused with a 4xx problem, never a 5xx,
//! and must write nothing; valid-looking ones must never cause a 5xx either.

use crate::common::{Db, Stack};
use std::process::Command;

const TABLES: [&str; 8] = [
    "environments",
    "deployment_specifications",
    "provisioning_runs",
    "outbox_events",
    "runtime_inventories",
    "observed_workloads",
    "drift_findings",
    "reconciliation_proposals",
];

async fn row_counts(stack: &Stack) -> Vec<(&'static str, i64)> {
    let mut counts = Vec::new();
    for t in TABLES {
        counts.push((t, stack.count(t).await));
    }
    counts
}

/// Runs Schemathesis against the stack's document in `mode` with `checks`.
fn schemathesis(stack: &Stack, token: &str, mode: &str, checks: &str) {
    let out = Command::new("schemathesis")
        .args(["run", &format!("{}/openapi.json", stack.base_url)])
        .args(["--mode", mode, "--checks", checks])
        .args(["--max-examples", "15", "--seed", "42"])
        .args(["--phases", "examples,coverage,fuzzing"])
        .args(["--header", &format!("Authorization: Bearer {token}")])
        .args(["--suppress-health-check", "all"])
        .env("NO_COLOR", "1")
        // Its example database and reports stay in the test's temp dir.
        .current_dir(stack.data_path())
        .output()
        .expect("run schemathesis (scripts/install-tools installs it from PyPI)");
    assert!(
        out.status.success(),
        "schemathesis ({mode}) found failures:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

async fn fuzz(db: Db) {
    let stack = Stack::on(db).await;
    let api = stack.operator("fuzz");
    // Something for the generated requests to find.
    api.applied(&stack, "dev", &[("api", "1.0.0", 1)]).await;
    let token = stack.token(
        "fuzz",
        &[
            "factory.provisioning.read",
            "factory.provisioning.apply",
            "factory.runtime.read",
            "factory.runtime.operate",
        ],
    );

    let before = row_counts(&stack).await;
    schemathesis(
        &stack,
        &token,
        "negative",
        "not_a_server_error,negative_data_rejection,content_type_conformance",
    );
    assert_eq!(
        row_counts(&stack).await,
        before,
        "a refused request wrote a row"
    );
    schemathesis(
        &stack,
        &token,
        "positive",
        "not_a_server_error,content_type_conformance,response_schema_conformance",
    );
    // The processes never panicked.
    let logs = stack.logs();
    assert!(!logs.contains("panicked"), "a process panicked:\n{logs}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_input_is_refused_on_sqlite() {
    fuzz(Db::Sqlite).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_input_is_refused_on_postgres() {
    fuzz(Db::Postgres).await;
}
