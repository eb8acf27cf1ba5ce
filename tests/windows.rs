//! Change windows end to end: inside a deny window drift is still found and its
//! reconciliation planned, but the apply waits (`waitingForWindow`) and happens when the window
//! ends; an Operator's break-glass applies at once, its reason recorded on the run and as an
//! event.

use crate::common::{Api, Stack, eventually, text};
use chrono::{Datelike, Timelike};
use serde_json::{Value, json};

/// A non-production environment `env` applied as declared (api 1.0.0 ×2, web 2.0.0 ×1).
async fn applied(stack: &Stack) -> Api {
    let api = stack.operator("acme");
    api.applied(stack, "env", &[("api", "1.0.0", 2), ("web", "2.0.0", 1)])
        .await;
    api
}

async fn window(api: &Api, body: Value) -> String {
    let created = api
        .post("/factory/environments/env/change-windows", body)
        .await
        .expect(201);
    text(&created["windowId"])
}

/// The run of the environment's newest proposal, once it has one.
async fn reconciliation_run(api: &Api) -> String {
    eventually(60, "the auto-accepted proposal's run", || {
        let api = api.clone();
        async move {
            let p = api.proposals("env").await.into_iter().next()?;
            p["provisioningRunId"].as_str().map(str::to_owned)
        }
    })
    .await
}

/// Waits until the run says a window holds it.
async fn held(api: &Api, run: &str) -> Value {
    eventually(60, "the run to wait for its window", || {
        let api = api.clone();
        let run = run.to_owned();
        async move {
            let r = api.run(&run).await;
            (!r["waitingForWindow"].is_null()).then_some(r)
        }
    })
    .await
}

#[tokio::test]
async fn in_a_deny_window_drift_is_reconciled_only_when_the_window_ends() {
    let stack = Stack::start().await;
    let api = applied(&stack).await;
    // A freeze from this second, for 15 seconds (a cron with seconds, in UTC).
    let now = chrono::Utc::now();
    let schedule = format!(
        "{} {} {} {} {} *",
        now.second(),
        now.minute(),
        now.hour(),
        now.day(),
        now.month()
    );
    let freeze = window(
        &api,
        json!({ "kind": "deny", "schedule": schedule, "duration": "15s", "reason": "release freeze" }),
    )
    .await;
    stack.sandbox_cli(
        "acme",
        "env",
        &["scale", "--workload", "web", "--replicas", "3"],
    );
    let outcome = api.observe(&stack, "env").await;
    assert_eq!(
        outcome["newFindings"], 1,
        "found inside the window: {outcome}"
    );
    let run = reconciliation_run(&api).await;
    let waiting = held(&api, &run).await;
    assert_eq!(waiting["waitingForWindow"]["windowId"], freeze.as_str());
    assert!(
        waiting["waitingForWindow"]["opensAt"].is_string(),
        "{waiting}"
    );
    assert_eq!(
        waiting["state"], "Planned",
        "planned, not applied: {waiting}"
    );
    assert_eq!(stack.sandbox("acme", "env")["workloads"][1]["replicas"], 3);

    let applied = api.wait_state(&run, "Applied").await;
    let opened = chrono::DateTime::parse_from_rfc3339(
        waiting["waitingForWindow"]["opensAt"]
            .as_str()
            .unwrap_or_default(),
    )
    .expect("opensAt");
    assert!(chrono::Utc::now() >= opened, "not before the window ended");
    assert!(applied["waitingForWindow"].is_null(), "{applied}");
    assert!(applied["breakGlass"].is_null(), "{applied}");
    api.wait_observed_after(&stack, &run).await;
    assert!(api.drift("env", Some("open")).await.is_empty());
}

#[tokio::test]
async fn break_glass_applies_inside_a_closed_window_with_its_reason_recorded() {
    let stack = Stack::start().await;
    let api = applied(&stack).await;
    // Closed for good: every minute, for an hour.
    let closed = window(
        &api,
        json!({ "kind": "deny", "schedule": "* * * * *", "duration": "1h", "timeZone": "Europe/Berlin" }),
    )
    .await;
    // A window that does not read is refused with what is wrong.
    let bad = api
        .post(
            "/factory/environments/env/change-windows",
            json!({ "kind": "deny", "schedule": "fridays", "duration": "8 hours" }),
        )
        .await
        .expect_problem(422);
    assert!(text(&bad["detail"]).contains("schedule"), "{bad}");

    api.declare("env", &[("api", "1.1.0", 2), ("web", "2.0.0", 1)])
        .await;
    let run = api.plan_run("env", "baseline").await;
    let waiting = held(&api, &run).await;
    assert_eq!(waiting["waitingForWindow"]["windowId"], closed.as_str());
    assert!(
        waiting["waitingForWindow"]["opensAt"].is_null(),
        "it never opens: {waiting}"
    );

    let path = format!("/factory/provisioning/runs/{run}/break-glass");
    api.post(&path, json!({ "reason": " " }))
        .await
        .expect_problem(422);
    let viewer = stack.without_roles(
        "acme",
        &["factory.provisioning.apply", "factory.provisioning.read"],
    );
    viewer
        .post(&path, json!({ "reason": "I want to" }))
        .await
        .expect_problem(403);
    api.post(
        &path,
        json!({ "reason": "INC-4711: api 1.0.0 leaks memory" }),
    )
    .await
    .expect(202);
    let applied = api.wait_state(&run, "Applied").await;
    let glass = &applied["breakGlass"];
    assert_eq!(
        glass["reason"], "INC-4711: api 1.0.0 leaks memory",
        "{applied}"
    );
    assert_eq!(glass["windowId"], closed.as_str());
    assert!(
        glass["by"].is_string() && glass["at"].is_string(),
        "{glass}"
    );
    let events = stack.events("ChangeWindowOverridden").await;
    assert_eq!(events.len(), 1, "{events:?}");
    assert_eq!(events[0]["payload"]["provisioningRunId"], run.as_str());
    assert_eq!(events[0]["payload"]["windowId"], closed.as_str());
    // Done: nothing to break any more.
    api.post(&path, json!({ "reason": "again" }))
        .await
        .expect_problem(409);
}
