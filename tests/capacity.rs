//! Execution capacity's records end to end: worker pools, quotas and leases under
//! `/factory/capacity`, their scopes and roles, tenants apart, pages and problem JSON.

use crate::common::{Stack, text};
use serde_json::json;

fn pool(id: &str) -> serde_json::Value {
    json!({ "poolId": id, "kind": "dedicated", "securityBoundary": "customer-isolated",
            "region": "eu-west-1", "nodeProfile": "c6i.large", "minSize": 1, "maxSize": 4 })
}

#[tokio::test]
async fn pools_and_quotas_are_recorded_per_tenant_with_their_scopes_and_roles() {
    let stack = Stack::start().await;
    let admin = stack.platform_admin("acme");
    let created = admin
        .post("/factory/capacity/pools", pool("eu-prod"))
        .await
        .expect(201);
    assert_eq!(
        (&created["poolId"], &created["state"], &created["kind"]),
        (&json!("eu-prod"), &json!("active"), &json!("dedicated"))
    );
    admin
        .post("/factory/capacity/pools", pool("eu-dev"))
        .await
        .expect(201);
    admin
        .post("/factory/capacity/pools", pool("eu-prod"))
        .await
        .expect_problem(409);
    let mut bad = pool("x");
    bad["maxSize"] = json!(0);
    admin
        .post("/factory/capacity/pools", bad)
        .await
        .expect_problem(422);
    // A pool id names a task queue: another tenant cannot take it, nor see this one.
    let other = stack.platform_admin("globex");
    other
        .post("/factory/capacity/pools", pool("eu-prod"))
        .await
        .expect_problem(409);
    other
        .get("/factory/capacity/pools/eu-prod")
        .await
        .expect_problem(404);
    assert_eq!(
        other.get("/factory/capacity/pools").await.expect(200)["items"],
        json!([])
    );
    // Pages, newest first.
    let first = admin
        .get("/factory/capacity/pools?limit=1")
        .await
        .expect(200);
    assert_eq!(first["items"][0]["poolId"], "eu-dev");
    let cursor = text(&first["nextCursor"]);
    let second = admin
        .get(&format!("/factory/capacity/pools?limit=1&cursor={cursor}"))
        .await
        .expect(200);
    assert_eq!(second["items"][0]["poolId"], "eu-prod");
    assert!(second["nextCursor"].is_null());

    // Quotas: the default until a PlatformAdmin sets one; an Operator with the scope cannot.
    let default = admin.get("/factory/capacity/quotas/shop").await.expect(200);
    assert_eq!(
        (&default["source"], &default["concurrentRuns"]),
        (&json!("default"), &json!(10))
    );
    let limits = json!({ "concurrentRuns": 2, "concurrentSandboxes": 2, "cpuPerAttempt": 1.5,
                         "memoryGbPerAttempt": 2, "executionMinutesPerDay": 60 });
    let operator = stack.client(
        "acme",
        &["factory.capacity.read", "factory.capacity.manage"],
    );
    let refused = operator
        .put("/factory/capacity/quotas/shop", limits.clone())
        .await
        .expect_problem(403);
    assert!(
        text(&refused["detail"]).contains("PlatformAdmin"),
        "{refused}"
    );
    let set = admin
        .put("/factory/capacity/quotas/shop", limits.clone())
        .await
        .expect(200);
    assert_eq!(
        (&set["concurrentRuns"], &set["source"], &set["setBy"]),
        (&json!(2), &json!("manual"), &json!("admin"))
    );
    let mut zero = limits.clone();
    zero["concurrentRuns"] = json!(0);
    admin
        .put("/factory/capacity/quotas/shop", zero)
        .await
        .expect_problem(422);
    assert_eq!(
        admin.get("/factory/capacity/quotas/shop").await.expect(200)["concurrentRuns"],
        2,
        "a refused change writes nothing"
    );
    let listed = admin.get("/factory/capacity/quotas").await.expect(200);
    assert_eq!(listed["items"].as_array().map(Vec::len), Some(1));
    assert_eq!(
        other.get("/factory/capacity/quotas/shop").await.expect(200)["source"],
        "default",
        "tenants are apart"
    );

    // Leases are listed (none yet) and their filters checked.
    assert_eq!(
        admin.get("/factory/capacity/leases").await.expect(200)["items"],
        json!([])
    );
    admin
        .get("/factory/capacity/leases?state=borrowed")
        .await
        .expect_problem(400);
    // Without the read scope, nothing.
    stack
        .client("acme", &["factory.provisioning.read"])
        .get("/factory/capacity/pools")
        .await
        .expect_problem(403);
}
