//! Adopting an unmanaged workload into a Pulumi program: the code `pulumi import` generates
//! (the Pulumi stand-in, against the Kubernetes stand-in) committed on a branch of its own,
//! the default branch untouched; the stack's next update of that commit takes the object over,
//! and it is unmanaged no more. A repository that refuses the push leaves nothing behind.

use crate::common::kube_stand_in::KubeStandIn;
use crate::common::{Api, Stack, eventually, text};
use crate::kubernetes::{declared, deployment, kubeconfig};
use crate::pulumi::{Repository, stack_with};
use serde_json::{Value, json};

/// A stack (auto-accept and the watches off: each test asks for its observations) with a
/// Pulumi environment `k8s` whose stack manages Deployment `api` in namespace `shop` of a
/// Kubernetes stand-in, applied.
struct Applied {
    cluster: KubeStandIn,
    stack: Stack,
    state: std::path::PathBuf,
    api: Api,
    repo: Repository,
    /// The program's commit the environment runs.
    base: String,
    kubeconfig_ref: String,
}

async fn applied_api() -> Applied {
    let cluster = KubeStandIn::start().await;
    let (stack, state) = stack_with(&[
        (
            "RuntimeCloud__Inventory__AutoAcceptNonDestructiveOutsideProduction",
            "false",
        ),
        ("RUNTIME_CLOUD_KUBERNETES_WATCH", "false"),
    ])
    .await;
    let api = stack.operator("acme");
    let (repo, base, kubeconfig_ref) = managed_api(&stack, &api, &cluster, &state).await;
    Applied {
        cluster,
        stack,
        state,
        api,
        repo,
        base,
        kubeconfig_ref,
    }
}

/// A Pulumi environment `k8s` whose stack manages Deployment `api` in namespace `shop` of
/// `cluster`, applied; the stand-in repository and its commit.
async fn managed_api(
    stack: &Stack,
    api: &Api,
    cluster: &KubeStandIn,
    state: &std::path::Path,
) -> (Repository, String, String) {
    let (kubeconfig_dir, kubeconfig_ref) = kubeconfig(cluster);
    std::mem::forget(kubeconfig_dir);
    let mut object = deployment("api", "registry.example.com/shop/api:1.0.0", 2, 2);
    object["metadata"] = json!({ "name": "api", "namespace": "shop", "labels": { "app": "api" } });
    let repo = Repository::new();
    // Written as YAML, with a comment the adoption keeps.
    let program = format!(
        "name: shop\nruntime: yaml\n# What the shop runs.\nresources:\n  api:\n    type: kubernetes:apps/v1:Deployment\n    properties: {}\n",
        json!({ "metadata": object["metadata"], "spec": object["spec"] })
    );
    std::fs::create_dir_all(repo.path().join("shop")).expect("shop dir");
    std::fs::write(repo.path().join("shop/Pulumi.yaml"), program).expect("program");
    repo.git(&["add", "."]);
    repo.git(&["commit", "--quiet", "-m", "program"]);
    let commit = repo.git(&["rev-parse", "HEAD"]);
    crate::kubernetes::register_pulumi_run(api, "non-production", state, &kubeconfig_ref).await;
    declare(api, &repo, &commit, &kubeconfig_ref).await;
    let run = api.plan_run("k8s", "baseline").await;
    api.wait_state(&run, "Applied").await;
    api.wait_observed_after(stack, &run).await;
    assert!(
        api.drift("k8s", Some("open")).await.is_empty(),
        "as applied"
    );
    (repo, commit, kubeconfig_ref)
}

/// Declares `api` 1.0.0 × 2 of the program at `commit`.
async fn declare(api: &Api, repo: &Repository, commit: &str, kubeconfig_ref: &str) {
    api.post(
        "/factory/provisioning/specifications",
        json!({ "environmentId": "k8s", "kind": "environment", "programRef": repo.program_ref(),
                "programVersion": commit, "configRefs": {},
                "secretRefs": { "kubernetes:kubeconfig": kubeconfig_ref },
                "workloads": [declared("api", "1.0.0", 2)] }),
    )
    .await
    .expect(201);
}

/// `batch`, created by hand, found unmanaged: its proposal.
async fn unmanaged_batch(stack: &Stack, api: &Api, cluster: &KubeStandIn) -> String {
    cluster.create(
        "shop",
        deployment("batch", "registry.example.com/shop/batch:2.0.0", 1, 1),
        "kubectl-create",
    );
    let outcome = api.observe(stack, "k8s").await;
    let proposal = text(&outcome["newProposal"]["proposalId"]);
    let proposed = api.wait_proposal("k8s", &proposal, "Proposed").await;
    assert_eq!(proposed["direction"], "adopt-observed", "{proposed}");
    proposal
}

/// The adoption of `proposal` once it left `generating`.
async fn adoption_ended(api: &Api, proposal: &str) -> Value {
    eventually(120, "the adoption to end", || async {
        let a = api
            .get(&format!(
                "/factory/reconciliation/proposals/{proposal}/adoption"
            ))
            .await
            .expect(200);
        (a["state"] != "generating").then_some(a)
    })
    .await
}

#[tokio::test]
async fn an_unmanaged_workload_is_adopted_into_the_program_on_a_branch_and_managed_after_its_update()
 {
    let Applied {
        cluster,
        stack,
        state,
        api,
        repo,
        base,
        kubeconfig_ref,
    } = applied_api().await;
    let proposal = unmanaged_batch(&stack, &api, &cluster).await;

    // Asked by a reader: refused; by an Operator: generating, then published.
    stack
        .client("acme", &["factory.runtime.read"])
        .post(
            &format!("/factory/reconciliation/proposals/{proposal}/adoption"),
            json!({}),
        )
        .await
        .expect_problem(403);
    let asked = api
        .post(
            &format!("/factory/reconciliation/proposals/{proposal}/adoption"),
            json!({}),
        )
        .await
        .expect(202);
    assert_eq!(asked["state"], "generating", "{asked}");
    assert_eq!(
        asked["workflowId"],
        format!("program-adoption/{proposal}/1")
    );
    let adoption = adoption_ended(&api, &proposal).await;
    assert_eq!(adoption["state"], "published", "{adoption}");
    let branch = format!("runtime-cloud/adopt/{proposal}");
    assert_eq!(adoption["branch"], branch);
    assert_eq!(
        adoption["resources"],
        json!([{ "resource": "deployment/batch", "name": "batch",
                 "type": "kubernetes:apps/v1:Deployment", "importId": "shop/batch" }])
    );
    let commit = text(&adoption["commit"]);

    // The repository: the default branch untouched, the branch one commit on the base.
    assert_eq!(
        repo.git(&["rev-parse", "main"]),
        base,
        "the default branch is untouched"
    );
    assert_eq!(repo.git(&["rev-parse", &branch]), commit);
    assert_eq!(repo.git(&["rev-parse", &format!("{commit}^")]), base);
    let program = repo.git(&["show", &format!("{commit}:shop/Pulumi.yaml")]);
    assert!(
        program.contains("# What the shop runs."),
        "the program's text is kept: {program}"
    );
    let read: Value = serde_saphyr::from_str(&program).expect("the program is YAML");
    assert_eq!(
        read["resources"]["batch"]["type"],
        "kubernetes:apps/v1:Deployment"
    );
    assert_eq!(
        read["resources"]["batch"]["options"],
        json!({ "import": "shop/batch" })
    );
    assert_eq!(
        read["resources"]["batch"]["properties"]["spec"]["replicas"],
        1
    );
    assert!(
        read["resources"]["api"].is_object(),
        "what the program managed stays"
    );
    let diff = text(&adoption["diff"]);
    assert!(
        diff.contains("+    options:") && diff.contains("import: shop/batch"),
        "{diff}"
    );
    // The real stack was only read: it manages api alone until the branch is applied.
    let saved: Value = serde_json::from_str(
        &std::fs::read_to_string(state.join("acme__shop__k8s.json")).expect("state"),
    )
    .expect("json");
    assert_eq!(
        saved["resources"].as_object().map(|r| r.len()),
        Some(1),
        "{saved}"
    );
    let events = stack.events("AdoptionPublished").await;
    assert_eq!(events.len(), 1, "{events:?}");
    assert_eq!(events[0]["payload"]["commit"], commit);
    // The proposal shows it; asked again, the published adoption is answered as it is.
    let listed = api
        .get("/factory/reconciliation/proposals?environmentId=k8s")
        .await
        .expect(200);
    let shown = listed["items"]
        .as_array()
        .and_then(|p| p.iter().find(|p| p["proposalId"] == proposal.as_str()))
        .expect("the proposal");
    assert_eq!(shown["adoption"]["commit"], commit);
    let again = api
        .post(
            &format!("/factory/reconciliation/proposals/{proposal}/adoption"),
            json!({}),
        )
        .await
        .expect(200);
    assert_eq!(again["commit"], commit);

    // A specification pointing at the commit: its run imports batch (nothing written to the
    // cluster), and the next observation finds it managed by the stack.
    declare(&api, &repo, &commit, &kubeconfig_ref).await;
    let run = api.plan_run("k8s", "baseline").await;
    let applied = api.wait_state(&run, "Applied").await;
    assert_eq!(
        applied["planReceipt"]["changes"],
        json!([{ "name": "batch", "kind": "kubernetes:apps/v1:Deployment", "fields": ["import"] }]),
        "{applied}"
    );
    assert_eq!(applied["planReceipt"]["adds"], json!([]), "{applied}");
    api.wait_observed_after(&stack, &run).await;
    let inventory = api
        .get("/factory/environments/k8s/inventory")
        .await
        .expect(200);
    let batch = inventory["workloads"]
        .as_array()
        .and_then(|w| w.iter().find(|w| w["name"] == "batch"))
        .cloned()
        .expect("batch observed");
    assert_eq!(batch["managedBy"], "pulumi", "{inventory}");
    assert!(
        api.drift("k8s", Some("open")).await.is_empty(),
        "batch is managed: {:?}",
        api.drift("k8s", Some("open")).await
    );
    let resolved = api.drift("k8s", Some("resolved")).await;
    assert!(
        resolved
            .iter()
            .any(|f| f["kind"] == "unmanaged" && f["resource"] == "deployment/batch"),
        "{resolved:?}"
    );
}

#[tokio::test]
async fn a_push_the_repository_refuses_fails_the_adoption_and_leaves_no_branch() {
    let Applied {
        cluster,
        stack,
        api,
        repo,
        base,
        ..
    } = applied_api().await;
    let hook = repo.path().join(".git/hooks/pre-receive");
    std::fs::write(
        &hook,
        "#!/bin/sh\necho 'branch creation is restricted to the release team' >&2\nexit 1\n",
    )
    .expect("hook");
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&hook, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let proposal = unmanaged_batch(&stack, &api, &cluster).await;

    api.post(
        &format!("/factory/reconciliation/proposals/{proposal}/adoption"),
        json!({}),
    )
    .await
    .expect(202);
    let adoption = adoption_ended(&api, &proposal).await;
    assert_eq!(adoption["state"], "failed", "{adoption}");
    let reason = text(&adoption["reason"]);
    assert!(reason.contains("branch creation is restricted"), "{reason}");
    assert!(
        adoption["branch"].is_null() && adoption["commit"].is_null(),
        "{adoption}"
    );
    assert_eq!(
        repo.git(&["branch", "--list", "runtime-cloud/*"]),
        "",
        "no branch left"
    );
    assert_eq!(repo.git(&["rev-parse", "main"]), base);
    let events = stack.events("AdoptionFailed").await;
    assert_eq!(events.len(), 1, "{events:?}");
    assert!(text(&events[0]["payload"]["reason"]).contains("restricted"));

    // Once the repository takes it, the same adoption asked again (from the CLI) publishes.
    std::fs::remove_file(&hook).expect("hook removed");
    let op = crate::cli::cli(&stack, Some(crate::cli::operator_token(&stack)));
    let asked = op
        .run(&["proposals", "adopt", &proposal, "-o", "json"])
        .json();
    assert_eq!(asked["state"], "generating", "{asked}");
    assert_eq!(
        asked["workflowId"],
        format!("program-adoption/{proposal}/2"),
        "a workflow per request"
    );
    adoption_ended(&api, &proposal).await;
    let adoption = op
        .run(&["proposals", "adoption", &proposal, "-o", "json"])
        .json();
    assert_eq!(adoption["state"], "published", "{adoption}");
    assert_eq!(
        repo.git(&["rev-parse", &format!("runtime-cloud/adopt/{proposal}")]),
        text(&adoption["commit"])
    );
}

/// An Operator adopts the unmanaged workload on the environment's page; the API shows the
/// adoption published by that operator.
#[tokio::test]
async fn console_an_operator_adopts_an_unmanaged_workload_into_the_program() {
    let Applied {
        cluster,
        stack,
        api,
        repo,
        ..
    } = applied_api().await;
    let proposal = unmanaged_batch(&stack, &api, &cluster).await;
    let token = stack.token("acme", crate::common::OPERATOR_SCOPES);
    crate::console::scenario(
        "adopt",
        &stack.base_url,
        &[
            ("RC_TOKEN", &token),
            ("RC_ENV", "k8s"),
            ("RC_PROPOSAL_ID", &proposal),
        ],
    )
    .await;
    let adoption = api
        .get(&format!(
            "/factory/reconciliation/proposals/{proposal}/adoption"
        ))
        .await
        .expect(200);
    assert_eq!(adoption["state"], "published", "{adoption}");
    assert_eq!(adoption["requestedBy"], "tester", "{adoption}");
    assert_eq!(
        repo.git(&["rev-parse", &format!("runtime-cloud/adopt/{proposal}")]),
        text(&adoption["commit"])
    );
}

/// The stand-in's `pulumi import` and `pulumi stack export` against the real CLI's formats
/// vendored in `tests/fixtures/pulumi/import/` (SOURCES.md): it reads the import file Pulumi's
/// docs show, writes code shaped as `pulumi import --out` writes Pulumi YAML (`resources:` of
/// name → `type`, `properties`, and `options: protect: true` unless `--protect=false`), and
/// exports its state as a version-3 deployment whose resources carry the real keys, a
/// namespaced Kubernetes object's ID being `namespace/name`.
#[tokio::test]
async fn the_stand_ins_import_and_export_speak_the_captured_formats() {
    let fixtures =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/pulumi/import");
    let read = |name: &str| std::fs::read_to_string(fixtures.join(name)).expect(name);
    let cluster = KubeStandIn::start().await;
    cluster.create(
        "default",
        deployment("app", "nginx:1.27", 1, 1),
        "kubectl-create",
    );
    let (kubeconfig_dir, _) = kubeconfig(&cluster);
    let work = tempfile::tempdir().expect("work dir");
    let backend = tempfile::tempdir().expect("backend");
    std::fs::write(
        work.path().join("Pulumi.yaml"),
        "name: shop\nruntime: yaml\n",
    )
    .expect("project");
    // The docs' Kubernetes import file, its Deployment (the Kubernetes stand-in serves apps/v1).
    let docs: Value = serde_json::from_str(&read("import-file-kubernetes.json")).expect("json");
    let deployment_entry = docs["resources"]
        .as_array()
        .and_then(|r| {
            r.iter()
                .find(|r| r["type"] == "kubernetes:apps/v1:Deployment")
        })
        .cloned()
        .expect("a Deployment in the docs' file");
    std::fs::write(
        work.path().join("import.json"),
        json!({ "resources": [deployment_entry] }).to_string(),
    )
    .expect("import file");
    // Run without blocking: the Kubernetes stand-in answers on this test's runtime.
    let pulumi = async |args: &[&str]| {
        let out = tokio::process::Command::new(crate::pulumi::stand_in())
            .args(args)
            .args(["--stack", "acme/shop/scratch", "--non-interactive"])
            .current_dir(work.path())
            .env(
                "PULUMI_BACKEND_URL",
                format!("file://{}", backend.path().display()),
            )
            .output()
            .await
            .expect("the stand-in");
        assert!(
            out.status.success(),
            "pulumi {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let kubeconfig_path = kubeconfig_dir
        .path()
        .join("kubeconfig")
        .display()
        .to_string();
    pulumi(&["stack", "select", "--create"]).await;
    pulumi(&["config", "set", "kubernetes:kubeconfig", &kubeconfig_path]).await;
    pulumi(&[
        "import",
        "--file",
        "import.json",
        "--out",
        "protected.yaml",
        "--yes",
    ])
    .await;
    pulumi(&[
        "import",
        "--file",
        "import.json",
        "--out",
        "code.yaml",
        "--protect=false",
        "--yes",
    ])
    .await;

    let yaml = |text: &str| -> Value { serde_saphyr::from_str(text).expect("yaml") };
    let real = yaml(&read("import-out-yaml-random.yaml"));
    let ours = yaml(&std::fs::read_to_string(work.path().join("code.yaml")).expect("code"));
    let keys = |v: &Value| -> Vec<String> {
        v.as_object()
            .map(|o| o.keys().cloned().collect())
            .unwrap_or_default()
    };
    assert_eq!(keys(&ours), keys(&real), "one top-level key, `resources`");
    let (real_one, ours_one) = (
        &real["resources"]["randomPassword"],
        &ours["resources"]["app"],
    );
    assert_eq!(
        keys(ours_one),
        keys(real_one),
        "type and properties, nothing else: {ours}"
    );
    assert_eq!(ours_one["type"], "kubernetes:apps/v1:Deployment");
    assert_eq!(ours_one["properties"]["metadata"]["name"], "app");
    let protected =
        yaml(&std::fs::read_to_string(work.path().join("protected.yaml")).expect("code"));
    let real_protect = yaml(&read("codegen-yaml-options-protect.yaml"));
    let real_options = real_protect["resources"]
        .as_object()
        .and_then(|r| r.values().find_map(|r| r.get("options").cloned()))
        .expect("a resource with options");
    assert_eq!(real_options["protect"], true);
    assert_eq!(
        protected["resources"]["app"]["options"],
        json!({ "protect": true })
    );

    let real: Value = serde_json::from_str(&read("stack-export-kubernetes.json")).expect("json");
    let ours: Value = serde_json::from_str(&pulumi(&["stack", "export"]).await).expect("json");
    assert_eq!(ours["version"], real["version"]);
    assert_eq!(
        keys(&ours["deployment"]["manifest"]),
        keys(&real["deployment"]["manifest"])
    );
    let real_custom = real["deployment"]["resources"]
        .as_array()
        .and_then(|r| {
            r.iter()
                .find(|r| r["type"] == "kubernetes:core/v1:Namespace")
        })
        .expect("a Kubernetes resource in the capture");
    let ours_app = ours["deployment"]["resources"]
        .as_array()
        .and_then(|r| {
            r.iter()
                .find(|r| r["type"] == "kubernetes:apps/v1:Deployment")
        })
        .expect("the imported Deployment");
    for key in keys(ours_app) {
        assert!(
            real_custom.get(&key).is_some(),
            "`{key}` is a key of a real exported resource"
        );
    }
    assert_eq!(
        ours_app["id"], deployment_entry["id"],
        "a namespaced object's ID is namespace/name"
    );
    assert_eq!(
        runtime_cloud_models::program_adoption::managed_workloads(
            &runtime_cloud_activities::pulumi::state_resources(&ours)
        ),
        [("deployment".to_owned(), "default/app".to_owned())],
        "what the adapter reads of it"
    );
}
