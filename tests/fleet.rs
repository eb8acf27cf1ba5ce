//! Fleet operations, the inventory half: products, instances as observed, the summary and the
//! fleet's health asserted exactly, and incidents opened and resolved.

use crate::common::{Stack, text};
use serde_json::json;

#[tokio::test]
async fn the_fleet_summary_counts_what_observation_shows_exactly() {
    let stack = Stack::start().await;
    let api = stack.operator("acme");
    // shop: two applied non-production instances and a production one never observed;
    // billing: one non-production instance, registered only.
    api.applied(&stack, "shop-dev-1", &[("api", "1.0.0", 2)])
        .await;
    api.applied(&stack, "shop-dev-2", &[("api", "1.0.0", 1)])
        .await;
    api.environment("shop-prod", "production").await;
    api.post(
        "/factory/environments",
        json!({ "environmentId": "billing-dev", "projectId": "billing", "class": "non-production" }),
    )
    .await
    .expect(201);
    stack.sandbox_cli(
        "acme",
        "shop-dev-1",
        &["scale", "--workload", "api", "--replicas", "5"],
    );
    let outcome = api.observe(&stack, "shop-dev-1").await;
    assert_eq!(outcome["newFindings"], 1, "{outcome}");
    let incident = api
        .post(
            "/fleet/incidents",
            json!({ "title": "checkout errors", "environmentId": "shop-dev-2" }),
        )
        .await
        .expect(201);
    let other = api
        .post("/fleet/incidents", json!({ "title": "a false alarm" }))
        .await
        .expect(201);
    let resolved = api
        .post(
            &format!("/fleet/incidents/{}/resolve", text(&other["incidentId"])),
            json!({ "resolution": "the alert was misconfigured" }),
        )
        .await
        .expect(200);
    assert_eq!(resolved["state"], "resolved");
    api.post(
        &format!("/fleet/incidents/{}/resolve", text(&other["incidentId"])),
        json!({ "resolution": "again" }),
    )
    .await
    .expect_problem(409);

    let mut summary = api.get("/fleet/meta/summary").await.expect(200);
    // The two applied instances were observed moments ago (after their runs, and shop-dev-1
    // since); the others never were.
    let age = summary
        .as_object_mut()
        .and_then(|s| s.remove("observationAge"))
        .expect("observationAge");
    assert_eq!(age["environments"], 2, "{age}");
    let seconds = |q: &str| age[q].as_f64().unwrap_or(f64::NAN);
    assert!(
        0.0 <= seconds("p50Seconds")
            && seconds("p50Seconds") <= seconds("p99Seconds")
            && seconds("p99Seconds") <= seconds("maxSeconds")
            && seconds("maxSeconds") < 120.0,
        "{age}"
    );
    let scraped = stack.scrape().await;
    let max = format!(
        "connectsoft_factory_runtime_observation_age_seconds{{tenant=\"{}\",stat=\"max\"}} ",
        api.tenant
    );
    let published: f64 = scraped
        .lines()
        .find_map(|l| l.strip_prefix(&max))
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("{max} in {scraped}"));
    assert!(
        published >= seconds("maxSeconds") && published < 120.0,
        "{published}"
    );
    assert_eq!(
        summary,
        json!({ "operatedProducts": 2,
                "instancesByClass": { "non-production": 3, "production": 1 },
                "staleInstances": 2, "openDrift": 1, "openIncidents": 1, "activeRollouts": 0,
                "offboardedInstances": 0, "hourlyCost": null })
    );

    let instances = api.get("/fleet/instances?productId=shop").await.expect(200);
    let items = instances["items"].as_array().cloned().unwrap_or_default();
    assert_eq!(items.len(), 3, "{instances}");
    let dev1 = &items[0];
    assert_eq!(dev1["environmentId"], "shop-dev-1");
    assert_eq!(
        dev1["specificationVersion"], 1,
        "the version applied, as observed: {dev1}"
    );
    assert_eq!(
        (&dev1["workloads"], &dev1["openDrift"]),
        (&json!(1), &json!(1))
    );
    assert_eq!(dev1["stale"], false);
    let prod = &items[2];
    assert_eq!(
        (&prod["health"], &prod["stale"]),
        (&json!("unknown"), &json!(true)),
        "{prod}"
    );
    let production = api
        .get("/fleet/instances?class=production")
        .await
        .expect(200);
    assert_eq!(production["items"].as_array().map(Vec::len), Some(1));
    api.get("/fleet/instances?class=staging")
        .await
        .expect_problem(400);

    let products = api.get("/fleet/products").await.expect(200);
    assert_eq!(products["items"][0]["productId"], "billing");
    assert_eq!(products["items"][1]["productId"], "shop");
    assert_eq!(products["items"][1]["instances"], 3);
    assert_eq!(
        products["items"][1]["instancesByClass"],
        json!({ "non-production": 2, "production": 1 })
    );

    let open = api.get("/fleet/incidents?state=open").await.expect(200);
    assert_eq!(open["items"].as_array().map(Vec::len), Some(1));
    assert_eq!(open["items"][0]["incidentId"], incident["incidentId"]);
    assert_eq!(open["items"][0]["source"], "operator");

    let health = api.get("/fleet/health").await.expect(200);
    assert_eq!(
        health,
        json!({ "liveness": "ok", "readiness": "ok",
                "dependencies": [{ "name": "readStore", "status": "ok" },
                                 { "name": "temporal", "status": "ok" }],
                "inboxLag": [] })
    );

    // The fleet's reads need their scopes, and another tenant sees none of this.
    let reader = stack.client("acme", &["factory.runtime.read"]);
    reader.get("/fleet/meta/summary").await.expect_problem(403);
    reader.get("/fleet/health").await.expect_problem(403);
    let other_tenant = stack
        .operator("globex")
        .get("/fleet/meta/summary")
        .await
        .expect(200);
    assert_eq!(other_tenant["operatedProducts"], 0);
}
