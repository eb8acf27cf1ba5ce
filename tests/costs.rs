//! Cost from what is observed, against the Kubernetes stand-in: without a price table the
//! routes say there is none (never a number); with one, each environment's hourly cost is its
//! workloads' requested CPU and memory times their replicas at the tenant's prices (a region's
//! own where its `region` label names one), by product and customer tenant — every figure
//! recomputed here from the objects the test put, not read back from the product; scaling a
//! workload moves its cost at the next observation; `/fleet/meta/summary` and `/metrics` show
//! the total.

use crate::common::kube_stand_in::KubeStandIn;
use crate::common::{Stack, StackOptions, text};
use runtime_cloud_models::observation::FIELD_MANAGER;
use serde_json::{Value, json};

/// A Deployment of `replicas` whose containers request `(cpu, memory)` each (none: no
/// `resources` at all).
fn deployment(name: &str, replicas: i64, containers: &[Option<(&str, &str)>]) -> Value {
    let containers: Vec<Value> = containers
        .iter()
        .enumerate()
        .map(|(i, requests)| {
            let mut c = json!({ "name": format!("{name}-{i}"),
                                "image": format!("registry.example.com/{name}:1.0.0") });
            if let Some((cpu, memory)) = requests {
                c["resources"] = json!({ "requests": { "cpu": cpu, "memory": memory } });
            }
            c
        })
        .collect();
    json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": { "name": name, "generation": 1 },
        "spec": { "replicas": replicas, "selector": { "matchLabels": { "app": name } },
                  "template": { "metadata": { "labels": { "app": name } },
                                "spec": { "containers": containers } } },
        "status": { "observedGeneration": 1, "replicas": replicas, "updatedReplicas": replicas,
                    "readyReplicas": replicas, "availableReplicas": replicas }
    })
}

const GIB: f64 = 1_073_741_824.0;

/// The test's own arithmetic: `(replicas, [(cores, bytes)])` per workload priced at
/// `cpu_hour` and `gb_hour`, rounded to a millionth as money is.
fn expected(workloads: &[(f64, &[(f64, f64)])], cpu_hour: f64, gb_hour: f64) -> f64 {
    let hourly: f64 = workloads
        .iter()
        .map(|(replicas, containers)| {
            let (cores, bytes) = containers
                .iter()
                .fold((0.0, 0.0), |(c, b), (cc, bb)| (c + cc, b + bb));
            replicas * (cores * cpu_hour + bytes / GIB * gb_hour)
        })
        .sum();
    (hourly * 1e6).round() / 1e6
}

fn close(a: &Value, b: f64) -> bool {
    a.as_f64().is_some_and(|a| (a - b).abs() < 1e-9)
}

#[tokio::test]
async fn a_fleet_is_priced_by_project_and_customer_tenant_from_what_it_requests() {
    let stack = Stack::with(StackOptions::with_env(
        "RUNTIME_CLOUD_KUBERNETES_WATCH",
        "false",
    ))
    .await;
    let cluster = KubeStandIn::start().await;
    // shop-a: api 3 × (500m, 512Mi), and batch with no requests (it cannot be priced).
    cluster.create(
        "shop-a",
        deployment("api", 3, &[Some(("500m", "512Mi"))]),
        FIELD_MANAGER,
    );
    cluster.create("shop-a", deployment("batch", 1, &[None]), FIELD_MANAGER);
    // shop-b: worker 2 × ((1, 1Gi) + a sidecar (100m, 64Mi)).
    cluster.create(
        "shop-b",
        deployment("worker", 2, &[Some(("1", "1Gi")), Some(("100m", "64Mi"))]),
        FIELD_MANAGER,
    );
    // blog: web 1 × (250m, 256Mi).
    cluster.create(
        "blog",
        deployment("web", 1, &[Some(("250m", "256Mi"))]),
        FIELD_MANAGER,
    );
    let (_dir, kubeconfig) = crate::kubernetes::kubeconfig(&cluster);
    let api = stack.operator("acme");
    for (env, project, namespace, customer, region) in [
        ("a1", "shop", "shop-a", Some("customer-1"), "eu-north-1"),
        ("b1", "shop", "shop-b", Some("customer-2"), "eu-west-1"),
        ("g1", "blog", "blog", None, "eu-west-1"),
    ] {
        let mut body = json!({ "environmentId": env, "projectId": project, "class": "non-production",
                               "labels": { "region": region },
                               "target": { "observer": { "kind": "kubernetes", "kubeconfigRef": kubeconfig,
                                                         "namespace": namespace } } });
        if let Some(customer) = customer {
            body["customerTenantId"] = json!(customer);
        }
        api.post("/factory/environments", body).await.expect(201);
        api.observe(&stack, env).await;
    }

    // No price table: said so, never a number.
    let none = api.get("/fleet/costs").await.expect(200);
    assert_eq!(none["priced"], false, "{none}");
    assert!(
        text(&none["reason"]).contains("PUT /factory/prices"),
        "{none}"
    );
    assert!(
        none["items"]
            .as_array()
            .expect("items")
            .iter()
            .all(|i| i["cost"].is_null())
    );
    api.get("/factory/prices").await.expect_problem(404);
    let summary = api.get("/fleet/meta/summary").await.expect(200);
    assert_eq!(summary["hourlyCost"], Value::Null, "{summary}");

    // A bad table is refused whole.
    let bad = api
        .put(
            "/factory/prices",
            json!({ "currency": "euro", "cpuHour": -1, "memoryGbHour": 0.005 }),
        )
        .await
        .expect_problem(422);
    assert!(text(&bad["detail"]).contains("cpuHour"), "{bad}");

    // Prices: the environments already observed are priced at once.
    let (cpu_hour, gb_hour, north_cpu_hour) = (0.04, 0.005, 0.03);
    api.put(
        "/factory/prices",
        json!({ "currency": "EUR", "cpuHour": cpu_hour, "memoryGbHour": gb_hour,
                "regions": { "eu-north-1": { "cpuHour": north_cpu_hour } } }),
    )
    .await
    .expect(200);
    let a1 = expected(
        &[(3.0, &[(0.5, 512.0 * 1_048_576.0)])],
        north_cpu_hour,
        gb_hour,
    );
    let b1 = expected(
        &[(2.0, &[(1.0, GIB), (0.1, 64.0 * 1_048_576.0)])],
        cpu_hour,
        gb_hour,
    );
    let g1 = expected(&[(1.0, &[(0.25, 256.0 * 1_048_576.0)])], cpu_hour, gb_hour);
    let costs = api.get("/fleet/costs").await.expect(200);
    assert_eq!(
        (&costs["priced"], &costs["currency"]),
        (&json!(true), &json!("EUR"))
    );
    let by_env: std::collections::BTreeMap<String, Value> = costs["items"]
        .as_array()
        .expect("items")
        .iter()
        .map(|i| (text(&i["environmentId"]), i["cost"].clone()))
        .collect();
    assert!(close(&by_env["a1"]["hourly"], a1), "{costs}");
    assert!(close(&by_env["b1"]["hourly"], b1), "{costs}");
    assert!(close(&by_env["g1"]["hourly"], g1), "{costs}");
    assert_eq!(by_env["a1"]["unpriced"], json!(["workload/batch"]));
    assert!(close(&by_env["b1"]["cpuCores"], 2.2), "{costs}");
    assert!(close(&costs["hourly"], a1 + b1 + g1), "{costs}");
    assert!(close(&costs["byProduct"]["shop"], a1 + b1), "{costs}");
    assert!(close(&costs["byProduct"]["blog"], g1), "{costs}");
    assert!(
        close(&costs["byCustomerTenant"]["customer-1"], a1),
        "{costs}"
    );
    assert!(
        close(&costs["byCustomerTenant"]["customer-2"], b1),
        "{costs}"
    );
    // Filtered, and paged: the totals are the selection's, not the page's.
    let shop = api
        .get("/fleet/costs?productId=shop&limit=1")
        .await
        .expect(200);
    assert_eq!(shop["items"].as_array().map(Vec::len), Some(1));
    assert!(shop["nextCursor"].is_string(), "{shop}");
    assert!(close(&shop["hourly"], a1 + b1), "{shop}");
    let customer = api
        .get("/fleet/costs?customerTenantId=customer-2")
        .await
        .expect(200);
    assert!(close(&customer["hourly"], b1), "{customer}");

    // api scales to 6: a1 costs twice its api at the next observation.
    cluster.put("shop-a", deployment("api", 6, &[Some(("500m", "512Mi"))]));
    api.observe(&stack, "a1").await;
    let doubled = expected(
        &[(6.0, &[(0.5, 512.0 * 1_048_576.0)])],
        north_cpu_hour,
        gb_hour,
    );
    let costs = api.get("/fleet/costs?productId=shop").await.expect(200);
    let a1_now = costs["items"]
        .as_array()
        .expect("items")
        .iter()
        .find(|i| i["environmentId"] == "a1")
        .expect("a1")["cost"]["hourly"]
        .clone();
    assert!(close(&a1_now, doubled), "{costs}");

    // The CLI: the totals, then a row per instance.
    let op = crate::cli::cli(&stack, Some(crate::cli::operator_token(&stack)));
    let shown = op.run(&["fleet", "costs", "--product", "shop"]);
    let shown = shown.expect(0);
    let total = (((doubled + b1) * 1e6).round() / 1e6).to_string();
    assert!(
        shown.starts_with(&format!("{total} EUR an hour (2 instances priced, 0 not)")),
        "{shown}"
    );
    assert!(
        shown.contains("customer-1") && shown.contains("workload/batch"),
        "{shown}"
    );
    let prices = op.run(&["fleet", "prices", "-o", "json"]).json();
    assert_eq!(prices["regions"]["eu-north-1"]["cpuHour"], north_cpu_hour);

    let summary = api.get("/fleet/meta/summary").await.expect(200);
    assert_eq!(summary["hourlyCost"]["currency"], "EUR");
    assert!(
        close(&summary["hourlyCost"]["hourly"], doubled + b1 + g1),
        "{summary}"
    );
    let metrics = stack.scrape().await;
    let tenant = stack.tenant("acme");
    let gauge = format!(
        r#"connectsoft_factory_runtime_hourly_cost{{tenant="{tenant}",project="blog"}} {g1}"#
    );
    assert!(metrics.contains(&gauge), "{gauge} in {metrics}");

    // The environment's inventory carries its cost; the console shows it there, in the
    // environments list, and the fleet's above it.
    let inventory = api
        .get("/factory/environments/a1/inventory")
        .await
        .expect(200);
    assert_eq!(inventory["cost"]["hourly"], a1_now, "{inventory}");
    let token = crate::cli::operator_token(&stack);
    crate::console::scenario(
        "costs",
        &stack.base_url,
        &[
            ("RC_TOKEN", &token),
            ("RC_ENV", "a1"),
            ("RC_ENV_COST", &format!("{a1_now} EUR an hour")),
            (
                "RC_FLEET_COST",
                &format!("{} EUR an hour", summary["hourlyCost"]["hourly"]),
            ),
        ],
    )
    .await;
}

/// A policy that denies a rise of more than half the hourly cost.
const BUDGET: &str = r#"package runtime_cloud

deny contains msg if {
	input.plan.cost.deltaPercent > 50
	msg := sprintf("the plan raises the hourly cost by %v %% (%v to %v %s): at most 50 %%", [input.plan.cost.deltaPercent, input.plan.cost.beforeHourly, input.plan.cost.afterHourly, input.plan.cost.currency])
}
"#;

/// Every plan carries its cost estimate (before and after, at the tenant's prices) on the run;
/// a plan doubling replicas shows its delta, and a policy denying rises over 50 % refuses it
/// with the estimate as the evidence, while a smaller rise applies.
#[tokio::test]
async fn a_plan_shows_its_cost_delta_and_a_budget_policy_refuses_a_doubling() {
    let dir = tempfile::tempdir().expect("policy dir");
    std::fs::write(dir.path().join("budget.rego"), BUDGET).expect("policy");
    let mut opts =
        StackOptions::with_env("RUNTIME_CLOUD_POLICY_DIR", dir.path().display().to_string());
    opts.env
        .push(("RUNTIME_CLOUD_KUBERNETES_WATCH".into(), "false".into()));
    let stack = Stack::with(opts).await;
    let cluster = KubeStandIn::start().await;
    cluster.create(
        "shop",
        deployment("api", 3, &[Some(("500m", "512Mi"))]),
        FIELD_MANAGER,
    );
    let (_dir, kubeconfig) = crate::kubernetes::kubeconfig(&cluster);
    let api = stack.operator("acme");
    let declare = |replicas: u32| {
        vec![
            json!({ "name": "api", "kind": "deployment", "version": "1.0.0",
                     "replicas": replicas, "configRefs": {}, "secretRefs": {} }),
        ]
    };
    crate::kubernetes::observe_namespace(&api, "k1", &kubeconfig, "shop", declare(3)).await;
    api.observe(&stack, "k1").await;
    // Without prices, a plan has no estimate.
    let id = api.plan_run("k1", "baseline").await;
    let run = api.wait_state(&id, "Applied").await;
    assert_eq!(run["planReceipt"]["cost"], Value::Null, "{run}");

    api.put(
        "/factory/prices",
        json!({ "currency": "EUR", "cpuHour": 0.04, "memoryGbHour": 0.005 }),
    )
    .await
    .expect(200);
    let now = expected(&[(3.0, &[(0.5, 512.0 * 1_048_576.0)])], 0.04, 0.005);
    let declare_replicas = |replicas: u32| {
        let api = &api;
        let workloads = declare(replicas);
        async move {
            api.post(
                "/factory/provisioning/specifications",
                json!({ "environmentId": "k1", "kind": "environment", "programRef": "git://infra//shop",
                        "programVersion": "a1b2c3d4e5", "configRefs": {}, "secretRefs": {},
                        "workloads": workloads }),
            )
            .await
            .expect(201);
        }
    };

    // Doubling: +100 %, denied, the estimate on the run as the evidence.
    declare_replicas(6).await;
    let id = api.plan_run("k1", "baseline").await;
    let run = api.wait_state(&id, "Rejected").await;
    let cost = &run["planReceipt"]["cost"];
    assert!(close(&cost["beforeHourly"], now), "{run}");
    assert!(close(&cost["afterHourly"], 2.0 * now), "{run}");
    assert_eq!(cost["deltaPercent"], 100.0, "{run}");
    assert_eq!(cost["currency"], "EUR");
    assert!(
        text(&run["reason"])
            .starts_with("denied by policy: the plan raises the hourly cost by 100"),
        "{run}"
    );
    assert!(run["applyReceipt"].is_null(), "nothing applied: {run}");
    // The CLI shows it with the plan.
    let op = crate::cli::cli(&stack, Some(crate::cli::operator_token(&stack)));
    let shown = op.run(&["runs", "get", &id]);
    assert!(
        shown.expect(0).contains(&format!(
            "cost an hour: {now} -> {} EUR (100.0 %)",
            2.0 * now
        )),
        "{}",
        shown.expect(0)
    );

    // A third more: within budget, applied.
    declare_replicas(4).await;
    let id = api.plan_run("k1", "baseline").await;
    let run = api.wait_state(&id, "Applied").await;
    assert_eq!(
        run["planReceipt"]["cost"]["deltaPercent"], 33.333333,
        "{run}"
    );
}
