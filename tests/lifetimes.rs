//! An environment's whole life on the real Temporal dev server: an ephemeral environment is
//! provisioned, warned, decommissioned by a destroy run and retired, exactly once, also when
//! the worker is down at its expiry; an extension moves the expiry; production cannot be
//! ephemeral; an operator decommissions any environment.

use crate::common::{Api, Stack, StackOptions, eventually};
use serde_json::{Value, json};

/// Registers a non-production environment living `ttl`.
async fn ephemeral(api: &Api, env: &str, ttl: &str) -> Value {
    api.post(
        "/factory/environments",
        json!({ "environmentId": env, "projectId": "shop", "class": "non-production", "ttl": ttl }),
    )
    .await
    .expect(201)
}

/// Provisions `env` with one workload (a baseline run, applied).
async fn provisioned(api: &Api, stack: &Stack, env: &str) {
    api.declare(env, &[("api", "1.0.0", 2)]).await;
    let run = api.plan_run(env, "baseline").await;
    api.wait_state(&run, "Applied").await;
    api.wait_observed_after(stack, &run).await;
    let doc = stack.sandbox("acme", env);
    assert_eq!(doc["workloads"].as_array().map(Vec::len), Some(1), "{doc}");
}

/// Until the environment is retired; returns it.
async fn retired(api: &Api, env: &str) -> Value {
    eventually(120, "the environment to be retired", || async {
        let e = api
            .get(&format!("/factory/environments/{env}"))
            .await
            .expect(200);
        (e["state"] == "retired").then_some(e)
    })
    .await
}

/// The environment's decommission runs.
async fn decommissions(api: &Api, env: &str) -> Vec<Value> {
    let page = api
        .list_runs(&format!("?environmentId={env}&kind=decommission"))
        .await;
    page["items"].as_array().cloned().unwrap_or_default()
}

/// The payloads of the environment's events of `event_type`.
async fn events_of(stack: &Stack, event_type: &str, env: &str) -> Vec<Value> {
    stack
        .events(event_type)
        .await
        .into_iter()
        .map(|e| e["payload"].clone())
        .filter(|p| p["environmentId"] == env)
        .collect()
}

/// A 20-second environment is warned, then a decommission run (planned first) destroys what it
/// ran and the environment is retired: once, with its events; it then refuses new runs and
/// leaves the sweep.
#[tokio::test]
async fn an_ephemeral_environment_is_warned_decommissioned_and_retired_once() {
    let stack = Stack::with(StackOptions::default()).await;
    let api = stack.operator("acme");
    let env = ephemeral(&api, "preview", "20s").await;
    assert_eq!(env["state"], "active");
    let expires_at = env["expiresAt"].as_str().expect("expiresAt").to_owned();
    provisioned(&api, &stack, "preview").await;

    let env = retired(&api, "preview").await;
    assert!(
        env["retiredAt"]
            .as_str()
            .is_some_and(|at| at >= expires_at.as_str()),
        "{env}"
    );
    let warned = events_of(&stack, "EnvironmentExpiring", "preview").await;
    assert_eq!(warned.len(), 1, "{warned:?}");
    assert_eq!(
        warned[0]["expiresAt"].as_str().map(|s| &s[..19]),
        Some(&expires_at[..19])
    );
    let runs = decommissions(&api, "preview").await;
    assert_eq!(runs.len(), 1, "{runs:?}");
    let run = &runs[0];
    assert_eq!(run["state"], "Applied", "{run}");
    assert_eq!(
        run["planReceipt"]["deletes"].as_array().map(Vec::len),
        Some(1),
        "{run}"
    );
    let doc = stack.sandbox("acme", "preview");
    assert_eq!(doc["workloads"], json!([]), "{doc}");
    let retired_events = events_of(&stack, "EnvironmentRetired", "preview").await;
    assert_eq!(retired_events.len(), 1, "{retired_events:?}");
    assert_eq!(
        retired_events[0]["provisioningRunId"],
        run["provisioningRunId"]
    );

    // Retired: nothing changes it any more, and the sweep passes it by.
    let refused = api
        .post(
            "/factory/provisioning/runs",
            json!({ "environmentId": "preview", "kind": "baseline" }),
        )
        .await
        .expect_problem(409);
    assert!(text(&refused).contains("retired"), "{refused}");
    // The sweep observes the other environment, never the retired one (one page, one batch:
    // both would be recorded together).
    api.applied(&stack, "other", &[("web", "1.0.0", 1)]).await;
    let (preview_before, other_before) = (
        inventory_observed_at(&api, "preview").await,
        inventory_observed_at(&api, "other").await,
    );
    stack.trigger_schedule("observation-sweep");
    eventually(60, "the sweep to observe the other environment", || async {
        (inventory_observed_at(&api, "other").await != other_before).then_some(())
    })
    .await;
    assert_eq!(inventory_observed_at(&api, "preview").await, preview_before);
}

fn text(v: &Value) -> String {
    v["detail"].as_str().unwrap_or_default().to_owned()
}

async fn inventory_observed_at(api: &Api, env: &str) -> Value {
    let inventory = api
        .get(&format!("/factory/environments/{env}/inventory"))
        .await
        .expect(200);
    inventory["observedAt"].clone()
}

/// The worker is down when the environment expires: the lifetime's timer fires when a worker
/// is back, and the environment is decommissioned once.
#[tokio::test]
async fn a_worker_down_at_expiry_decommissions_once_when_it_is_back() {
    let mut stack = Stack::with(StackOptions::default()).await;
    let api = stack.operator("acme");
    let env = ephemeral(&api, "preview", "20s").await;
    provisioned(&api, &stack, "preview").await;
    stack.kill_worker();
    let expires_at: chrono::DateTime<chrono::Utc> = env["expiresAt"]
        .as_str()
        .expect("expiresAt")
        .parse()
        .expect("time");
    eventually(60, "the expiry to pass with the worker down", || async {
        (chrono::Utc::now() > expires_at + chrono::Duration::seconds(2)).then_some(())
    })
    .await;
    assert_eq!(
        api.get("/factory/environments/preview").await.expect(200)["state"],
        "active",
        "nothing decommissions without a worker"
    );
    stack.start_worker();
    retired(&api, "preview").await;
    assert_eq!(decommissions(&api, "preview").await.len(), 1);
    assert_eq!(
        events_of(&stack, "EnvironmentRetired", "preview")
            .await
            .len(),
        1
    );
}

/// An extension moves the expiry (recorded, within the tenant's limit); the environment lives
/// past its first expiry. A production environment cannot be ephemeral; an operator
/// decommissions any environment, and a non-operator cannot.
#[tokio::test]
async fn an_extension_moves_the_expiry_and_production_is_never_ephemeral() {
    let stack = Stack::with(StackOptions::default()).await;
    let api = stack.operator("acme");
    let env = ephemeral(&api, "preview", "20s").await;
    let first: chrono::DateTime<chrono::Utc> = env["expiresAt"]
        .as_str()
        .expect("expiresAt")
        .parse()
        .expect("time");
    provisioned(&api, &stack, "preview").await;

    let too_far = api
        .post(
            "/factory/environments/preview/extend",
            json!({ "ttl": "31d" }),
        )
        .await
        .expect_problem(422);
    assert!(text(&too_far).contains("limit"), "{too_far}");
    let extended = api
        .post(
            "/factory/environments/preview/extend",
            json!({ "ttl": "2h" }),
        )
        .await
        .expect(200);
    let moved: chrono::DateTime<chrono::Utc> = extended["expiresAt"]
        .as_str()
        .expect("expiresAt")
        .parse()
        .expect("time");
    assert!(moved > first + chrono::Duration::minutes(100), "{extended}");
    let recorded = events_of(&stack, "EnvironmentExpiryExtended", "preview").await;
    assert_eq!(recorded.len(), 1, "{recorded:?}");
    assert!(recorded[0]["extendedBy"].as_str().is_some(), "{recorded:?}");
    eventually(60, "the first expiry to pass", || async {
        (chrono::Utc::now() > first + chrono::Duration::seconds(5)).then_some(())
    })
    .await;
    let env = api.get("/factory/environments/preview").await.expect(200);
    assert_eq!(env["state"], "active", "{env}");
    assert!(decommissions(&api, "preview").await.is_empty());

    // The tenant's limit, set by a PlatformAdmin, bounds extensions from now on.
    let admin = stack.platform_admin("acme");
    admin
        .put(
            "/factory/capacity/environment-lifetime",
            json!({ "maxTtl": "1h" }),
        )
        .await
        .expect(200);
    api.post(
        "/factory/environments/preview/extend",
        json!({ "ttl": "2h" }),
    )
    .await
    .expect_problem(422);

    let prod = api
        .post(
            "/factory/environments",
            json!({ "environmentId": "prod", "projectId": "shop", "class": "production", "ttl": "1h" }),
        )
        .await
        .expect_problem(422);
    assert!(text(&prod).contains("production"), "{prod}");
    api.post(
        "/factory/environments",
        json!({ "environmentId": "both", "projectId": "shop", "class": "non-production",
                "ttl": "1h", "expiresAt": "2030-01-01T00:00:00Z" }),
    )
    .await
    .expect_problem(422);

    // Any environment is decommissioned at once by an operator, not by a reader.
    api.applied(&stack, "staging", &[("web", "1.0.0", 1)]).await;
    let reader = stack.without_roles("acme", &["factory.provisioning.apply"]);
    reader
        .post("/factory/environments/staging/decommission", json!({}))
        .await
        .expect_problem(403);
    api.post(
        "/factory/environments/staging/decommission",
        json!({ "reason": "replaced by staging-2" }),
    )
    .await
    .expect(202);
    retired(&api, "staging").await;
    assert_eq!(decommissions(&api, "staging").await.len(), 1);
    api.post("/factory/environments/staging/decommission", json!({}))
        .await
        .expect_problem(409);
}
