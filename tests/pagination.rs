//! Every list is paged: each list route takes `limit` and `cursor`, never answers
//! more than `limit` items, and walking `nextCursor` returns every item once, in the list's
//! order. The OpenAPI test checks that every list route declares both parameters.

use crate::common::{Api, Stack, text};
use serde_json::{Value, json};

/// Every item of `path` (which may carry a query), walked two at a time; each page holds at
/// most two, and only the last page has no `nextCursor`.
async fn walk(api: &Api, path: &str) -> Vec<Value> {
    let sep = if path.contains('?') { '&' } else { '?' };
    let mut items = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let url = match &cursor {
            Some(c) => format!("{path}{sep}limit=2&cursor={c}"),
            None => format!("{path}{sep}limit=2"),
        };
        let page = api.get(&url).await.expect(200);
        let got = page["items"].as_array().cloned().unwrap_or_default();
        assert!(got.len() <= 2, "{url} answered {} items: {page}", got.len());
        items.extend(got);
        match page["nextCursor"].as_str() {
            Some(next) => cursor = Some(next.to_owned()),
            None => return items,
        }
    }
}

fn ids(items: &[Value], field: &str) -> Vec<String> {
    items.iter().map(|i| text(&i[field])).collect()
}

#[tokio::test]
async fn every_list_is_walked_by_cursor_a_page_at_a_time() {
    let stack = Stack::start().await;
    let api = stack.operator("acme");

    // Environments: five, two of them labelled region=eu, in two projects.
    for (id, project, region) in [
        ("e1", "shop", "eu"),
        ("e2", "shop", "us"),
        ("e3", "billing", "us"),
        ("e4", "shop", "eu"),
        ("e5", "billing", "us"),
    ] {
        api.post(
            "/factory/environments",
            json!({ "environmentId": id, "projectId": project, "class": "non-production",
                    "labels": { "region": region } }),
        )
        .await
        .expect(201);
    }
    let envs = walk(&api, "/factory/environments").await;
    assert_eq!(ids(&envs, "environmentId"), ["e1", "e2", "e3", "e4", "e5"]);

    // Fleet instances: a label selector that skips most environments still pages correctly.
    let eu = walk(&api, "/fleet/instances?labelSelector=region=eu").await;
    assert_eq!(ids(&eu, "environmentId"), ["e1", "e4"]);
    let shop = walk(&api, "/fleet/instances?productId=shop").await;
    assert_eq!(ids(&shop, "environmentId"), ["e1", "e2", "e4"]);
    let one = api.get("/fleet/instances?limit=1").await.expect(200);
    assert_eq!(one["items"].as_array().map(Vec::len), Some(1));
    let products = walk(&api, "/fleet/products").await;
    assert_eq!(ids(&products, "productId"), ["billing", "shop"]);
    assert_eq!(products[1]["instances"], 3, "{products:?}");

    // Drift findings: three workloads scaled out of band, three findings.
    let workloads = [("a", "1.0.0", 1), ("b", "1.0.0", 1), ("c", "1.0.0", 1)];
    api.applied(&stack, "dev", &workloads).await;
    for (name, _, _) in workloads {
        stack.sandbox_cli(
            "acme",
            "dev",
            &["scale", "--workload", name, "--replicas", "4"],
        );
    }
    let outcome = api.observe(&stack, "dev").await;
    assert_eq!(outcome["newFindings"], 3, "{outcome}");
    let findings = walk(&api, "/factory/environments/dev/drift?state=open").await;
    let mut resources = ids(&findings, "resource");
    let newest_first = ids(&findings, "findingId");
    let mut sorted = newest_first.clone();
    sorted.sort_by(|a, b| b.cmp(a));
    assert_eq!(newest_first, sorted, "newest first");
    resources.sort();
    assert_eq!(resources.len(), 3, "{findings:?}");

    // Drift rules and change windows, the environment's and the tenant's defaults: oldest first.
    let mut created = Vec::new();
    for n in 0..3 {
        let rule = api
            .post(
                "/factory/environments/dev/drift-rules",
                json!({ "kind": "replica", "workload": format!("w{n}"), "owner": "team-shop",
                        "reason": "autoscaled" }),
            )
            .await
            .expect(201);
        created.push(text(&rule["ruleId"]));
    }
    let rules = walk(&api, "/factory/environments/dev/drift-rules").await;
    assert_eq!(ids(&rules, "ruleId"), created);
    api.post(
        "/factory/drift-rules",
        json!({ "kind": "version", "workload": "*", "owner": "platform", "reason": "canaries" }),
    )
    .await
    .expect(201);
    assert_eq!(walk(&api, "/factory/drift-rules").await.len(), 1);

    let mut windows = Vec::new();
    for schedule in ["0 1 * * *", "0 2 * * *", "0 3 * * *"] {
        let window = api
            .post(
                "/factory/environments/dev/change-windows",
                json!({ "kind": "deny", "schedule": schedule, "duration": "1h" }),
            )
            .await
            .expect(201);
        windows.push(text(&window["windowId"]));
    }
    let listed = walk(&api, "/factory/environments/dev/change-windows").await;
    assert_eq!(ids(&listed, "windowId"), windows);
    assert!(walk(&api, "/factory/change-windows").await.is_empty());

    // A limit out of bounds and a forged cursor are refused, as on every list.
    api.get("/factory/environments?limit=0")
        .await
        .expect_problem(400);
    api.get("/fleet/instances?cursor=not-a-cursor")
        .await
        .expect_problem(400);
}
