//! Environment targets: where an environment runs, validated, stored, shown, changed with an
//! audit event, and the runner the worker picks for each environment.

use crate::common::{Api, Stack, StackOptions, text};
use reqwest::Method;
use serde_json::json;

/// A Pulumi stack on a file backend.
fn pulumi_target(state: &str) -> serde_json::Value {
    json!({ "runner": { "kind": "pulumi", "stack": "acme/shop/dev", "backendUrl": format!("file://{state}") } })
}

#[tokio::test]
async fn a_target_is_validated_stored_shown_and_changed_with_an_audit_event() {
    let stack = Stack::start().await;
    let api = stack.operator("acme");

    // A target that cannot be served is refused, naming the field; nothing is registered.
    let bad = api
        .post(
            "/factory/environments",
            json!({ "environmentId": "dev", "projectId": "shop", "class": "non-production",
                    "target": { "runner": { "kind": "pulumi", "stack": "shop", "backendUrl": "s3://state" } } }),
        )
        .await
        .expect(422);
    assert!(
        text(&bad["detail"]).contains("organization/project/stack"),
        "{bad}"
    );
    let unknown = api
        .post(
            "/factory/environments",
            json!({ "environmentId": "dev", "projectId": "shop", "class": "non-production",
                    "target": { "runner": { "kind": "terraform" } } }),
        )
        .await;
    assert_eq!(unknown.status, 422, "{:?}", unknown.body);
    api.get("/factory/environments/dev").await.expect(404);

    // The default is the sandbox; a Pulumi target is stored and shown as given.
    let sandboxed = api.environment("sbx", "non-production").await;
    assert_eq!(
        sandboxed["target"]["runner"]["kind"], "sandbox",
        "{sandboxed}"
    );
    let target = pulumi_target("/var/lib/pulumi-state");
    let created = api
        .post(
            "/factory/environments",
            json!({ "environmentId": "dev", "projectId": "shop", "class": "non-production",
                    "target": target }),
        )
        .await
        .expect(201);
    assert_eq!(created["target"]["runner"], target["runner"], "{created}");
    let shown = api.get("/factory/environments/dev").await.expect(200);
    assert_eq!(shown["target"], created["target"]);

    // Changing it: an Operator's, recorded with who did it.
    let path = "/factory/environments/dev/target";
    let back = json!({ "runner": { "kind": "sandbox" } });
    let no_role = stack.without_roles(
        "acme",
        &["factory.provisioning.apply", "factory.provisioning.read"],
    );
    no_role
        .send(Method::PUT, path, Some(back.clone()), &[])
        .await
        .expect(403);
    let changed = api
        .send(Method::PUT, path, Some(back.clone()), &[])
        .await
        .expect(200);
    assert_eq!(changed["target"]["runner"]["kind"], "sandbox");
    let events = stack.events("EnvironmentTargetChanged").await;
    assert_eq!(events.len(), 1, "{events:?}");
    assert_eq!(events[0]["payload"]["before"]["runner"]["kind"], "pulumi");
    assert_eq!(events[0]["payload"]["after"]["runner"]["kind"], "sandbox");
    assert_eq!(events[0]["payload"]["changedBy"], "tester");
    api.send(
        Method::PUT,
        "/factory/environments/nope/target",
        Some(back),
        &[],
    )
    .await
    .expect(404);
}

/// A Pulumi environment on a worker without the Pulumi CLI fails at plan with the reason;
/// the worker and its sandbox environments keep working.
#[tokio::test]
async fn a_pulumi_environment_without_the_cli_fails_at_plan_and_the_sandbox_keeps_working() {
    let stack = Stack::with(StackOptions::with_env(
        "RUNTIME_CLOUD_PULUMI_BINARY",
        "/nonexistent/bin/pulumi",
    ))
    .await;
    let api = stack.operator("acme");
    api.post(
        "/factory/environments",
        json!({ "environmentId": "dev", "projectId": "shop", "class": "non-production",
                "target": pulumi_target("/tmp/state") }),
    )
    .await
    .expect(201);
    api.declare("dev", &[("api", "1.0.0", 1)]).await;
    let failed_id = api.plan_run("dev", "baseline").await;
    let run = api.wait_state(&failed_id, "Failed").await;
    let reason = text(&run["reason"]);
    assert!(
        reason.contains("Pulumi CLI") && reason.contains("/nonexistent/bin/pulumi"),
        "{run}"
    );
    assert!(run["planReceipt"].is_null(), "no plan: {run}");

    api.environment("sbx", "non-production").await;
    api.declare("sbx", &[("api", "1.0.0", 1)]).await;
    let id = api.plan_run("sbx", "baseline").await;
    api.wait_state(&id, "Applied").await;
    // Sandbox runs keep their logs too; the failed plan's log says why it failed.
    let logs = text(
        &api.get(&format!("/factory/provisioning/runs/{id}/logs"))
            .await
            .expect(200),
    );
    assert!(
        logs.contains("sandbox plan") && logs.contains("sandbox apply"),
        "{logs}"
    );
    // (Not the newest run of dev: observing dev after the failed run may have proposed, and
    // started, another.)
    let log = text(
        &api.get(&format!(
            "/factory/provisioning/runs/{failed_id}/logs?phase=plan"
        ))
        .await
        .expect(200),
    );
    assert!(
        log.contains("failed:") && log.contains("Pulumi CLI"),
        "{log}"
    );
    api.get(&format!(
        "/factory/provisioning/runs/{failed_id}/logs?phase=apply"
    ))
    .await
    .expect(404);
    api.get(&format!(
        "/factory/provisioning/runs/{id}/logs?phase=everything"
    ))
    .await
    .expect(400);
    logs_are_read_a_page_at_a_time(&api, &id, logs.as_bytes()).await;
    // Another tenant's run has no logs for this one.
    stack
        .operator("globex")
        .get(&format!("/factory/provisioning/runs/{id}/logs"))
        .await
        .expect(404);
}

/// The pages of a run's logs, followed by their `Link`s, join into the whole (`whole`), and
/// none is longer than its `limit`; a limit out of bounds is refused, and past the end a page
/// is empty.
async fn logs_are_read_a_page_at_a_time(api: &Api, id: &str, whole: &[u8]) {
    let path = format!("/factory/provisioning/runs/{id}/logs");
    let (mut joined, mut pages) = (Vec::new(), 0);
    let mut next = Some(format!("{path}?limit=7"));
    while let Some(page_path) = next.take() {
        let page = api.get(&page_path).await;
        assert_eq!(page.status.as_u16(), 200, "{page_path}: {:?}", page.body);
        assert!(
            page.bytes.len() <= 7,
            "{page_path}: {} bytes",
            page.bytes.len()
        );
        joined.extend_from_slice(&page.bytes);
        pages += 1;
        next = page.headers.get("link").map(|link| {
            let link = link.to_str().expect("an ASCII Link");
            link.strip_prefix('<')
                .and_then(|l| l.strip_suffix(">; rel=\"next\""))
                .unwrap_or_else(|| panic!("not a next link: {link}"))
                .to_owned()
        });
    }
    assert_eq!(
        String::from_utf8_lossy(&joined),
        String::from_utf8_lossy(whole)
    );
    // Pages of 7 bytes, fewer where a character would have been cut.
    assert!(pages >= whole.len().div_ceil(7), "{pages} pages");
    let past = api.get(&format!("{path}?offset={}", whole.len())).await;
    assert_eq!(past.status.as_u16(), 200);
    assert!(past.bytes.is_empty() && past.headers.get("link").is_none());
    for limit in ["0", "1048577", "many"] {
        api.get(&format!("{path}?limit={limit}"))
            .await
            .expect_problem(400);
    }
    for offset in ["-1", "9223372036854775808"] {
        api.get(&format!("{path}?offset={offset}"))
            .await
            .expect_problem(400);
    }
}

/// With `RUNTIME_CLOUD_ARTIFACTS_URL=s3://…` the run logs go to an S3-compatible bucket (a
/// real `moto` server on loopback): the worker writes them there, not under the data dir, and
/// the API streams them back from there.
#[tokio::test]
async fn run_logs_are_kept_in_an_s3_bucket() {
    let s3 = crate::common::s3::S3Server::start("runtime-cloud-artifacts").await;
    let stack = Stack::with(StackOptions {
        env: s3.env("logs/prod"),
        ..Default::default()
    })
    .await;
    let api = stack.operator("acme");
    api.environment("sbx", "non-production").await;
    api.declare("sbx", &[("api", "1.0.0", 1)]).await;
    let id = api.plan_run("sbx", "baseline").await;
    api.wait_state(&id, "Applied").await;
    let prefix = format!("logs/prod/runs/{}/{id}", api.tenant);
    assert_eq!(
        s3.keys().await,
        [format!("{prefix}/apply.log"), format!("{prefix}/plan.log")],
        "both logs in the bucket, under the prefix and the tenant"
    );
    assert!(
        !stack.data_path().join("artifacts").exists(),
        "nothing under the data dir"
    );
    let served = text(
        &api.get(&format!("/factory/provisioning/runs/{id}/logs?phase=apply"))
            .await
            .expect(200),
    );
    assert!(served.contains("sandbox apply"), "{served}");
    // A page is a range of the object.
    let whole = api
        .get(&format!("/factory/provisioning/runs/{id}/logs"))
        .await
        .bytes;
    logs_are_read_a_page_at_a_time(&api, &id, &whole).await;
}
