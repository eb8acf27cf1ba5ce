//! The OpenAPI 3.1 document at `/openapi.json`: valid by an independent validator
//! (`openapi-spec-validator` from PyPI), and the routes it lists are exactly the routes served.

use crate::common::Stack;
use reqwest::Method;
use serde_json::Value;
use std::collections::BTreeSet;

const SCOPES: [&str; 4] = [
    "factory.provisioning.read",
    "factory.provisioning.apply",
    "factory.runtime.read",
    "factory.runtime.operate",
];

/// Every `(METHOD, path)` the document lists, with the scopes its operation names.
fn operations(doc: &Value) -> Vec<(Method, String, Vec<String>)> {
    let mut ops = Vec::new();
    for (path, item) in doc["paths"].as_object().expect("paths") {
        for (method, op) in item.as_object().expect("path item") {
            let Ok(method) = method.to_uppercase().parse::<Method>() else {
                continue;
            };
            let scopes = op["security"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|req| req["bearer"].as_array())
                .flatten()
                .filter_map(|s| s.as_str().map(str::to_owned))
                .collect();
            ops.push((method, path.clone(), scopes));
        }
    }
    ops
}

/// Every GET whose 200 answer has an `items` array, with the query parameters it takes.
fn paged_lists(doc: &Value) -> Vec<(String, BTreeSet<String>)> {
    let resolve = |schema: &Value| -> Value {
        match schema["$ref"].as_str() {
            Some(r) => {
                let name = r.trim_start_matches("#/components/schemas/");
                doc["components"]["schemas"][name].clone()
            }
            None => schema.clone(),
        }
    };
    let mut lists = Vec::new();
    for (path, item) in doc["paths"].as_object().expect("paths") {
        let op = &item["get"];
        let schema = resolve(&op["responses"]["200"]["content"]["application/json"]["schema"]);
        if schema["properties"]["items"]["type"] != "array" {
            continue;
        }
        let params = op["parameters"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|p| p["in"] == "query")
            .filter_map(|p| p["name"].as_str().map(str::to_owned))
            .collect();
        lists.push((path.clone(), params));
    }
    lists
}

/// `/factory/runs/{provisioningRunId}` → `/factory/runs/x`.
fn concrete(path: &str) -> String {
    path.split('/')
        .map(|seg| if seg.starts_with('{') { "x" } else { seg })
        .collect::<Vec<_>>()
        .join("/")
}

#[tokio::test]
async fn openapi_document_is_valid_and_covers_every_route() {
    let stack = Stack::start().await;
    let anonymous = stack.anonymous();
    let res = anonymous.get("/openapi.json").await;
    assert_eq!(res.status.as_u16(), 200, "{}", res.body);
    assert_eq!(res.content_type, "application/json");
    let doc = res.body;
    assert!(
        doc["openapi"]
            .as_str()
            .is_some_and(|v| v.starts_with("3.1")),
        "not OpenAPI 3.1: {}",
        doc["openapi"]
    );

    // An independent validator accepts it.
    let file = stack.data_path().join("openapi.json");
    std::fs::write(&file, serde_json::to_vec_pretty(&doc).expect("json")).expect("write");
    let out = std::process::Command::new("python3")
        .args(["-m", "openapi_spec_validator", "--schema", "3.1"])
        .arg(&file)
        .output()
        .expect("run python3 (./scripts/install-tools installs openapi-spec-validator)");
    assert!(
        out.status.success(),
        "openapi-spec-validator refused the document:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );

    // Documented → served: every operation answers as documented, not with the fallback.
    let ops = operations(&doc);
    let documented: BTreeSet<(String, String)> = ops
        .iter()
        .map(|(m, p, _)| (m.to_string(), p.clone()))
        .collect();
    for (method, path, scopes) in &ops {
        let url = concrete(path);
        let res = anonymous.send(method.clone(), &url, None, &[]).await;
        if scopes.is_empty() {
            assert!(
                res.status.is_success(),
                "{method} {path} is documented without a token but answers {}: {}",
                res.status,
                res.body
            );
            continue;
        }
        assert_eq!(
            scopes.len(),
            1,
            "{method} {path} names one scope: {scopes:?}"
        );
        res.expect_problem(401);
        // A token with every other scope is refused: the documented scope is the one it needs.
        let others: Vec<&str> = SCOPES.iter().copied().filter(|s| *s != scopes[0]).collect();
        let res = stack
            .client("openapi", &others)
            .send(method.clone(), &url, Some(serde_json::json!({})), &[])
            .await;
        assert_eq!(
            res.status.as_u16(),
            403,
            "{method} {path} without `{}` should be 403: {}",
            scopes[0],
            res.body
        );
        for status in ["401", "403", "500"] {
            let r = &doc["paths"][path][method.as_str().to_lowercase()]["responses"][status];
            assert!(
                r["content"]["application/problem+json"].is_object(),
                "{method} {path} documents {status} as problem JSON: {r}"
            );
        }
    }

    // Served → documented: routes are registered only through `routes!`, which documents them;
    // a plain axum `.route(` would serve an undocumented path. The console (`console.rs`: the
    // web UI's page, files and sign-in under `/console`) is the one exception: it is not the
    // API, and its routes are listed in docs/console.md.
    let sources = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("api/src/http");
    for entry in std::fs::read_dir(&sources).expect("api/src/http") {
        let path = entry.expect("entry").path();
        if path.ends_with("console.rs") {
            continue;
        }
        let text = std::fs::read_to_string(&path).expect("source");
        assert!(
            !text.contains(".route(") && !text.contains(".route_service("),
            "{} registers a route outside `routes!`, so the document would miss it",
            path.display()
        );
    }
    // No list answers an unbounded body: every GET whose answer is a list of `items` takes
    // `cursor` and `limit`.
    let lists = paged_lists(&doc);
    assert!(lists.len() > 15, "the lists found: {lists:?}");
    for (path, params) in lists {
        assert!(
            params.contains("cursor") && params.contains("limit"),
            "GET {path} answers a list without `cursor` and `limit`: {params:?}"
        );
    }
    // And a path the document does not list is not served.
    let res = anonymous.get("/factory/not-a-route").await;
    res.expect_problem(404);

    // The spec's routes are all there.
    for (m, p) in [
        ("GET", "/factory/environments"),
        ("POST", "/factory/environments"),
        ("GET", "/factory/provisioning/specifications"),
        ("POST", "/factory/provisioning/specifications"),
        ("GET", "/factory/provisioning/runs"),
        ("POST", "/factory/provisioning/runs"),
        ("GET", "/factory/provisioning/runs/{provisioningRunId}"),
        (
            "POST",
            "/factory/provisioning/runs/{provisioningRunId}/cancel",
        ),
        (
            "POST",
            "/factory/provisioning/runs/{provisioningRunId}/approval",
        ),
        ("GET", "/factory/environments/{environmentId}"),
        ("PUT", "/factory/environments/{environmentId}/target"),
        ("PUT", "/factory/environments/{environmentId}/mode"),
        (
            "GET",
            "/factory/environments/{environmentId}/change-windows",
        ),
        (
            "POST",
            "/factory/environments/{environmentId}/change-windows",
        ),
        (
            "DELETE",
            "/factory/environments/{environmentId}/change-windows/{windowId}",
        ),
        ("GET", "/factory/change-windows"),
        ("POST", "/factory/change-windows"),
        ("DELETE", "/factory/change-windows/{windowId}"),
        (
            "POST",
            "/factory/provisioning/runs/{provisioningRunId}/break-glass",
        ),
        ("GET", "/factory/provisioning/runs/{provisioningRunId}/logs"),
        ("POST", "/factory/approvals"),
        ("GET", "/factory/approvals"),
        ("GET", "/factory/approvals/{approvalId}"),
        ("GET", "/factory/environments/{environmentId}/inventory"),
        ("GET", "/factory/environments/{environmentId}/drift"),
        ("POST", "/factory/environments/{environmentId}/observe"),
        ("GET", "/factory/environments/{environmentId}/drift-rules"),
        ("POST", "/factory/environments/{environmentId}/drift-rules"),
        (
            "DELETE",
            "/factory/environments/{environmentId}/drift-rules/{ruleId}",
        ),
        ("GET", "/factory/drift-rules"),
        ("POST", "/factory/drift-rules"),
        ("DELETE", "/factory/drift-rules/{ruleId}"),
        ("GET", "/factory/reconciliation/proposals"),
        (
            "POST",
            "/factory/reconciliation/proposals/{proposalId}/decide",
        ),
        ("GET", "/fleet/health"),
        ("GET", "/fleet/meta/summary"),
        ("GET", "/fleet/products"),
        ("GET", "/fleet/instances"),
        ("GET", "/fleet/incidents"),
        ("POST", "/fleet/incidents"),
        ("POST", "/fleet/incidents/{incidentId}/resolve"),
        ("GET", "/fleet/rollouts"),
        ("POST", "/fleet/rollouts"),
        ("GET", "/fleet/rollouts/{rolloutId}"),
        ("POST", "/fleet/rollouts/{rolloutId}/breach"),
        ("POST", "/fleet/rollouts/{rolloutId}/resume"),
        ("POST", "/fleet/rollouts/{rolloutId}/skip"),
        ("POST", "/fleet/rollouts/{rolloutId}/abort"),
        ("POST", "/fleet/rollouts/{rolloutId}/rollback"),
        ("GET", "/factory/capacity/pools"),
        ("POST", "/factory/capacity/pools"),
        ("GET", "/factory/capacity/pools/{poolId}"),
        ("PUT", "/factory/capacity/pools/{poolId}/state"),
        ("PUT", "/factory/environments/{environmentId}/pool"),
        ("GET", "/factory/capacity/quotas"),
        ("GET", "/factory/capacity/quotas/{projectId}"),
        ("PUT", "/factory/capacity/quotas/{projectId}"),
        ("GET", "/factory/capacity/leases"),
        ("POST", "/factory/environments/{environmentId}/extend"),
        ("POST", "/factory/environments/{environmentId}/decommission"),
        ("GET", "/factory/capacity/environment-lifetime"),
        ("PUT", "/factory/capacity/environment-lifetime"),
        ("GET", "/factory/quarantines"),
        ("POST", "/factory/quarantines"),
        ("GET", "/factory/quarantines/{quarantineId}"),
        ("POST", "/factory/quarantines/{quarantineId}/lift"),
        (
            "GET",
            "/factory/reconciliation/proposals/{proposalId}/adoption",
        ),
        (
            "POST",
            "/factory/reconciliation/proposals/{proposalId}/adoption",
        ),
        ("GET", "/fleet/offboarding-orders"),
        ("POST", "/fleet/offboarding-orders"),
        ("GET", "/fleet/offboarding-orders/{orderId}"),
        ("GET", "/fleet/offboarding-orders/{orderId}/archive"),
        ("GET", "/factory/prices"),
        ("PUT", "/factory/prices"),
        ("GET", "/fleet/costs"),
        ("GET", "/healthz"),
        ("GET", "/readyz"),
        ("GET", "/metrics"),
        ("GET", "/openapi.json"),
        ("GET", "/docs"),
        ("POST", "/codec/decode"),
        ("POST", "/codec/encode"),
    ] {
        assert!(
            documented.contains(&(m.to_owned(), p.to_owned())),
            "{m} {p} is not documented"
        );
    }
    assert_eq!(documented.len(), 82, "documented: {documented:?}");

    // Schemas the routes name are there, and secret refs are described as references.
    for name in [
        "Problem",
        "RunView",
        "PlanReceipt",
        "ApplyReceipt",
        "Workload",
    ] {
        assert!(
            doc["components"]["schemas"][name].is_object(),
            "schema {name} missing"
        );
    }
    assert_eq!(
        doc["components"]["securitySchemes"]["bearer"]["scheme"],
        "bearer"
    );
    // Enums are documented as they are on the wire.
    assert_eq!(
        doc["components"]["schemas"]["EnvironmentClass"]["enum"],
        serde_json::json!(["production", "non-production"])
    );

    // The docs page points at the document.
    let page = anonymous.get("/docs").await;
    assert_eq!(page.status.as_u16(), 200);
    assert!(page.content_type.starts_with("text/html"));
    assert!(
        page.body
            .as_str()
            .is_some_and(|h| h.contains("/openapi.json")),
        "docs page: {}",
        page.body
    );
}
