//! Off-boarding end to end on the sandbox: an order exports the instance's whole record as one
//! archive whose manifest lists every record and whose checksums verify, stores and verifies
//! it, and only then decommissions the instance, which the fleet counts `offboarded`; the
//! archive is downloaded with its own scope. A worker killed between the export and the
//! decommission loses no archive and decommissions once.

use crate::common::{Api, Stack, eventually, text};
use runtime_cloud_models::offboarding::{Manifest, checksum, verify};
use serde_json::{Value, json};

async fn wait_order(api: &Api, id: &str, state: &str) -> Value {
    eventually(120, &format!("the order to be {state}"), || async move {
        let o = api
            .get(&format!("/fleet/offboarding-orders/{id}"))
            .await
            .expect(200);
        (o["state"] == state).then_some(o)
    })
    .await
}

/// The archive as the API serves it, with its manifest verified against its files.
async fn download(stack: &Stack, order: &Value) -> (Vec<u8>, Manifest) {
    let exporter = stack.with_roles("auditor", "acme", &["factory.fleet.export"], &[]);
    let res = exporter
        .get(&format!(
            "/fleet/offboarding-orders/{}/archive",
            text(&order["orderId"])
        ))
        .await;
    assert_eq!(res.status, 200, "{}", res.body);
    assert_eq!(res.content_type, "application/x-tar");
    let bytes = res.bytes;
    assert_eq!(checksum(&bytes), text(&order["archiveSha256"]));
    let files = runtime_cloud_activities::offboarding::unpack(&bytes).expect("a tar");
    let manifest = verify(&files, &text(&order["orderId"])).expect("the archive verifies");
    (bytes, manifest)
}

fn records<'a>(manifest: &'a Manifest, path: &str) -> &'a [String] {
    &manifest
        .files
        .iter()
        .find(|f| f.path == path)
        .unwrap_or_else(|| panic!("{path} is not in the manifest"))
        .records
}

fn ids(page: &Value, key: &str) -> Vec<String> {
    let mut ids: Vec<String> = page["items"]
        .as_array()
        .expect("items")
        .iter()
        .map(|i| text(&i[key]))
        .collect();
    ids.sort();
    ids
}

fn sorted(ids: &[String]) -> Vec<String> {
    let mut ids = ids.to_vec();
    ids.sort();
    ids
}

#[tokio::test]
async fn an_instance_is_exported_verified_then_decommissioned_and_counted_offboarded() {
    let stack = Stack::start().await;
    let api = stack.operator("acme");
    api.applied(&stack, "shop-00", &[("api", "1.0.0", 2)]).await;
    api.applied(&stack, "shop-01", &[("api", "1.0.0", 1)]).await;
    // A finding and its proposal, waiting for a person, are part of the record.
    api.declare("shop-00", &[("api", "1.1.0", 2)]).await;
    stack.sandbox_cli(
        "acme",
        "shop-00",
        &["scale", "--workload", "api", "--replicas", "5"],
    );
    api.observe(&stack, "shop-00").await;

    // Only an Operator orders it, and says why.
    stack
        .without_roles("acme", &["factory.fleet.operate"])
        .post(
            "/fleet/offboarding-orders",
            json!({ "environmentId": "shop-00", "reason": "contract ended" }),
        )
        .await
        .expect_problem(403);
    api.post(
        "/fleet/offboarding-orders",
        json!({ "environmentId": "shop-00", "reason": " " }),
    )
    .await
    .expect_problem(422);
    let placed = api
        .post(
            "/fleet/offboarding-orders",
            json!({ "environmentId": "shop-00", "reason": "contract ended" }),
        )
        .await
        .expect(202);
    let id = text(&placed["orderId"]);
    assert_eq!(placed["workflowId"], format!("offboarding-order/{id}"));
    let done = wait_order(&api, &id, "completed").await;

    // The archive: every record, each file's checksum, the whole archive's.
    let (_, manifest) = download(&stack, &done).await;
    assert_eq!(manifest.environment_id, "shop-00");
    let runs = api
        .get("/factory/provisioning/runs?environmentId=shop-00&limit=200")
        .await
        .expect(200);
    // Every run but the decommission, which ran after the export.
    let decommission = text(&done["provisioningRunId"]);
    let before: Vec<String> = ids(&runs, "provisioningRunId")
        .into_iter()
        .filter(|r| *r != decommission)
        .collect();
    assert_eq!(before.len(), 2, "{runs}");
    assert_eq!(sorted(records(&manifest, "runs.json")), before);
    let specs = api
        .get("/factory/provisioning/specifications?environmentId=shop-00")
        .await
        .expect(200);
    assert_eq!(
        sorted(records(&manifest, "specifications.json")),
        ids(&specs, "specificationId")
    );
    let findings = api
        .get("/factory/environments/shop-00/drift?limit=200")
        .await
        .expect(200);
    assert!(!records(&manifest, "findings.json").is_empty());
    assert_eq!(
        sorted(records(&manifest, "findings.json")),
        ids(&findings, "findingId")
    );
    let proposals = api
        .get("/factory/reconciliation/proposals?environmentId=shop-00")
        .await
        .expect(200);
    assert_eq!(
        sorted(records(&manifest, "proposals.json")),
        ids(&proposals, "proposalId")
    );
    let baseline = &runs["items"]
        .as_array()
        .expect("runs")
        .last()
        .expect("a run")["provisioningRunId"];
    let log = format!("runs/{}/apply.log", text(baseline));
    assert!(
        manifest.files.iter().any(|f| f.path == log),
        "the runs' logs are archived: {:?}",
        manifest.files.iter().map(|f| &f.path).collect::<Vec<_>>()
    );
    assert_eq!(records(&manifest, "environment.json"), ["shop-00"]);

    // Decommissioned after the export, and counted off-boarded.
    let run = api.run(&text(&done["provisioningRunId"])).await;
    assert_eq!(
        (run["kind"].as_str(), run["state"].as_str()),
        (Some("decommission"), Some("Applied"))
    );
    let exported_at: chrono::DateTime<chrono::Utc> = text(&done["exportedAt"]).parse().unwrap();
    let started_at: chrono::DateTime<chrono::Utc> = text(&run["startedAt"]).parse().unwrap();
    assert!(started_at >= exported_at, "{exported_at} then {started_at}");
    assert_eq!(
        stack.sandbox("acme", "shop-00")["workloads"],
        json!([]),
        "destroyed"
    );
    let env = api.get("/factory/environments/shop-00").await.expect(200);
    assert_eq!(env["state"], "offboarded", "{env}");
    let summary = api.get("/fleet/meta/summary").await.expect(200);
    assert_eq!(summary["offboardedInstances"], 1, "{summary}");
    assert_eq!(
        summary["instancesByClass"]["non-production"], 1,
        "{summary}"
    );
    let instances = api.get("/fleet/instances").await.expect(200);
    assert_eq!(instances["items"][0]["environmentId"], "shop-00");
    assert_eq!(instances["items"][0]["state"], "offboarded", "{instances}");
    assert_eq!(stack.events("OffboardingOrdered").await.len(), 1);
    let offboarded = stack.events("InstanceOffboarded").await;
    assert_eq!(offboarded.len(), 1, "{offboarded:?}");
    assert_eq!(
        offboarded[0]["payload"]["archiveSha256"],
        done["archiveSha256"]
    );

    // The archive needs its scope; ordering again answers the same order.
    api.get(&format!("/fleet/offboarding-orders/{id}/archive"))
        .await
        .expect_problem(403);
    let again = api
        .post(
            "/fleet/offboarding-orders",
            json!({ "environmentId": "shop-00", "reason": "again" }),
        )
        .await
        .expect(200);
    assert_eq!(again["orderId"], id.as_str());
    let listed = api
        .get("/fleet/offboarding-orders?state=completed")
        .await
        .expect(200);
    assert_eq!(ids(&listed, "orderId"), [id]);
}

/// The worker is killed once the archive is verified and the decommission waits for its
/// production approval: the archive stays as it was verified, and the instance is
/// decommissioned once.
#[tokio::test]
async fn a_worker_killed_between_the_export_and_the_decommission_loses_nothing_and_repeats_nothing()
{
    let mut stack = Stack::start().await;
    let api = stack.operator("acme");
    let (baseline, _) = api.awaiting_approval("prod-eu", 1).await;
    api.decide(&baseline, "approve").await.expect(202);
    api.wait_state(&baseline, "Applied").await;

    let placed = api
        .post(
            "/fleet/offboarding-orders",
            json!({ "environmentId": "prod-eu", "reason": "customer left" }),
        )
        .await
        .expect(202);
    let id = text(&placed["orderId"]);
    let waiting = wait_order(&api, &id, "decommissioning").await;
    let run_id = text(&waiting["provisioningRunId"]);
    api.wait_state(&run_id, "AwaitingApproval").await;
    let (before, _) = download(&stack, &waiting).await;

    stack.kill_worker();
    stack.start_worker();
    api.decide(&run_id, "approve").await.expect(202);
    let done = wait_order(&api, &id, "completed").await;
    assert_eq!(
        done["provisioningRunId"],
        run_id.as_str(),
        "one decommission"
    );
    assert_eq!(done["archiveSha256"], waiting["archiveSha256"]);
    let (after, _) = download(&stack, &done).await;
    assert_eq!(before, after, "the archive is the one verified");
    let decommissions = api
        .get("/factory/provisioning/runs?environmentId=prod-eu&kind=decommission")
        .await
        .expect(200);
    assert_eq!(ids(&decommissions, "provisioningRunId"), [run_id]);
    assert_eq!(stack.events("InstanceOffboarded").await.len(), 1);
}
