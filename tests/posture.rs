//! Security posture findings against the Kubernetes stand-in (`tests/common/kube_stand_in.rs`),
//! on the product's default (posture findings on): a privileged container, an image by
//! `:latest` and a LoadBalancer Service each raise a `posture` finding with its rule, announced
//! and counted, never proposed; fixing the object resolves its finding at the next observation;
//! a drift rule accepts one only for a time (it must expire, and it reopens when it does); a
//! namespace without a NetworkPolicy is found, and one whose policies the observer may not list
//! is not made up.

use crate::common::kube_stand_in::KubeStandIn;
use crate::common::{Api, Stack, StackOptions, text};
use runtime_cloud_models::observation::FIELD_MANAGER;
use serde_json::{Value, json};

/// A Deployment that breaks no posture rule: image by digest, not root, memory limit and CPU
/// request; `change` makes it break one.
fn deployment(name: &str, change: impl FnOnce(&mut Value)) -> Value {
    let mut d = json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": { "name": name, "generation": 1, "labels": { "app": name } },
        "spec": {
            "replicas": 1,
            "selector": { "matchLabels": { "app": name } },
            "template": {
                "metadata": { "labels": { "app": name, "app.kubernetes.io/version": "1.0.0" } },
                "spec": {
                    "securityContext": { "runAsNonRoot": true },
                    "containers": [{
                        "name": name,
                        "image": format!("registry.example.com/shop/{name}@sha256:0a1b"),
                        "resources": { "requests": { "cpu": "250m", "memory": "256Mi" },
                                       "limits": { "memory": "256Mi" } }
                    }]
                }
            }
        },
        "status": { "observedGeneration": 1, "replicas": 1, "updatedReplicas": 1,
                    "readyReplicas": 1, "availableReplicas": 1 }
    });
    change(&mut d["spec"]["template"]["spec"]);
    d
}

fn service(name: &str, kind: &str) -> Value {
    json!({ "apiVersion": "v1", "kind": "Service", "metadata": { "name": name },
            "spec": { "type": kind, "selector": { "app": name }, "ports": [{ "port": 80 }] } })
}

pub(crate) fn network_policy() -> Value {
    json!({ "apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
            "metadata": { "name": "default-deny" },
            "spec": { "podSelector": {}, "policyTypes": ["Ingress"] } })
}

/// `agent` privileged, `web` by `:latest` behind a LoadBalancer, `api` hardened behind a
/// ClusterIP Service, a NetworkPolicy; an environment `k8s` observing namespace `shop` with
/// the three declared (so nothing drifts but the posture).
async fn cluster_with_risks(stack: &Stack) -> (KubeStandIn, Api, tempfile::TempDir) {
    let cluster = KubeStandIn::start().await;
    let privileged = |pod: &mut Value| {
        pod["containers"][0]["securityContext"] = json!({ "privileged": true });
    };
    let latest = |pod: &mut Value| {
        pod["containers"][0]["image"] = json!("registry.example.com/shop/web:latest");
    };
    cluster.create("shop", deployment("agent", privileged), FIELD_MANAGER);
    cluster.create("shop", deployment("web", latest), FIELD_MANAGER);
    cluster.create("shop", deployment("api", |_| {}), FIELD_MANAGER);
    cluster.put("shop", service("web", "LoadBalancer"));
    cluster.put("shop", service("api", "ClusterIP"));
    cluster.put("shop", network_policy());
    let (dir, kubeconfig) = crate::kubernetes::kubeconfig(&cluster);
    let api = stack.operator("acme");
    let declared = |name: &str, version: &str| {
        json!({ "name": name, "kind": "deployment", "version": version, "replicas": 1,
                "configRefs": {}, "secretRefs": {} })
    };
    crate::kubernetes::observe_namespace(
        &api,
        "k8s",
        &kubeconfig,
        "shop",
        vec![
            declared("agent", "1.0.0"),
            declared("web", "1.0.0"),
            declared("api", "1.0.0"),
        ],
    )
    .await;
    (cluster, api, dir)
}

/// The stack on the product's defaults for posture, each observation asked for.
async fn stack() -> Stack {
    let mut opts = StackOptions::proposals_wait_for_a_decision();
    opts.posture_findings = true;
    opts.env
        .push(("RUNTIME_CLOUD_KUBERNETES_WATCH".into(), "false".into()));
    Stack::with(opts).await
}

/// (rule, resource) of each finding, sorted.
fn rules(findings: &[Value]) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = findings
        .iter()
        .map(|f| (text(&f["rule"]), text(&f["resource"])))
        .collect();
    out.sort();
    out
}

fn pair(rule: &str, resource: &str) -> (String, String) {
    (rule.to_owned(), resource.to_owned())
}

#[tokio::test]
async fn posture_risks_are_found_resolved_when_fixed_and_accepted_only_for_a_time() {
    let stack = stack().await;
    let (cluster, api, _kubeconfig) = cluster_with_risks(&stack).await;

    let outcome = api.observe(&stack, "k8s").await;
    assert_eq!(outcome["stale"], false, "{outcome}");
    let open = api.drift("k8s", Some("open")).await;
    assert!(open.iter().all(|f| f["kind"] == "posture"), "{open:?}");
    assert_eq!(
        rules(&open),
        [
            pair("mutable-image-tag", "deployment/web"),
            pair("privileged-container", "deployment/agent"),
            pair("public-endpoint", "service/web"),
        ]
    );
    let privileged = open
        .iter()
        .find(|f| f["rule"] == "privileged-container")
        .expect("privileged");
    assert_eq!(
        privileged["observed"]["details"],
        json!(["container `agent` is privileged"])
    );
    // Six list calls: the five kinds and the NetworkPolicies.
    let requests = cluster.requests();
    assert_eq!(requests.len(), 6, "{requests:?}");
    assert!(requests.iter().any(|r| r.contains("/networkpolicies")));
    // Never proposed: there is nothing declared to apply.
    assert_eq!(api.proposals("k8s").await, Vec::<Value>::new());
    // Announced, with the rule, and counted.
    let announced = stack.events("RuntimeDriftDetected").await;
    let mut announced: Vec<(String, String)> = announced
        .iter()
        .map(|e| (text(&e["payload"]["rule"]), text(&e["payload"]["kind"])))
        .collect();
    announced.sort();
    assert_eq!(
        announced,
        [
            pair("mutable-image-tag", "posture"),
            pair("privileged-container", "posture"),
            pair("public-endpoint", "posture"),
        ]
    );
    let metrics = stack.scrape().await;
    let tenant = stack.tenant("acme");
    let open_gauge =
        format!(r#"connectsoft_factory_runtime_drift_open{{tenant="{tenant}",kind="posture"}} 3"#);
    assert!(metrics.contains(&open_gauge), "{metrics}");
    // Listed by kind too.
    let by_kind = api
        .get("/factory/environments/k8s/drift?kind=posture&state=open")
        .await
        .expect(200);
    assert_eq!(by_kind["items"].as_array().map(Vec::len), Some(3));

    // Nothing changed: nothing raised or resolved.
    let again = api.observe(&stack, "k8s").await;
    assert_eq!(
        (&again["newFindings"], &again["resolvedFindings"]),
        (&json!(0), &json!(0)),
        "{again}"
    );

    // The agent is fixed: its finding resolves at the next observation, the others stand.
    cluster.put("shop", deployment("agent", |_| {}));
    let fixed = api.observe(&stack, "k8s").await;
    assert_eq!(fixed["resolvedFindings"], 1, "{fixed}");
    let resolved = api.drift("k8s", Some("resolved")).await;
    assert_eq!(
        rules(&resolved),
        [pair("privileged-container", "deployment/agent")]
    );
    assert_eq!(resolved[0]["findingId"], privileged["findingId"]);

    // Accepting a posture risk needs an expiry.
    let forever = api
        .post(
            "/factory/environments/k8s/drift-rules",
            json!({ "kind": "posture", "workload": "web", "rule": "mutable-image-tag",
                    "owner": "team-shop", "reason": "pinned next sprint" }),
        )
        .await
        .expect_problem(422);
    assert!(text(&forever["detail"]).contains("expiresAt"), "{forever}");
    let misplaced = api
        .post(
            "/factory/environments/k8s/drift-rules",
            json!({ "kind": "replica", "workload": "web", "rule": "mutable-image-tag",
                    "owner": "team-shop", "reason": "x" }),
        )
        .await
        .expect_problem(422);
    assert!(
        text(&misplaced["detail"]).contains("posture"),
        "{misplaced}"
    );
    // Long enough for an observation on a loaded machine.
    let expires_at = chrono::Utc::now() + chrono::Duration::seconds(15);
    let rule = api
        .post(
            "/factory/environments/k8s/drift-rules",
            json!({ "kind": "posture", "workload": "web", "rule": "mutable-*",
                    "owner": "team-shop", "reason": "pinned next sprint",
                    "expiresAt": expires_at }),
        )
        .await
        .expect(201);
    assert_eq!(rule["rule"], "mutable-*");
    api.observe(&stack, "k8s").await;
    let suppressed = api.drift("k8s", Some("suppressed")).await;
    assert_eq!(
        rules(&suppressed),
        [pair("mutable-image-tag", "deployment/web")]
    );
    assert_eq!(suppressed[0]["suppressedBy"], rule["ruleId"]);
    assert_eq!(
        rules(&api.drift("k8s", Some("open")).await),
        [pair("public-endpoint", "service/web")],
        "the rule names one posture rule of one workload"
    );
    // The acceptance lapses (the clock passes its expiry; nothing else is awaited).
    let left = (expires_at - chrono::Utc::now())
        .to_std()
        .unwrap_or_default();
    tokio::time::sleep(left + std::time::Duration::from_millis(50)).await;
    api.observe(&stack, "k8s").await;
    let open = api.drift("k8s", Some("open")).await;
    let reopened = open
        .iter()
        .find(|f| f["rule"] == "mutable-image-tag")
        .unwrap_or_else(|| panic!("reopened: {open:?}"));
    assert_eq!(reopened["findingId"], suppressed[0]["findingId"]);

    // The NetworkPolicy goes: the namespace is open to the whole cluster.
    cluster.delete("shop", "networkpolicies", "default-deny");
    api.observe(&stack, "k8s").await;
    let open = api.drift("k8s", Some("open")).await;
    assert!(
        rules(&open).contains(&pair("no-network-policy", "namespace/shop")),
        "{open:?}"
    );
    // An observer whose role may not list NetworkPolicies makes no finding up, and still
    // observes.
    cluster.forbid_kind("networkpolicies", true);
    let forbidden = api.observe(&stack, "k8s").await;
    assert_eq!(forbidden["stale"], false, "{forbidden}");
    let open = api.drift("k8s", Some("open")).await;
    assert!(
        !rules(&open)
            .iter()
            .any(|(rule, _)| rule == "no-network-policy"),
        "{open:?}"
    );
    assert_eq!(api.proposals("k8s").await, Vec::<Value>::new());
}

/// In the console, each open posture finding shows its rule beside its kind and what breaks
/// it (Chromium, `tests/console/posture.mjs`).
#[tokio::test]
async fn console_an_operator_reads_posture_findings_with_their_rules() {
    let stack = stack().await;
    let (_cluster, api, _kubeconfig) = cluster_with_risks(&stack).await;
    api.observe(&stack, "k8s").await;
    let token = crate::cli::operator_token(&stack);
    crate::console::scenario(
        "posture",
        &stack.base_url,
        &[("RC_TOKEN", &token), ("RC_ENV", "k8s")],
    )
    .await;
}

/// Turned off, observations raise no posture finding and make no extra list call; those open
/// resolve.
#[tokio::test]
async fn posture_findings_turned_off_raise_nothing() {
    let stack = Stack::with(StackOptions::with_env(
        "RUNTIME_CLOUD_KUBERNETES_WATCH",
        "false",
    ))
    .await;
    let (cluster, api, _kubeconfig) = cluster_with_risks(&stack).await;
    let outcome = api.observe(&stack, "k8s").await;
    assert_eq!(
        (&outcome["stale"], &outcome["newFindings"]),
        (&json!(false), &json!(0)),
        "{outcome}"
    );
    assert_eq!(api.drift("k8s", None).await, Vec::<Value>::new());
    let requests = cluster.requests();
    assert_eq!(requests.len(), 5, "{requests:?}");
}

/// A Pulumi stack's resources are judged by the posture rules written in Rego (the default
/// bundle's `public-bucket` here), on the Pulumi stand-in's `pulumi stack export`: raised by
/// the observation after the apply, with the URN as its resource, resolved once a run makes the
/// bucket private. The same export prices them by type.
#[tokio::test]
async fn a_rego_posture_rule_fires_on_a_pulumi_stacks_resource_until_it_is_fixed() {
    let stack = Stack::with(StackOptions {
        env: vec![(
            "RUNTIME_CLOUD_PULUMI_BINARY".into(),
            crate::pulumi::stand_in(),
        )],
        posture_findings: true,
        ..StackOptions::proposals_wait_for_a_decision()
    })
    .await;
    let state = stack.data_dir.path().join("pulumi-state");
    let api = stack.operator("acme");
    let program = |acl: &str| {
        json!({ "name": "shop", "runtime": "yaml",
                "resources": { "docs": { "type": "aws:s3/bucket:Bucket",
                                         "properties": { "acl": acl } } } })
    };
    let repo = crate::pulumi::Repository::new();
    let public = repo.commit(&program("public-read"));
    api.post(
        "/factory/environments",
        json!({ "environmentId": "dev", "projectId": "shop", "class": "non-production",
                "target": { "runner": { "kind": "pulumi", "stack": "acme/shop/dev",
                                        "backendUrl": format!("file://{}", state.display()) } } }),
    )
    .await
    .expect(201);
    let declare = |commit: String| {
        let api = &api;
        let program_ref = repo.program_ref();
        async move {
            api.post(
                "/factory/provisioning/specifications",
                json!({ "environmentId": "dev", "kind": "environment", "programRef": program_ref,
                        "programVersion": commit, "configRefs": {}, "secretRefs": {},
                        "workloads": [] }),
            )
            .await
            .expect(201);
        }
    };
    // Nothing applied yet: no state, nothing judged.
    declare(public).await;
    api.observe(&stack, "dev").await;
    assert_eq!(api.drift("dev", None).await, Vec::<Value>::new());

    let id = api.plan_run("dev", "baseline").await;
    api.wait_state(&id, "Applied").await;
    api.observe(&stack, "dev").await;
    let open = api.drift("dev", Some("open")).await;
    let urn = "urn:pulumi:dev::shop::aws:s3/bucket:Bucket::docs";
    assert_eq!(rules(&open), [pair("public-bucket", urn)], "{open:?}");
    assert_eq!(
        open[0]["observed"]["details"],
        json!(["acl `public-read`: anyone can read it"])
    );
    assert_eq!(api.proposals("dev").await, Vec::<Value>::new());
    // The same export prices the stack's resources by type (cost, docs/operations.md).
    api.put(
        "/factory/prices",
        json!({ "currency": "EUR", "cpuHour": 0.04, "memoryGbHour": 0.005,
                "resourceTypes": { "aws:s3/bucket:Bucket": 0.0125 } }),
    )
    .await
    .expect(200);
    let costs = api.get("/fleet/costs").await.expect(200);
    let cost = &costs["items"][0]["cost"];
    assert_eq!(
        (&cost["hourly"], &cost["resourcesHourly"], &cost["unpriced"]),
        (&json!(0.0125), &json!(0.0125), &Value::Null),
        "{costs}"
    );

    declare(repo.commit(&program("private"))).await;
    let id = api.plan_run("dev", "promotion").await;
    api.wait_state(&id, "Applied").await;
    api.observe(&stack, "dev").await;
    assert_eq!(api.drift("dev", Some("open")).await, Vec::<Value>::new());
    assert_eq!(
        rules(&api.drift("dev", Some("resolved")).await),
        [pair("public-bucket", urn)]
    );
}

/// A tenant's rule: no plan may newly run a privileged container or open a bucket.
const NO_NEW_RISKS: &str = r#"package runtime_cloud

deny contains msg if {
	some v in input.plan.posture
	v.rule in {"privileged-container", "public-bucket"}
	msg := sprintf("the plan introduces %s on %s (%s)", [v.rule, v.resource, v.detail])
}
"#;

/// Each plan's resources are judged by the posture rules as they are and as the plan would
/// leave them: what the plan would newly break is on its receipt (`planReceipt.posture`) and
/// given to the policies, so a tenant's rule denies a plan that makes a container privileged
/// and a bucket public, with both as the evidence on the run; a rule the resource broke
/// already (its image by tag) is not the plan's doing.
#[tokio::test]
async fn a_plan_that_would_introduce_a_posture_risk_is_denied_with_the_risk_as_evidence() {
    use crate::pulumi::Repository;
    let policies = tempfile::tempdir().expect("policy dir");
    std::fs::write(policies.path().join("no-new-risks.rego"), NO_NEW_RISKS).expect("policy");
    let mut opts = StackOptions::proposals_wait_for_a_decision();
    opts.posture_findings = true;
    opts.env.extend([
        (
            "RUNTIME_CLOUD_PULUMI_BINARY".to_owned(),
            crate::pulumi::stand_in(),
        ),
        (
            "RUNTIME_CLOUD_POLICY_DIR".to_owned(),
            policies.path().display().to_string(),
        ),
        (
            "RUNTIME_CLOUD_KUBERNETES_WATCH".to_owned(),
            "false".to_owned(),
        ),
    ]);
    let stack = Stack::with(opts).await;
    let cluster = KubeStandIn::start().await;
    let (_kubeconfig_dir, kubeconfig_ref) = crate::kubernetes::kubeconfig(&cluster);
    let state = stack.data_dir.path().join("pulumi-state");
    let api = stack.operator("acme");
    // The program: Deployment `api` by a mutable tag (breaking `mutable-image-tag` from the
    // start), privileged or not, and bucket `docs` with `acl`.
    let program = |privileged: bool, acl: &str| {
        let object = deployment("api", |pod| {
            pod["containers"][0]["image"] = json!("registry.example.com/shop/api:1.0.0");
            if privileged {
                pod["containers"][0]["securityContext"] = json!({ "privileged": true });
            }
        });
        let metadata = json!({ "name": "api", "namespace": "shop", "labels": { "app": "api" },
                               "annotations": { "pulumi.com/patchFieldManager": FIELD_MANAGER } });
        json!({ "name": "shop", "runtime": "yaml", "outputs": {},
                "resources": {
                    "api": { "type": "kubernetes:apps/v1:Deployment",
                             "properties": { "metadata": metadata, "spec": object["spec"] } },
                    "docs": { "type": "aws:s3/bucket:Bucket", "properties": { "acl": acl } } } })
    };
    let repo = Repository::new();
    crate::kubernetes::register_pulumi_run(&api, "production", &state, &kubeconfig_ref).await;
    let declare = |commit: String| {
        let api = &api;
        let (program_ref, kubeconfig_ref) = (repo.program_ref(), kubeconfig_ref.clone());
        async move {
            api.post(
                "/factory/provisioning/specifications",
                json!({ "environmentId": "k8s", "kind": "environment", "programRef": program_ref,
                        "programVersion": commit, "configRefs": {},
                        "secretRefs": { "kubernetes:kubeconfig": kubeconfig_ref },
                        "workloads": [{ "name": "api", "kind": "deployment", "version": "1.0.0",
                                        "replicas": 1, "configRefs": {}, "secretRefs": {} }] }),
            )
            .await
            .expect(201);
        }
    };
    let urn = "urn:pulumi:k8s::shop::aws:s3/bucket:Bucket::docs";

    // The baseline creates both: the image by tag is introduced, and no rule denies it.
    api.put(
        "/factory/prices",
        json!({ "currency": "EUR", "cpuHour": 0.04, "memoryGbHour": 0.005,
                "resourceTypes": { "aws:s3/bucket:Bucket": 0.0125 } }),
    )
    .await
    .expect(200);
    declare(repo.commit(&program(false, "private"))).await;
    let id = api.plan_run("k8s", "baseline").await;
    let run = api.wait_state(&id, "AwaitingApproval").await;
    // Its estimate prices the Deployment before it runs, by what the program's object
    // requests (250m and 256Mi a replica: 0.01 + 0.00125), and the bucket by its type (0.0125).
    let cost = &run["planReceipt"]["cost"];
    assert_eq!(
        (
            &cost["beforeHourly"],
            &cost["afterHourly"],
            &cost["unpriced"]
        ),
        (&json!(0.0), &json!(0.02375), &Value::Null),
        "{run}"
    );
    let introduced = |run: &Value| -> Vec<(String, String)> {
        run["planReceipt"]["posture"]
            .as_array()
            .map(|a| rules(a))
            .unwrap_or_default()
    };
    assert_eq!(
        introduced(&run),
        [pair("mutable-image-tag", "deployment/api")],
        "{run}"
    );
    api.decide(&id, "approve").await.expect(202);
    api.wait_state(&id, "Applied").await;

    // Privileged and public: denied before any approval, both rules the evidence; the image
    // by tag, broken already, is not listed.
    declare(repo.commit(&program(true, "public-read"))).await;
    let id = api.plan_run("k8s", "promotion").await;
    let run = api.wait_state(&id, "Rejected").await;
    assert_eq!(
        introduced(&run),
        [
            pair("privileged-container", "deployment/api"),
            pair("public-bucket", urn)
        ],
        "{run}"
    );
    let reason = text(&run["reason"]);
    assert!(
        reason.starts_with("denied by policy: ")
            && reason.contains("the plan introduces privileged-container on deployment/api (container `api` is privileged)")
            && reason.contains(&format!("the plan introduces public-bucket on {urn}")),
        "{run}"
    );
    assert!(run["applyReceipt"].is_null(), "nothing applied: {run}");
    let live = cluster.get("shop", "deployments", "api");
    assert_eq!(
        live["spec"]["template"]["spec"]["containers"][0]["securityContext"],
        Value::Null,
        "the cluster runs what the baseline applied"
    );
    // The CLI shows them with the plan.
    let op = crate::cli::cli(&stack, Some(crate::cli::operator_token(&stack)));
    let shown = op.run(&["runs", "get", &id]);
    let shown = shown.expect(0);
    assert!(
        shown.contains("introduces posture privileged-container on deployment/api: container `api` is privileged"),
        "{shown}"
    );
    // And the console, with the plan on the run's page.
    let token = crate::cli::operator_token(&stack);
    crate::console::scenario(
        "plan_posture",
        &stack.base_url,
        &[
            ("RC_TOKEN", &token),
            ("RC_RUN", &id),
            ("RC_RULES", "privileged-container,public-bucket"),
        ],
    )
    .await;
}
