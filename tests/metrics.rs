//! `/metrics`: the spec's metrics with true values, read back exactly after driving runs and drift,
//! on SQLite and on PostgreSQL (the two keep the counts differently: migration 000020).

use crate::common::{Db, Stack, StackOptions, text};
use serde_json::json;

async fn scrape(stack: &Stack) -> String {
    stack.scrape().await
}

/// The value of one sample line (`name{labels}`), if present.
fn sample(text: &str, series: &str) -> Option<f64> {
    text.lines().find_map(|l| {
        l.strip_prefix(series)
            .and_then(|rest| rest.trim().parse().ok())
    })
}

#[tokio::test]
async fn metrics_report_runs_drift_proposals_and_staleness_exactly() {
    metrics_report_exactly_on(Db::Sqlite).await;
}

#[tokio::test]
async fn metrics_report_runs_drift_proposals_and_staleness_exactly_postgres() {
    metrics_report_exactly_on(Db::Postgres).await;
}

async fn metrics_report_exactly_on(db: Db) {
    let stack = Stack::with(StackOptions {
        db: Some(db),
        ..StackOptions::proposals_wait_for_a_decision()
    })
    .await;
    let api = stack.operator("acme");
    let t = api.tenant.clone();
    // dev: a baseline that applies.
    let applied = api.applied(&stack, "dev", &[("api", "1.0.0", 2)]).await;
    // prod: a rejected baseline and a failed promotion.
    let (rejected, _) = api.awaiting_approval("prod", 1).await;
    api.decide(&rejected, "reject").await.expect(202);
    api.wait_state(&rejected, "Rejected").await;
    stack.sandbox_cli("acme", "prod", &["fail-next-apply", "--reason", "boom"]);
    let body = json!({ "environmentId": "prod", "kind": "promotion", "approvalId": api.approval_id("prod").await });
    let failed = api
        .post("/factory/provisioning/runs", body)
        .await
        .expect(202);
    let failed = text(&failed["provisioningRunId"]);
    api.wait_state(&failed, "Failed").await;
    // The observation after the failure finds prod's workload missing and proposes it.
    api.wait_observed_after(&stack, &failed).await;
    // An environment never observed, and one replica drift proposed (not auto-accepted here).
    api.environment("never", "non-production").await;
    stack.sandbox_cli(
        "acme",
        "dev",
        &["scale", "--workload", "api", "--replicas", "5"],
    );
    let proposal = text(&api.observe(&stack, "dev").await["newProposal"]["proposalId"]);
    api.wait_proposal("dev", &proposal, "Proposed").await;

    let runs = |kind: &str, state: &str| {
        format!(
            "connectsoft_factory_provisioning_runs_total{{tenant=\"{t}\",kind=\"{kind}\",state=\"{state}\"}}"
        )
    };
    let expected = [
        (runs("baseline", "Applied"), 1.0),
        (runs("baseline", "Rejected"), 1.0),
        (runs("promotion", "Failed"), 1.0),
        (
            "connectsoft_factory_provisioning_apply_duration_seconds_count{kind=\"baseline\"}"
                .to_owned(),
            1.0,
        ),
        (
            "connectsoft_factory_provisioning_apply_duration_seconds_count{kind=\"promotion\"}"
                .to_owned(),
            1.0,
        ),
        // The replica drift in dev, and prod's workload missing after its failed apply.
        (
            format!(
                "connectsoft_factory_provisioning_reconciliation_diffs_total{{tenant=\"{t}\",destructive=\"false\"}}"
            ),
            2.0,
        ),
        (
            format!("connectsoft_factory_runtime_drift_open{{tenant=\"{t}\",kind=\"replica\"}}"),
            1.0,
        ),
        (
            format!("connectsoft_factory_runtime_drift_open{{tenant=\"{t}\",kind=\"missing\"}}"),
            1.0,
        ),
        (
            format!(
                "connectsoft_factory_runtime_reconciliation_proposals{{tenant=\"{t}\",state=\"Proposed\",destructive=\"false\"}}"
            ),
            2.0,
        ),
        // `never` was never observed; dev and prod were observed after their runs.
        (
            format!("connectsoft_factory_runtime_environments_stale{{tenant=\"{t}\"}}"),
            1.0,
        ),
    ];
    // Everything that changes these values has finished: one scrape must show them exactly.
    let text = scrape(&stack).await;
    for (series, value) in &expected {
        assert_eq!(sample(&text, series), Some(*value), "{series}\n{text}");
    }
    // OpenMetrics names a counter's family without `_total`; its samples have it.
    assert!(text.contains("# TYPE connectsoft_factory_provisioning_runs counter"));
    assert!(text.contains("# TYPE connectsoft_factory_runtime_drift_open gauge"));
    assert!(
        text.contains("# TYPE connectsoft_factory_provisioning_apply_duration_seconds histogram")
    );
    // Request durations are labelled by route template, never by raw ids.
    assert!(
        text.contains("route=\"/factory/provisioning/runs/{provisioningRunId}\""),
        "{text}"
    );
    assert!(!text.contains(&applied), "a run id leaked into a label");
}

/// The metrics name every tenant: the API's listener answers them only to a `PlatformAdmin`'s
/// token (401 without a token, 403 for an operator's); with an internal listener configured
/// they are served there without a token and the API's listener answers 404.
#[tokio::test]
async fn metrics_are_never_public_on_the_api_listener() {
    let stack = Stack::start().await;
    let url = format!("{}/metrics", stack.base_url);
    let anonymous = reqwest::get(&url).await.expect("get");
    assert_eq!(anonymous.status(), 401);
    let operator = stack.operator("acme").get("/metrics").await;
    assert_eq!(operator.status, 403, "{:?}", operator.body);
    assert!(
        stack
            .scrape()
            .await
            .contains("# TYPE connectsoft_factory_provisioning_runs counter")
    );

    let internal = format!("127.0.0.1:{}", crate::common::ports::free_port());
    let stack = Stack::with(StackOptions::with_env(
        "RUNTIME_CLOUD_METRICS_LISTEN",
        internal.clone(),
    ))
    .await;
    let admin = reqwest::Client::new()
        .get(format!("{}/metrics", stack.base_url))
        .bearer_auth(stack.token("platform", &["factory.meta.read"]))
        .send()
        .await
        .expect("get");
    assert_eq!(admin.status(), 404, "not on the API's listener");
    let scraped = reqwest::get(format!("http://{internal}/metrics"))
        .await
        .expect("the internal listener answers");
    assert_eq!(scraped.status(), 200);
    let text = scraped.text().await.expect("text");
    assert!(
        text.contains("# TYPE connectsoft_factory_provisioning_runs counter"),
        "{text}"
    );
}
