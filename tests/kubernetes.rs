//! The Kubernetes observer against the stand-in API server (`tests/common/kube_stand_in.rs`):
//! workloads read with one list per kind, bindings by reference, never a Secret; an
//! unauthorized or forbidden cluster leaves the environment stale without findings; each
//! drift kind names who made it (`managedFields`); a drift rule suppresses the autoscaler's
//! replica drift until it expires.

use crate::common::kube_stand_in::KubeStandIn;
use crate::common::{Api, Stack, StackOptions, text};
use runtime_cloud_models::observation::FIELD_MANAGER;
use serde_json::{Value, json};

/// `opts`, with each observation asked for (`POST …/observe`): what these tests count and
/// compare. The watches, which observe on a change by themselves, are
/// `tests/kubernetes_watch.rs`'s.
fn unwatched(mut opts: StackOptions) -> StackOptions {
    opts.env
        .push(("RUNTIME_CLOUD_KUBERNETES_WATCH".into(), "false".into()));
    opts
}

/// A Deployment as `kubectl get -o json` shows one that rolled out: `ready` of `replicas`
/// ready, its pod template naming a ConfigMap key, a Secret key and a Secret volume.
pub(crate) fn deployment(name: &str, image: &str, replicas: i64, ready: i64) -> Value {
    json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": { "name": name, "generation": 3, "labels": { "app": name },
                      "uid": format!("{name}-uid"), "creationTimestamp": "2026-11-30T09:00:00Z" },
        "spec": {
            "replicas": replicas,
            "selector": { "matchLabels": { "app": name } },
            "template": {
                "metadata": { "labels": { "app": name } },
                "spec": {
                    "containers": [{
                        "name": name, "image": image,
                        "env": [
                            { "name": "LOG_LEVEL", "valueFrom": { "configMapKeyRef": { "name": "shop-config", "key": "log-level" } } },
                            { "name": "DB_PASSWORD", "valueFrom": { "secretKeyRef": { "name": "db-credentials", "key": "password" } } }
                        ]
                    }],
                    "volumes": [{ "name": "tls", "secret": { "secretName": "api-tls" } }]
                }
            }
        },
        "status": {
            "observedGeneration": 3, "replicas": replicas, "updatedReplicas": replicas,
            "readyReplicas": ready, "availableReplicas": ready,
            "conditions": [
                { "type": "Available", "status": if ready == replicas { "True" } else { "False" },
                  "reason": "MinimumReplicasAvailable" },
                { "type": "Progressing", "status": "True", "reason": "NewReplicaSetAvailable" }
            ]
        }
    })
}

/// The stand-in cluster with `api` (declared) and `batch` (not declared) in namespace `shop`,
/// a Service and an Ingress in front of `api`; and an environment `k8s` observing it.
async fn observed_cluster(stack: &Stack) -> (KubeStandIn, Api, tempfile::TempDir) {
    let cluster = KubeStandIn::start().await;
    // `api` was deployed by the product; `batch` by hand.
    cluster.create(
        "shop",
        deployment("api", "registry.example.com:5000/shop/api:1.4.2", 2, 2),
        FIELD_MANAGER,
    );
    cluster.create(
        "shop",
        deployment("batch", "registry.example.com/shop/batch@sha256:0f1e", 1, 1),
        "kubectl-create",
    );
    cluster.put(
        "shop",
        json!({ "apiVersion": "v1", "kind": "Service", "metadata": { "name": "api" },
                "spec": { "selector": { "app": "api" }, "ports": [{ "port": 80, "targetPort": 8080 }] } }),
    );
    cluster.put(
        "shop",
        json!({ "apiVersion": "networking.k8s.io/v1", "kind": "Ingress", "metadata": { "name": "shop" },
                "spec": { "tls": [{ "hosts": ["shop.example.com"] }],
                          "rules": [{ "host": "shop.example.com", "http": { "paths": [
                              { "path": "/api", "pathType": "Prefix",
                                "backend": { "service": { "name": "api", "port": { "number": 80 } } } }] } }] } }),
    );
    let dir = tempfile::tempdir().expect("kubeconfig dir");
    let kubeconfig = dir.path().join("kubeconfig");
    std::fs::write(&kubeconfig, cluster.kubeconfig()).expect("kubeconfig");
    let api = stack.operator("acme");
    api.post(
        "/factory/environments",
        json!({ "environmentId": "k8s", "projectId": "shop", "class": "non-production",
                "target": { "observer": { "kind": "kubernetes",
                                          "kubeconfigRef": format!("file://{}", kubeconfig.display()),
                                          "context": "stand-in", "namespace": "shop" } } }),
    )
    .await
    .expect(201);
    api.post(
        "/factory/provisioning/specifications",
        json!({ "environmentId": "k8s", "kind": "environment", "programRef": "git://infra//shop",
                "programVersion": "a1b2c3d4e5", "configRefs": {}, "secretRefs": {},
                "workloads": [{ "name": "api", "kind": "deployment", "version": "1.4.2", "replicas": 2,
                                "configRefs": { "LOG_LEVEL": "configmap://shop-config#log-level" },
                                "secretRefs": { "DB_PASSWORD": "secret://db-credentials#password",
                                                "volume:tls": "secret://api-tls" } }] }),
    )
    .await
    .expect(201);
    (cluster, api, dir)
}

/// The observer reads the namespace with one list per kind, maps each workload (version from
/// the image tag or digest, replicas, endpoints from the Service and the Ingress, bindings by
/// reference, health) and raises only the undeclared workload; it never asks for a Secret.
#[tokio::test]
async fn a_namespace_is_observed_with_one_list_per_kind_and_never_a_secret() {
    let stack = Stack::with(unwatched(StackOptions::proposals_wait_for_a_decision())).await;
    let (cluster, api, _kubeconfig) = observed_cluster(&stack).await;
    let outcome = api.observe(&stack, "k8s").await;
    assert_eq!(outcome["stale"], false, "{outcome}");
    let inventory = api
        .get("/factory/environments/k8s/inventory")
        .await
        .expect(200);
    let workloads = inventory["workloads"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert_eq!(workloads.len(), 2, "{inventory}");
    let api_workload = &workloads[0];
    assert_eq!(api_workload["name"], "api");
    assert_eq!(api_workload["kind"], "deployment");
    assert_eq!(
        api_workload["version"], "1.4.2",
        "the tag, not the registry's port"
    );
    assert_eq!(api_workload["replicasReady"], 2);
    assert_eq!(api_workload["health"], "healthy");
    assert_eq!(
        api_workload["endpoints"],
        json!(["api.shop.svc:80", "https://shop.example.com/api"])
    );
    assert_eq!(
        api_workload["secretRefs"],
        json!({ "DB_PASSWORD": "secret://db-credentials#password", "volume:tls": "secret://api-tls" })
    );
    assert_eq!(
        workloads[1]["version"], "sha256:0f1e",
        "a digest when the image has one"
    );

    let drift = api.drift("k8s", Some("open")).await;
    assert_eq!(drift.len(), 1, "only the undeclared workload: {drift:?}");
    assert_eq!(drift[0]["kind"], "unmanaged");
    assert_eq!(drift[0]["resource"], "deployment/batch");
    // Its proposal offers the manifest that would manage it, as observed.
    let proposal = &api.proposals("k8s").await[0];
    let generated = &proposal["generated"][0];
    assert_eq!(generated["workload"], "batch", "{proposal}");
    assert_eq!(generated["format"], "kubernetes");
    let manifest = &generated["manifest"];
    assert_eq!(
        (
            &manifest["apiVersion"],
            &manifest["kind"],
            &manifest["metadata"]["namespace"]
        ),
        (&json!("apps/v1"), &json!("Deployment"), &json!("shop")),
        "{manifest}"
    );
    assert_eq!(manifest["spec"]["replicas"], 1);
    assert_eq!(
        manifest["spec"]["template"]["spec"]["containers"][0]["image"],
        "registry.example.com/shop/batch@sha256:0f1e"
    );

    let requests = cluster.requests();
    assert_eq!(requests.len(), 5, "one list per kind: {requests:?}");
    assert!(
        requests.iter().all(|r| !r.contains("/secrets")),
        "the observer never reads a Secret: {requests:?}"
    );
}

/// A cluster that refuses the observer (401, then 403) leaves the environment stale with the
/// reason, keeps the last good observation and raises nothing.
#[tokio::test]
async fn an_unauthorized_or_forbidden_cluster_is_stale_without_findings() {
    let stack = Stack::with(unwatched(StackOptions::proposals_wait_for_a_decision())).await;
    let (cluster, api, _kubeconfig) = observed_cluster(&stack).await;
    api.observe(&stack, "k8s").await;
    let before = api.drift("k8s", None).await.len();
    // Someone scales `api` while the observer is locked out: nothing may be raised for it.
    let mut scaled = cluster.get("shop", "deployments", "api");
    scaled["spec"]["replicas"] = json!(5);
    cluster.put("shop", scaled);
    for (code, says) in [(401, "Unauthorized"), (403, "forbidden")] {
        cluster.refuse(Some(code));
        let outcome = api.observe(&stack, "k8s").await;
        assert_eq!(outcome["stale"], true, "{code}: {outcome}");
        assert_eq!(outcome["newFindings"], 0, "{code}: {outcome}");
        let inventory = api
            .get("/factory/environments/k8s/inventory")
            .await
            .expect(200);
        assert_eq!(inventory["stale"], true);
        let reason = text(&inventory["lastError"]);
        assert!(reason.contains(says), "{code}: {reason}");
        assert_eq!(
            inventory["workloads"].as_array().map(Vec::len),
            Some(2),
            "the last good observation is kept"
        );
    }
    assert_eq!(api.drift("k8s", None).await.len(), before);
    // Let in again, the scale is seen.
    cluster.refuse(None);
    let outcome = api.observe(&stack, "k8s").await;
    assert_eq!(outcome["stale"], false, "{outcome}");
    let replica = api
        .drift("k8s", Some("open"))
        .await
        .into_iter()
        .find(|f| f["kind"] == "replica");
    assert!(
        replica.is_some(),
        "the scale is found once the cluster answers"
    );
}

/// The list calls of one worker to one cluster are bounded
/// (`RUNTIME_CLOUD_KUBERNETES_CALLS_PER_CLUSTER`): an observation's five lists, each slow,
/// never have more than the bound in flight at the API server.
#[tokio::test]
async fn list_calls_in_flight_per_cluster_are_bounded() {
    let stack = Stack::with(unwatched(StackOptions {
        env: vec![
            (
                "RUNTIME_CLOUD_KUBERNETES_CALLS_PER_CLUSTER".into(),
                "2".into(),
            ),
            (
                "RuntimeCloud__Inventory__AutoAcceptNonDestructiveOutsideProduction".into(),
                "false".into(),
            ),
        ],
        ..Default::default()
    }))
    .await;
    let (cluster, api, _kubeconfig) = observed_cluster(&stack).await;
    cluster.delay(std::time::Duration::from_millis(300));
    let outcome = api.observe(&stack, "k8s").await;
    assert_eq!(outcome["stale"], false, "{outcome}");
    assert_eq!(cluster.requests().len(), 5);
    let most = cluster.max_in_flight();
    assert!((1..=2).contains(&most), "at most 2 at once, saw {most}");
}

/// `kubectl scale deployment/<name> --replicas=<n>` as `manager` (`kubectl`; an HPA's write
/// is `kube-controller-manager`'s), through the `scale` subresource, in namespace `shop`; the
/// controller's status follows.
pub(crate) fn scale(cluster: &KubeStandIn, name: &str, replicas: i64, manager: &str) {
    cluster.update(
        "shop",
        "deployments",
        name,
        (manager, Some("scale")),
        json!({ "f:spec": { "f:replicas": {} } }),
        |d| {
            d["spec"]["replicas"] = json!(replicas);
            for field in [
                "replicas",
                "updatedReplicas",
                "readyReplicas",
                "availableReplicas",
            ] {
                d["status"][field] = json!(replicas);
            }
        },
    );
}

/// What people with cluster access do to namespace `shop`, each a kind of drift:
/// `kubectl set image` of `api` (to 1.1.0), `kubectl scale` of `web` (to 5), `kubectl edit`
/// of `worker`'s `LOG_LEVEL` (another ConfigMap key) and of `billing`'s `DB_PASSWORD` (another
/// Secret), and `kubectl delete` of `cron`.
pub(crate) fn change_by_hand(cluster: &KubeStandIn) {
    cluster.update(
        "shop",
        "deployments",
        "api",
        ("kubectl-set", None),
        container_field("api", "image"),
        |d| container(d)["image"] = json!("registry.example.com/shop/api:1.1.0"),
    );
    scale(cluster, "web", 5, "kubectl");
    cluster.update(
        "shop",
        "deployments",
        "worker",
        ("kubectl-edit", None),
        container_field("worker", "env"),
        |d| container(d)["env"][0]["valueFrom"]["configMapKeyRef"]["key"] = json!("debug-level"),
    );
    cluster.update(
        "shop",
        "deployments",
        "billing",
        ("kubectl-edit", None),
        container_field("billing", "env"),
        |d| {
            container(d)["env"][1]["valueFrom"]["secretKeyRef"]["name"] =
                json!("db-credentials-old")
        },
    );
    cluster.delete("shop", "deployments", "cron");
}

/// The first container of a workload's pod template.
fn container(d: &mut Value) -> &mut Value {
    &mut d["spec"]["template"]["spec"]["containers"][0]
}

/// `kubeconfig` for the stand-in cluster, in a directory the caller keeps.
pub(crate) fn kubeconfig(cluster: &KubeStandIn) -> (tempfile::TempDir, String) {
    let dir = tempfile::tempdir().expect("kubeconfig dir");
    let path = dir.path().join("kubeconfig");
    std::fs::write(&path, cluster.kubeconfig()).expect("kubeconfig");
    let reference = format!("file://{}", path.display());
    (dir, reference)
}

/// Registers environment `env` of project `shop` observing `namespace` of the cluster at
/// `kubeconfig` (a `file://` reference), and declares `workloads` for it.
pub(crate) async fn observe_namespace(
    api: &Api,
    env: &str,
    kubeconfig: &str,
    namespace: &str,
    workloads: Vec<Value>,
) {
    api.post(
        "/factory/environments",
        json!({ "environmentId": env, "projectId": "shop", "class": "non-production",
                "target": { "observer": { "kind": "kubernetes", "kubeconfigRef": kubeconfig,
                                          "namespace": namespace } } }),
    )
    .await
    .expect(201);
    api.post(
        "/factory/provisioning/specifications",
        json!({ "environmentId": env, "kind": "environment", "programRef": "git://infra//shop",
                "programVersion": "a1b2c3d4e5", "configRefs": {}, "secretRefs": {},
                "workloads": workloads }),
    )
    .await
    .expect(201);
}

/// Registers environment `k8s` of project `shop`, of `class`: run by the Pulumi stack
/// `acme/shop/k8s` on the state backend in `state`, observed in namespace `shop` of the cluster
/// at `kubeconfig` (a `file://` reference).
pub(crate) async fn register_pulumi_run(
    api: &Api,
    class: &str,
    state: &std::path::Path,
    kubeconfig: &str,
) {
    api.post(
        "/factory/environments",
        json!({ "environmentId": "k8s", "projectId": "shop", "class": class,
                "target": {
                    "runner": { "kind": "pulumi", "stack": "acme/shop/k8s",
                                "backendUrl": format!("file://{}", state.display()) },
                    "observer": { "kind": "kubernetes", "kubeconfigRef": kubeconfig,
                                  "namespace": "shop" } } }),
    )
    .await
    .expect(201);
}

/// The declared form of a workload made by [`deployment`].
pub(crate) fn declared(name: &str, version: &str, replicas: u32) -> Value {
    json!({ "name": name, "kind": "deployment", "version": version, "replicas": replicas,
            "configRefs": { "LOG_LEVEL": "configmap://shop-config#log-level" },
            "secretRefs": { "DB_PASSWORD": "secret://db-credentials#password",
                            "volume:tls": "secret://api-tls" } })
}

/// The `fieldsV1` of a write to container `name`'s field `field`.
pub(crate) fn container_field(name: &str, field: &str) -> Value {
    let key = format!("k:{}", json!({ "name": name }));
    json!({ "f:spec": { "f:template": { "f:spec": { "f:containers": { key: { format!("f:{field}"): {} } } } } } })
}

/// What people and controllers with cluster access do, each recorded in `managedFields` as the
/// API server records it — and every kind of drift is found naming who made it: `kubectl set
/// image` (version), `kubectl scale` (replicas, through the scale subresource), `kubectl edit`
/// of an env var (configuration) and of a secret reference (secret binding), a rollout stuck
/// past its deadline (replicas not ready: the controller's status), `kubectl create` of an
/// undeclared Deployment (unmanaged) and `kubectl delete` (missing: the object is gone, so no
/// one is named). The proposal's plan summary names them too, as does `RuntimeDriftDetected`.
#[tokio::test]
async fn every_drift_kind_names_who_made_it() {
    let stack = Stack::with(unwatched(StackOptions::proposals_wait_for_a_decision())).await;
    let cluster = KubeStandIn::start().await;
    let names = ["api", "web", "worker", "billing", "payments", "cron"];
    for name in names {
        let image = format!("registry.example.com/shop/{name}:1.0.0");
        cluster.create("shop", deployment(name, &image, 2, 2), FIELD_MANAGER);
    }
    let (_dir, kubeconfig) = kubeconfig(&cluster);
    let api = stack.operator("acme");
    let workloads: Vec<Value> = names.iter().map(|n| declared(n, "1.0.0", 2)).collect();
    observe_namespace(&api, "k8s", &kubeconfig, "shop", workloads).await;
    let first = api.observe(&stack, "k8s").await;
    assert_eq!(first["newFindings"], 0, "as declared: {first}");

    change_by_hand(&cluster);
    // The controller reports payments' rollout stuck past its deadline, 1 of 2 ready.
    cluster.update(
        "shop",
        "deployments",
        "payments",
        ("kube-controller-manager", Some("status")),
        json!({ "f:status": { "f:readyReplicas": {}, "f:conditions": {} } }),
        |d| {
            d["status"]["readyReplicas"] = json!(1);
            d["status"]["availableReplicas"] = json!(1);
            d["status"]["conditions"][1] = json!({ "type": "Progressing", "status": "False",
                                                   "reason": "ProgressDeadlineExceeded" });
        },
    );
    // kubectl create deployment debug …
    cluster.create(
        "shop",
        deployment("debug", "busybox:1.36", 1, 1),
        "kubectl-create",
    );

    let outcome = api.observe(&stack, "k8s").await;
    assert_eq!(outcome["newFindings"], 7, "{outcome}");
    let drift = api.drift("k8s", Some("open")).await;
    let by = |kind: &str, resource: &str| -> Value {
        let f = drift
            .iter()
            .find(|f| f["kind"] == kind && f["resource"] == resource)
            .unwrap_or_else(|| panic!("no {kind} finding of {resource}: {drift:?}"));
        f["changedBy"].clone()
    };
    let version = by("version", "deployment/api");
    assert_eq!(
        (
            &version["manager"],
            &version["operation"],
            &version["field"]
        ),
        (
            &json!("kubectl-set"),
            &json!("Update"),
            &json!("spec.template.spec.containers[api].image")
        )
    );
    assert!(version["time"].is_string(), "{version}");
    let scaled = by("replica", "deployment/web");
    assert_eq!(
        (&scaled["manager"], &scaled["subresource"], &scaled["field"]),
        (&json!("kubectl"), &json!("scale"), &json!("spec.replicas"))
    );
    assert_eq!(
        by("configuration", "deployment/worker")["manager"],
        "kubectl-edit"
    );
    let secret = by("secret-binding", "deployment/billing");
    assert_eq!(
        (&secret["manager"], &secret["field"]),
        (
            &json!("kubectl-edit"),
            &json!("spec.template.spec.containers[billing].env")
        )
    );
    let stuck = by("replica", "deployment/payments");
    assert_eq!(
        (&stuck["manager"], &stuck["subresource"]),
        (&json!("kube-controller-manager"), &json!("status"))
    );
    assert_eq!(
        by("unmanaged", "deployment/debug")["manager"],
        "kubectl-create"
    );
    assert_eq!(
        by("missing", "deployment/cron"),
        Value::Null,
        "the object is gone"
    );
    let inventory = api
        .get("/factory/environments/k8s/inventory")
        .await
        .expect(200);
    let payments = inventory["workloads"]
        .as_array()
        .and_then(|w| w.iter().find(|w| w["name"] == "payments"))
        .cloned()
        .unwrap_or_default();
    assert_eq!(payments["health"], "degraded", "{payments}");
    // What the product applied itself stays recognisable as its own.
    assert_eq!(payments["changedBy"]["version"]["manager"], FIELD_MANAGER);

    // The proposal (destructive: it would delete `debug`) names who made each difference.
    let proposals = api.proposals("k8s").await;
    let summary = &proposals[0]["planSummary"];
    let managers: Vec<&str> = summary["changedBy"]
        .as_array()
        .map(|a| a.iter().filter_map(|c| c["manager"].as_str()).collect())
        .unwrap_or_default();
    for m in [
        "kubectl-set",
        "kubectl",
        "kubectl-edit",
        "kube-controller-manager",
        "kubectl-create",
    ] {
        assert!(managers.contains(&m), "{m} in {summary}");
    }
    let events = stack.events("RuntimeDriftDetected").await;
    let set_image = events
        .iter()
        .find(|e| e["payload"]["resource"] == "deployment/api")
        .unwrap_or_else(|| panic!("no event for api: {events:?}"));
    assert_eq!(set_image["payload"]["changedBy"]["manager"], "kubectl-set");
    assert!(
        cluster.requests().iter().all(|r| !r.contains("/secrets")),
        "never a Secret"
    );
}

/// A rule for replica drift made by the autoscaler (`kube-controller-manager` through the
/// scale subresource, as an HPA's write is recorded) suppresses it: listed as suppressed,
/// counted apart in the metrics, not proposed. An observation of unchanged objects changes
/// nothing; once the rule has expired, the next observation reopens the same finding.
#[tokio::test]
async fn a_rule_suppresses_the_autoscalers_replica_drift_until_it_expires() {
    let stack = Stack::with(unwatched(StackOptions::proposals_wait_for_a_decision())).await;
    let (cluster, api, _kubeconfig) = observed_cluster(&stack).await;
    // Without a manager, a field or a future expiry, a rule is refused.
    let bad = api
        .post(
            "/factory/environments/k8s/drift-rules",
            json!({ "kind": "replica", "workload": "", "owner": "", "reason": "autoscaled",
                    "expiresAt": "2020-01-01T00:00:00Z" }),
        )
        .await
        .expect_problem(422);
    assert!(text(&bad["detail"]).contains("workload"), "{bad}");
    // Long enough for the observations below on a loaded machine (4 s was not: the rule had
    // expired before the first observation read it).
    let expires_at = chrono::Utc::now() + chrono::Duration::seconds(15);
    let rule = api
        .post(
            "/factory/environments/k8s/drift-rules",
            json!({ "kind": "replica", "workload": "*", "field": "spec.replicas",
                    "manager": "kube-controller-manager", "owner": "team-shop",
                    "reason": "the HPA scales api", "expiresAt": expires_at }),
        )
        .await
        .expect(201);
    let rule_id = text(&rule["ruleId"]);
    let rules = api
        .get("/factory/environments/k8s/drift-rules")
        .await
        .expect(200);
    assert_eq!(rules["items"][0]["ruleId"], rule_id.as_str());

    // The HPA scales api to 4.
    scale(&cluster, "api", 4, "kube-controller-manager");
    let outcome = api.observe(&stack, "k8s").await;
    assert_eq!(
        outcome["newFindings"], 2,
        "unmanaged batch and the replica: {outcome}"
    );
    let suppressed = api.drift("k8s", Some("suppressed")).await;
    assert_eq!(suppressed.len(), 1, "{suppressed:?}");
    assert_eq!(suppressed[0]["kind"], "replica");
    assert_eq!(suppressed[0]["suppressedBy"], rule_id.as_str());
    assert_eq!(suppressed[0]["changedBy"]["subresource"], "scale");
    let open = api.drift("k8s", Some("open")).await;
    assert_eq!(open.len(), 1, "only batch is open: {open:?}");
    assert_eq!(open[0]["kind"], "unmanaged");
    let proposal = &api.proposals("k8s").await[0];
    assert_eq!(
        proposal["findingIds"].as_array().map(Vec::len),
        Some(1),
        "a suppressed finding is never proposed: {proposal}"
    );
    let metrics = stack.scrape().await;
    let tenant = stack.tenant("acme");
    let gauge = |name: &str| {
        format!(r#"connectsoft_factory_runtime_{name}{{tenant="{tenant}",kind="replica"}}"#)
    };
    assert!(
        metrics.contains(&format!("{} 1", gauge("drift_suppressed"))),
        "{metrics}"
    );
    assert!(!metrics.contains(&gauge("drift_open")), "{metrics}");
    let announced = |events: &[Value]| {
        events
            .iter()
            .filter(|e| e["payload"]["kind"] == "replica")
            .count()
    };
    assert_eq!(announced(&stack.events("RuntimeDriftDetected").await), 0);

    // Nothing changed in the cluster: nothing changes here.
    let again = api.observe(&stack, "k8s").await;
    assert_eq!(
        (
            &again["changed"],
            &again["newFindings"],
            &again["resolvedFindings"]
        ),
        (&json!(false), &json!(0), &json!(0)),
        "{again}"
    );

    // The rule expires (the clock passes its expiry; nothing else is awaited).
    let left = (expires_at - chrono::Utc::now())
        .to_std()
        .unwrap_or_default();
    tokio::time::sleep(left + std::time::Duration::from_millis(50)).await;
    api.observe(&stack, "k8s").await;
    let open = api.drift("k8s", Some("open")).await;
    let reopened = open
        .iter()
        .find(|f| f["kind"] == "replica")
        .unwrap_or_else(|| panic!("the replica finding reopens: {open:?}"));
    assert_eq!(
        reopened["findingId"], suppressed[0]["findingId"],
        "the same finding"
    );
    assert_eq!(reopened["suppressedBy"], Value::Null);
    assert!(api.drift("k8s", Some("suppressed")).await.is_empty());
    assert_eq!(announced(&stack.events("RuntimeDriftDetected").await), 1);
    let proposal = &api.proposals("k8s").await[0];
    assert_eq!(
        proposal["findingIds"].as_array().map(Vec::len),
        Some(2),
        "proposed now: {proposal}"
    );
    // Rules are the environment's own: another tenant's operator cannot remove it.
    let other = stack.operator("globex");
    other
        .send(
            reqwest::Method::DELETE,
            &format!("/factory/environments/k8s/drift-rules/{rule_id}"),
            None,
            &[],
        )
        .await
        .expect_problem(404);
    api.send(
        reqwest::Method::DELETE,
        &format!("/factory/environments/k8s/drift-rules/{rule_id}"),
        None,
        &[],
    )
    .await
    .expect(204);
}

/// Outside production, with auto-accept on, a non-destructive proposal is accepted on its own
/// — unless a policy says otherwise: the default bundle keeps the autoscaler's replica drift
/// for an operator (reverting it would fight the autoscaler), and the decision is on the
/// proposal.
#[tokio::test]
async fn the_autoscalers_replica_drift_is_not_reverted_without_an_operator() {
    let stack = Stack::with(unwatched(StackOptions::default())).await;
    let (cluster, api, _kubeconfig) = observed_cluster(&stack).await;
    cluster.delete("shop", "deployments", "batch");
    scale(&cluster, "api", 4, "kube-controller-manager");
    let outcome = api.observe(&stack, "k8s").await;
    let id = text(&outcome["newProposal"]["proposalId"]);
    assert_eq!(outcome["newProposal"]["autoAccept"], false, "{outcome}");
    let proposal = api.wait_proposal("k8s", &id, "Proposed").await;
    assert_eq!(proposal["policy"]["allow"], false, "{proposal}");
    assert_eq!(
        proposal["policy"]["deny"][0],
        "deployment/api was scaled by the autoscaler: not reverted without an operator"
    );
}
