//! The Kubernetes observer against the stand-in API server (`tests/common/kube_stand_in.rs`):
//! workloads read with one list per kind, bindings by reference, never a Secret; an
//! unauthorized or forbidden cluster leaves the environment stale without findings.

use crate::common::kube_stand_in::KubeStandIn;
use crate::common::{Api, Stack, StackOptions, text};
use serde_json::{Value, json};

/// A Deployment as `kubectl get -o json` shows one that rolled out: `ready` of `replicas`
/// ready, its pod template naming a ConfigMap key, a Secret key and a Secret volume.
fn deployment(name: &str, image: &str, replicas: i64, ready: i64) -> Value {
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
    cluster.put(
        "shop",
        deployment("api", "registry.example.com:5000/shop/api:1.4.2", 2, 2),
    );
    cluster.put(
        "shop",
        deployment("batch", "registry.example.com/shop/batch@sha256:0f1e", 1, 1),
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
    let stack = Stack::with(StackOptions::proposals_wait_for_a_decision()).await;
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
    let stack = Stack::with(StackOptions::proposals_wait_for_a_decision()).await;
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
    let stack = Stack::with(StackOptions {
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
    })
    .await;
    let (cluster, api, _kubeconfig) = observed_cluster(&stack).await;
    cluster.delay(std::time::Duration::from_millis(300));
    let outcome = api.observe(&stack, "k8s").await;
    assert_eq!(outcome["stale"], false, "{outcome}");
    assert_eq!(cluster.requests().len(), 5);
    let most = cluster.max_in_flight();
    assert!((1..=2).contains(&most), "at most 2 at once, saw {most}");
}
