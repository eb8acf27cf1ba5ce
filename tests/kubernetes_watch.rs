//! Watched clusters: a change on the cluster stand-in (`tests/common/kube_stand_in.rs`) is
//! found without `POST …/observe` and with the sweep's schedule paused (as every stack here
//! has it), a burst of changes is one observation, and the stand-in's watch speaks the
//! protocol of the captured watch output in `tests/fixtures/kubernetes/watch/`. The embedded
//! sandbox's out-of-band change is found as quickly.

use crate::common::kube_stand_in::{KubeStandIn, TOKEN};
use crate::common::{Api, Stack, StackOptions, eventually};
use crate::kubernetes::{declared, deployment, kubeconfig, observe_namespace};
use runtime_cloud_models::observation::FIELD_MANAGER;
use serde_json::{Value, json};
use std::collections::BTreeSet;

/// The kinds a watched cluster is watched for, one watch each (and the NetworkPolicies while
/// posture is read, which the stacks here do not unless a test says so).
const KINDS: usize = 5;

/// A captured watch stream, one event per line.
fn captured(file: &str) -> Vec<Value> {
    let path = format!(
        "{}/tests/fixtures/kubernetes/watch/{file}",
        env!("CARGO_MANIFEST_DIR")
    );
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    text.lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{path}: {e}")))
        .collect()
}

fn keys(v: &Value) -> BTreeSet<String> {
    v.as_object()
        .map(|o| o.keys().cloned().collect())
        .unwrap_or_default()
}

/// Reads a watch's lines until `until` says it has seen enough.
async fn watch_lines(
    cluster: &KubeStandIn,
    query: &str,
    until: impl Fn(&[Value]) -> bool,
) -> Vec<Value> {
    let url = format!(
        "{}/apis/apps/v1/deployments?watch=true&{query}",
        cluster.url()
    );
    let mut res = reqwest::Client::new()
        .get(url)
        .bearer_auth(TOKEN)
        .send()
        .await
        .expect("watch");
    assert_eq!(res.status(), 200);
    let mut lines = Vec::new();
    let mut buffer = Vec::new();
    while !until(&lines) {
        let chunk = tokio::time::timeout(std::time::Duration::from_secs(10), res.chunk())
            .await
            .expect("the watch answers within 10 s")
            .expect("chunk");
        let Some(chunk) = chunk else { break };
        buffer.extend_from_slice(&chunk);
        while let Some(end) = buffer.iter().position(|b| *b == b'\n') {
            let line: Vec<u8> = buffer.drain(..=end).collect();
            lines.push(serde_json::from_slice(&line).expect("one JSON object per line"));
        }
    }
    lines
}

/// The stand-in's watch answers as the captured API servers do: each line an object with
/// exactly `type` and `object`; added, modified and deleted objects whole, at rising versions;
/// a bookmark naming only its kind and version (with the type's empty spec and status); and a
/// version older than the kept history one `ERROR` event with the captured `410` `Status`.
#[tokio::test]
async fn the_stand_ins_watch_speaks_the_captured_protocol() {
    let real: Vec<Value> = [
        "pods-watch-v1.36.jsonl",
        "pods-watch-initial-events-v1.36.jsonl",
        "bookmark-initial-events-end-v1.32.jsonl",
        "expired-410.jsonl",
    ]
    .iter()
    .flat_map(|f| captured(f))
    .collect();
    let event_keys: BTreeSet<String> = ["type".to_owned(), "object".to_owned()].into();
    assert!(real.iter().all(|e| keys(e) == event_keys));
    let real_object = real
        .iter()
        .find(|e| e["type"] == "ADDED")
        .expect("an ADDED");
    let real_bookmark = real
        .iter()
        .find(|e| e["type"] == "BOOKMARK")
        .expect("a BOOKMARK");
    let real_gone = real
        .iter()
        .find(|e| e["type"] == "ERROR")
        .expect("an ERROR");

    let cluster = KubeStandIn::start().await;
    cluster.create(
        "shop",
        deployment("api", "shop/api:1.0.0", 2, 2),
        FIELD_MANAGER,
    );
    let from = cluster.get("shop", "deployments", "api")["metadata"]["resourceVersion"]
        .as_str()
        .expect("version")
        .to_owned();
    cluster.create(
        "shop",
        deployment("web", "shop/web:1.0.0", 1, 1),
        "kubectl-create",
    );
    crate::kubernetes::scale(&cluster, "web", 3, "kubectl");
    cluster.delete("shop", "deployments", "web");
    let lines = watch_lines(
        &cluster,
        &format!("resourceVersion={from}&allowWatchBookmarks=true&timeoutSeconds=5"),
        |l| l.iter().any(|e| e["type"] == "BOOKMARK"),
    )
    .await;
    let types: Vec<&str> = lines.iter().filter_map(|e| e["type"].as_str()).collect();
    assert_eq!(
        types,
        ["ADDED", "MODIFIED", "DELETED", "BOOKMARK"],
        "{lines:?}"
    );
    assert!(lines.iter().all(|e| keys(e) == event_keys), "{lines:?}");
    let versions: Vec<u64> = lines
        .iter()
        .map(|e| {
            e["object"]["metadata"]["resourceVersion"]
                .as_str()
                .unwrap()
                .parse()
                .unwrap()
        })
        .collect();
    // Each write at a new version; the bookmark at the latest one the watch has sent.
    assert!(
        versions[..3].windows(2).all(|w| w[0] < w[1]),
        "{versions:?}"
    );
    assert!(versions[3] >= versions[2], "{versions:?}");
    for e in &lines[..3] {
        assert_eq!(keys(&e["object"]), keys(&real_object["object"]), "{e}");
        assert_eq!(e["object"]["metadata"]["name"], "web");
        assert!(e["object"]["metadata"]["managedFields"].is_array(), "{e}");
    }
    assert_eq!(lines[1]["object"]["spec"]["replicas"], 3);
    let bookmark = &lines[3]["object"];
    assert_eq!(keys(bookmark), keys(&real_bookmark["object"]));
    assert_eq!(
        (&bookmark["kind"], &bookmark["apiVersion"]),
        (&json!("Deployment"), &json!("apps/v1"))
    );
    assert!(bookmark["metadata"]["name"].is_null());

    cluster.compact();
    let gone = watch_lines(&cluster, &format!("resourceVersion={from}"), |l| {
        !l.is_empty()
    })
    .await;
    assert_eq!(gone.len(), 1, "{gone:?}");
    assert_eq!(keys(&gone[0]["object"]), keys(&real_gone["object"]));
    assert_eq!(gone[0]["type"], real_gone["type"]);
    for field in ["kind", "apiVersion", "metadata", "status", "reason", "code"] {
        assert_eq!(
            gone[0]["object"][field], real_gone["object"][field],
            "{field}"
        );
    }
    let message = gone[0]["object"]["message"].as_str().unwrap_or_default();
    assert!(
        message.starts_with(&format!("too old resource version: {from} (")),
        "{message}"
    );
}

/// A stack whose workers watch the clusters (the default), the stand-in with `api` in
/// namespace `shop` as the product deployed it, and environment `k8s` observing it with `api`
/// declared; once the cluster's five watches are open.
async fn watched_cluster() -> (Stack, KubeStandIn, Api, tempfile::TempDir) {
    let opts = StackOptions::proposals_wait_for_a_decision();
    let (stack, cluster, api, dir) = cluster_with_environment(opts, |_| {}).await;
    wait_watching(&cluster, KINDS).await;
    (stack, cluster, api, dir)
}

/// Until the cluster's `kinds` watches are open.
async fn wait_watching(cluster: &KubeStandIn, kinds: usize) {
    eventually(60, "the cluster's watches to be open", || {
        let open = cluster.watching() == kinds;
        async move { open.then_some(()) }
    })
    .await;
}

/// [`watched_cluster`]'s stack (of `opts`), cluster and environment, `prepare` done to the
/// cluster before the environment names it.
async fn cluster_with_environment(
    opts: StackOptions,
    prepare: impl FnOnce(&KubeStandIn),
) -> (Stack, KubeStandIn, Api, tempfile::TempDir) {
    let stack = Stack::with(opts).await;
    let cluster = KubeStandIn::start().await;
    prepare(&cluster);
    cluster.create(
        "shop",
        deployment("api", "registry.example.com/shop/api:1.0.0", 2, 2),
        FIELD_MANAGER,
    );
    let (dir, kubeconfig) = kubeconfig(&cluster);
    let api = stack.operator("acme");
    observe_namespace(
        &api,
        "k8s",
        &kubeconfig,
        "shop",
        vec![declared("api", "1.0.0", 2)],
    )
    .await;
    (stack, cluster, api, dir)
}

/// A NetworkPolicy created in a watched namespace is observed within seconds, like any other
/// change: the namespace's `no-network-policy` finding resolves without `POST …/observe` (posture
/// is read, so the NetworkPolicies are watched too, and the sweep's trust in the watches covers
/// them).
#[tokio::test]
async fn a_network_policy_added_to_a_watched_namespace_resolves_its_finding_without_asking() {
    let mut opts = StackOptions::proposals_wait_for_a_decision();
    opts.posture_findings = true;
    let (stack, cluster, api, _dir) = cluster_with_environment(opts, |_| {}).await;
    wait_watching(&cluster, KINDS + 1).await;
    api.observe(&stack, "k8s").await;
    let unguarded = |open: &[Value]| open.iter().any(|f| f["rule"] == "no-network-policy");
    let open = api.drift("k8s", Some("open")).await;
    assert!(unguarded(&open), "{open:?}");
    cluster.put("shop", crate::posture::network_policy());
    eventually(30, "the no-network-policy finding to resolve", || async {
        let open = api.drift("k8s", Some("open")).await;
        (!unguarded(&open)).then_some(())
    })
    .await;
}

/// `kubectl edit` scaling `api` to 5.
fn edit_replicas(cluster: &KubeStandIn, replicas: i64) {
    cluster.update(
        "shop",
        "deployments",
        "api",
        ("kubectl-edit", None),
        json!({ "f:spec": { "f:replicas": {} } }),
        |d| d["spec"]["replicas"] = json!(replicas),
    );
}

/// The namespace's lists of Deployments: one per observation of the environment.
fn observations(cluster: &KubeStandIn) -> usize {
    cluster
        .requests()
        .iter()
        .filter(|r| r.starts_with("/apis/apps/v1/namespaces/shop/deployments?"))
        .count()
}

/// A scale by `kubectl edit` becomes an open replica finding naming who made it, and its
/// `RuntimeDriftDetected`, with no `POST …/observe` and the sweep's schedule paused; the
/// burst of a hundred edits before it is one observation.
#[tokio::test]
async fn a_burst_of_edits_on_the_cluster_is_found_in_one_observation_without_asking() {
    let (stack, cluster, api, _dir) = watched_cluster().await;
    assert_eq!(
        observations(&cluster),
        0,
        "nothing observed the environment yet"
    );
    for replicas in 3..=102 {
        edit_replicas(&cluster, replicas);
    }
    let finding = eventually(30, "the replica drift to be found", || {
        let api = &api;
        async move {
            let drift = api.drift("k8s", Some("open")).await;
            drift.into_iter().find(|f| f["kind"] == "replica")
        }
    })
    .await;
    assert_eq!(finding["resource"], "deployment/api");
    assert_eq!(finding["changedBy"]["manager"], "kubectl-edit", "{finding}");
    assert_eq!(finding["changedBy"]["field"], "spec.replicas", "{finding}");
    let detected = stack.events("RuntimeDriftDetected").await;
    assert_eq!(detected.len(), 1, "{detected:?}");
    // The watched observation ended: nothing more was told it.
    watched_observation_ended(&stack, &api).await;
    assert_eq!(observations(&cluster), 1, "{:?}", cluster.requests());

    // The next edit is found too, by the next watched observation.
    edit_replicas(&cluster, 2);
    eventually(30, "the drift to be resolved", || {
        let api = &api;
        async move {
            let open = api.drift("k8s", Some("open")).await;
            open.is_empty().then_some(())
        }
    })
    .await;
    assert_eq!(observations(&cluster), 2);
}

/// Until the replica drift of `api` is open, naming `kubectl-edit`.
async fn replica_drift_found(api: &Api) -> Value {
    let finding = eventually(30, "the replica drift to be found", || async {
        let drift = api.drift("k8s", Some("open")).await;
        drift.into_iter().find(|f| f["kind"] == "replica")
    })
    .await;
    assert_eq!(finding["changedBy"]["manager"], "kubectl-edit", "{finding}");
    finding
}

/// Killing the worker that holds the cluster's watch hands it to another worker (once the
/// activity's heartbeat is missed), and the next change is still found without asking.
#[tokio::test]
async fn a_killed_workers_watch_is_taken_over_and_the_next_change_found() {
    let (mut stack, cluster, api, _dir) = watched_cluster().await;
    stack.kill_worker();
    eventually(30, "the killed worker's watches to close", || {
        let closed = cluster.watching() == 0;
        async move { closed.then_some(()) }
    })
    .await;
    stack.start_worker();
    wait_watching(&cluster, KINDS).await;
    edit_replicas(&cluster, 4);
    replica_drift_found(&api).await;
    assert_eq!(observations(&cluster), 1);
}

/// An environment registered on a cluster already watched is told of a change in its
/// namespace within seconds, not at the watch's next periodic read of the environments (every
/// 30 s): the change in a namespace it knew nothing of makes it read them again.
#[tokio::test]
async fn an_environment_registered_on_a_watched_cluster_is_told_of_its_first_change() {
    let (_stack, cluster, api, dir) = watched_cluster().await;
    cluster.create(
        "billing",
        deployment("api", "registry.example.com/shop/api:1.0.0", 2, 2),
        FIELD_MANAGER,
    );
    let kubeconfig = format!("file://{}", dir.path().join("kubeconfig").display());
    observe_namespace(
        &api,
        "billing",
        &kubeconfig,
        "billing",
        vec![declared("api", "1.0.0", 2)],
    )
    .await;
    cluster.update(
        "billing",
        "deployments",
        "api",
        ("kubectl-edit", None),
        json!({ "f:spec": { "f:replicas": {} } }),
        |d| d["spec"]["replicas"] = json!(4),
    );
    // Well within the periodic read's 30 s.
    eventually(
        15,
        "the new environment's replica drift to be found",
        || {
            let api = &api;
            async move {
                let drift = api.drift("billing", Some("open")).await;
                drift.into_iter().find(|f| f["kind"] == "replica")
            }
        },
    )
    .await;
}

/// A watch whose version the API server no longer holds (`410 Gone`, here after a partition
/// during which the history was compacted) lists again, once per kind, and the environment is
/// observed once for all of them: the change made during the partition is found, and nothing
/// is raised twice.
#[tokio::test]
async fn a_watch_answered_gone_lists_again_and_finds_what_it_missed_once() {
    let (stack, cluster, api, _dir) = watched_cluster().await;
    let lists = |cluster: &KubeStandIn| {
        cluster
            .requests()
            .iter()
            .filter(|r| r.starts_with("/apis/apps/v1/deployments?") && !r.contains("watch="))
            .count()
    };
    assert_eq!(lists(&cluster), 1, "the first list");
    cluster.hold_watches(true);
    edit_replicas(&cluster, 6);
    cluster.compact();
    cluster.hold_watches(false);
    cluster.drop_watches();
    replica_drift_found(&api).await;
    wait_watching(&cluster, KINDS).await;
    assert_eq!(
        lists(&cluster),
        2,
        "one list again: {:?}",
        cluster.requests()
    );
    watched_observation_ended(&stack, &api).await;
    assert_eq!(
        observations(&cluster),
        1,
        "one observation for the five relists"
    );
    assert_eq!(api.drift("k8s", Some("open")).await.len(), 1);
    assert_eq!(stack.events("RuntimeDriftDetected").await.len(), 1);
}

/// A cluster whose watches are refused (the observer bound per namespace only, without the
/// watched cluster's ClusterRole) keeps trying them, and leaves its environments to the sweep,
/// which still finds the change.
#[tokio::test]
async fn a_refused_watch_leaves_the_environment_to_the_sweep() {
    let (stack, cluster, api, _dir) =
        cluster_with_environment(StackOptions::proposals_wait_for_a_decision(), |c| {
            c.forbid_cluster_scope(true)
        })
        .await;
    eventually(30, "the watch to be tried", || {
        let tried = cluster
            .requests()
            .iter()
            .any(|r| r.starts_with("/apis/apps/v1/deployments?"));
        async move { tried.then_some(()) }
    })
    .await;
    edit_replicas(&cluster, 7);
    stack.trigger_schedule("observation-sweep");
    replica_drift_found(&api).await;
    assert_eq!(cluster.watching(), 0);
}

/// `runtime-cloud sandbox … scale`, as a user runs it (the README's drift quick start), is
/// found without `POST …/observe`: the command tells the environment to observe itself.
#[tokio::test]
async fn a_sandbox_change_is_found_without_asking() {
    let stack = Stack::with(StackOptions::proposals_wait_for_a_decision()).await;
    let api = stack.operator("acme");
    api.applied(&stack, "dev", &[("api", "1.0.0", 2)]).await;
    stack.sandbox_change_observed(
        "acme",
        "dev",
        &["scale", "--workload", "api", "--replicas", "7"],
    );
    let finding = eventually(30, "the replica drift to be found", || async {
        let drift = api.drift("dev", Some("open")).await;
        drift.into_iter().find(|f| f["kind"] == "replica")
    })
    .await;
    assert_eq!(finding["resource"], "deployment/api", "{finding}");
    assert_eq!(finding["observed"]["desired"], 7, "{finding}");
}

/// Until the watched observation of `k8s` has ended.
async fn watched_observation_ended(stack: &Stack, api: &Api) {
    let watched = format!("observe/{}/k8s/watched", api.tenant);
    eventually(30, "the watched observation to end", || {
        let status = stack
            .describe(&watched)
            .map(|d| d["workflowExecutionInfo"]["status"].clone());
        async move { (status == Some(json!("WORKFLOW_EXECUTION_STATUS_COMPLETED"))).then_some(()) }
    })
    .await;
}

/// The sweep does not read a watched environment that did not change since its last
/// observation: no list at all, and its inventory is fresh again (observed as of the sweep).
/// One that changed since is still read by the change's own observation.
#[tokio::test]
async fn the_sweep_lists_nothing_for_a_watched_environment_that_did_not_change() {
    let (stack, cluster, api, _dir) = watched_cluster().await;
    edit_replicas(&cluster, 3);
    replica_drift_found(&api).await;
    watched_observation_ended(&stack, &api).await;
    assert_eq!(observations(&cluster), 1);
    let inventory = |api: &Api| {
        let api = api.clone();
        async move {
            let inv = api
                .get("/factory/environments/k8s/inventory")
                .await
                .expect(200);
            inv["observedAt"]
                .as_str()
                .and_then(|t| chrono::DateTime::parse_from_rfc3339(t).ok())
                .expect("observedAt")
        }
    };
    let before = inventory(&api).await;
    stack.trigger_schedule("observation-sweep");
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(60);
    while inventory(&api).await <= before {
        if tokio::time::Instant::now() > deadline {
            let logs = stack.logs();
            let interesting: Vec<&str> = logs
                .lines()
                .filter(|l| {
                    l.contains("sweep")
                        || l.contains("page")
                        || l.contains("WARN")
                        || l.contains("ERROR")
                })
                .collect();
            panic!(
                "the sweep never recorded k8s again:\n{}",
                interesting.join("\n")
            );
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert_eq!(
        observations(&cluster),
        1,
        "the sweep listed nothing: {:?}",
        cluster.requests()
    );
    let open = api.drift("k8s", Some("open")).await;
    assert_eq!(open.len(), 1, "the finding stays as it was: {open:?}");
    assert_eq!(stack.events("RuntimeDriftDetected").await.len(), 1);
}
