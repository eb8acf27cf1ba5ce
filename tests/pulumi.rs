//! The Pulumi runner end to end: programs in real Git repositories made here, planned and
//! applied through the product's Pulumi adapter against the stand-in `pulumi` under
//! `tests/stand_ins/` (the real CLI cannot be installed on these machines).

use crate::common::{Api, Stack, StackOptions, text};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::process::Command;

/// The stand-in CLI.
pub(crate) fn stand_in() -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/stand_ins/pulumi")
        .display()
        .to_string()
}

/// A Git repository holding the program `shop/Pulumi.yaml`.
pub(crate) struct Repository {
    dir: tempfile::TempDir,
}

impl Repository {
    pub(crate) fn new() -> Self {
        let repo = Self {
            dir: tempfile::tempdir().expect("repository dir"),
        };
        repo.git(&["init", "--quiet", "-b", "main"]);
        repo
    }

    pub(crate) fn git(&self, args: &[&str]) -> String {
        let out = Command::new("git")
            .args(["-c", "user.name=dev", "-c", "user.email=dev@example.com"])
            .args(args)
            .current_dir(self.dir.path())
            .output()
            .expect("git");
        assert!(
            out.status.success(),
            "git {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).trim().to_owned()
    }

    /// Commits `program` as `shop/Pulumi.yaml`; returns the commit.
    pub(crate) fn commit(&self, program: &Value) -> String {
        std::fs::create_dir_all(self.dir.path().join("shop")).expect("shop dir");
        let file = self.dir.path().join("shop/Pulumi.yaml");
        std::fs::write(file, serde_json::to_string_pretty(program).expect("json")).expect("write");
        self.git(&["add", "."]);
        self.git(&["commit", "--quiet", "-m", "program"]);
        self.git(&["rev-parse", "HEAD"])
    }

    pub(crate) fn path(&self) -> &Path {
        self.dir.path()
    }

    pub(crate) fn program_ref(&self) -> String {
        format!("file://{}//shop", self.dir.path().display())
    }
}

/// A program with a bucket (and `extra` properties) and two outputs, one secret.
fn program(extra: Value) -> Value {
    let mut properties = json!({ "acl": "private" });
    if let Value::Object(more) = extra {
        properties.as_object_mut().expect("object").extend(more);
    }
    json!({
        "name": "shop", "runtime": "yaml",
        "resources": { "docs": { "type": "aws:s3/bucket:Bucket", "properties": properties } },
        "outputs": { "bucketName": "docs-1234", "password": { "fn::secret": "hunter2" } }
    })
}

/// A stack whose worker plans Pulumi environments with the stand-in; the backend directory.
async fn stack() -> (Stack, PathBuf) {
    stack_with(&[]).await
}

/// [`stack`] with more environment for the processes.
pub(crate) async fn stack_with(env: &[(&str, &str)]) -> (Stack, PathBuf) {
    let mut all = vec![("RUNTIME_CLOUD_PULUMI_BINARY".to_owned(), stand_in())];
    all.extend(env.iter().map(|(k, v)| (k.to_string(), v.to_string())));
    let stack = Stack::with(StackOptions {
        env: all,
        ..Default::default()
    })
    .await;
    let state = stack.data_dir.path().join("pulumi-state");
    (stack, state)
}

async fn pulumi_environment(api: &Api, env: &str, class: &str, state: &Path) {
    pulumi_environment_with(api, env, class, state, json!({})).await;
}

/// A Pulumi environment whose runner target has `extra` fields too (`passphraseRef`).
async fn pulumi_environment_with(api: &Api, env: &str, class: &str, state: &Path, extra: Value) {
    let mut runner = json!({ "kind": "pulumi", "stack": format!("acme/shop/{env}"),
                             "backendUrl": format!("file://{}", state.display()) });
    if let (Some(r), Value::Object(more)) = (runner.as_object_mut(), extra) {
        r.extend(more);
    }
    api.post(
        "/factory/environments",
        json!({ "environmentId": env, "projectId": "shop", "class": class,
                "target": { "runner": runner } }),
    )
    .await
    .expect(201);
}

async fn declare(api: &Api, env: &str, program_ref: &str, commit: &str) {
    api.post(
        "/factory/provisioning/specifications",
        json!({ "environmentId": env, "kind": "environment", "programRef": program_ref,
                "programVersion": commit, "configRefs": {}, "secretRefs": {}, "workloads": [] }),
    )
    .await
    .expect(201);
}

/// A stack with a Pulumi environment `env` of `class` whose specification is `prog`, committed
/// to a new repository: the stack, its backend directory, the operator, the repository and the
/// commit.
async fn declared(
    env: &str,
    class: &str,
    prog: Value,
) -> (Stack, PathBuf, Api, Repository, String) {
    let (stack, state) = stack().await;
    let api = stack.operator("acme");
    let repo = Repository::new();
    let commit = repo.commit(&prog);
    pulumi_environment(&api, env, class, &state).await;
    declare(&api, env, &repo.program_ref(), &commit).await;
    (stack, state, api, repo, commit)
}

/// A production stack plans from a real commit, waits for approval, applies that plan and
/// shows the outputs with the secret one redacted.
#[tokio::test]
async fn a_production_stack_plans_from_its_commit_waits_and_applies_the_approved_plan() {
    let (stack, state, api, repo, commit) =
        declared("prod", "production", program(json!({}))).await;

    let id = api.plan_run("prod", "baseline").await;
    let run = api.wait_state(&id, "AwaitingApproval").await;
    let plan = &run["planReceipt"];
    assert_eq!(
        plan["adds"],
        json!([{ "name": "docs", "kind": "aws:s3/bucket:Bucket" }]),
        "{run}"
    );
    assert_eq!(plan["programVersion"], commit.as_str());
    // The plan file is kept in the artifact store (here the data dir's), by its inputs hash:
    // the worker that applies it need not be the one that planned.
    let hash = text(&plan["inputsHash"]);
    let kept = stack.data_path().join(format!(
        "artifacts/plans/{}/prod/{}.json",
        api.tenant,
        hash.trim_start_matches("sha256:")
    ));
    assert!(kept.is_file(), "{} kept", kept.display());
    api.decide(&id, "approve").await.expect(202);
    let run = api.wait_state(&id, "Applied").await;
    let receipt = &run["applyReceipt"];
    assert_eq!(
        receipt["outputs"],
        json!({ "bucketName": "docs-1234", "password": "[secret]" }),
        "{run}"
    );
    assert_eq!(receipt["runnerVersion"], "pulumi/3.240.0");
    // The stack's history names the run: a retried apply finds it.
    let saved: Value = serde_json::from_str(
        &std::fs::read_to_string(state.join("acme__shop__prod.json")).expect("stack state"),
    )
    .expect("state json");
    assert_eq!(
        saved["history"][0]["message"],
        format!("runtime-cloud run {id}")
    );
    assert_eq!(saved["history"][0]["result"], "succeeded");
    // Nothing of the secret output reached the read tables or the events.
    let db = String::from_utf8_lossy(&stack.read_db_bytes()).into_owned();
    assert!(
        !db.contains("hunter2"),
        "the secret output reached the read DB"
    );

    // A change: planned as a change of the changed property.
    let next = repo.commit(&program(json!({ "acl": "public-read" })));
    declare(&api, "prod", &repo.program_ref(), &next).await;
    let id = api.plan_run("prod", "promotion").await;
    let run = api.wait_state(&id, "AwaitingApproval").await;
    assert_eq!(
        run["planReceipt"]["changes"],
        json!([{ "name": "docs", "kind": "aws:s3/bucket:Bucket", "fields": ["acl"] }])
    );
}

/// On the defaults a user gets (`runtime-cloud` started in a directory, data in the relative
/// `.data`), the CLI, which runs in the program's checkout, is handed absolute paths: the plan
/// it saves is the one kept and applied.
#[tokio::test]
async fn a_pulumi_run_applies_on_the_default_relative_data_dir() {
    let stack = Stack::with(StackOptions {
        env: vec![("RUNTIME_CLOUD_PULUMI_BINARY".to_owned(), stand_in())],
        default_data_dir: true,
        ..Default::default()
    })
    .await;
    let state = stack.data_path().join("pulumi-state");
    let api = stack.operator("acme");
    let repo = Repository::new();
    let commit = repo.commit(&program(json!({})));
    pulumi_environment(&api, "dev", "non-production", &state).await;
    declare(&api, "dev", &repo.program_ref(), &commit).await;
    let id = api.plan_run("dev", "baseline").await;
    let run = api.wait_state(&id, "Applied").await;
    assert_eq!(run["applyReceipt"]["result"], "succeeded", "{run}");
    let hash = text(&run["planReceipt"]["inputsHash"]);
    let kept = stack.data_dir.path().join(format!(
        ".data/artifacts/plans/{}/dev/{}.json",
        api.tenant,
        hash.trim_start_matches("sha256:")
    ));
    assert!(kept.is_file(), "{} kept under ./.data", kept.display());
}

/// A commit the repository does not have fails the run at plan, naming the reference.
#[tokio::test]
async fn a_missing_commit_fails_the_plan_with_the_reference() {
    let (stack, state) = stack().await;
    let api = stack.operator("acme");
    let repo = Repository::new();
    repo.commit(&program(json!({})));
    pulumi_environment(&api, "dev", "non-production", &state).await;
    let missing = "0123456789abcdef0123456789abcdef01234567";
    declare(&api, "dev", &repo.program_ref(), missing).await;
    let id = api.plan_run("dev", "baseline").await;
    let run = api.wait_state(&id, "Failed").await;
    let reason = text(&run["reason"]);
    assert!(
        reason.contains(missing) && reason.contains("not found"),
        "{run}"
    );
    assert!(run["planReceipt"].is_null());
}

/// A failed update names the failing resource and Pulumi's diagnostic; nothing is retried.
#[tokio::test]
async fn a_failed_update_names_its_resource() {
    let (stack, state) = stack().await;
    let api = stack.operator("acme");
    let repo = Repository::new();
    let commit = repo.commit(&program(
        json!({ "failOnApply": "creating bucket: AccessDenied" }),
    ));
    pulumi_environment(&api, "dev", "non-production", &state).await;
    declare(&api, "dev", &repo.program_ref(), &commit).await;
    let id = api.plan_run("dev", "baseline").await;
    let run = api.wait_state(&id, "Failed").await;
    let reason = text(&run["applyReceipt"]["reason"]);
    assert!(
        reason.contains("urn:pulumi:dev::shop::aws:s3/bucket:Bucket::docs")
            && reason.contains("AccessDenied"),
        "{run}"
    );
    assert_eq!(run["applyReceipt"]["result"], "failed");
}

/// Every `pulumi` process of a run's plan and apply runs under the project's quota: on
/// `cpuPerAttempt` CPUs (rounded up) with `memoryGbPerAttempt` of data segment, as the
/// processes themselves read them from the OS.
#[tokio::test]
async fn runner_processes_run_under_the_quotas_cpu_and_memory_limits() {
    let limits_log = tempfile::NamedTempFile::new().expect("temp file");
    let log_path = limits_log.path().display().to_string();
    let (stack, state) = stack_with(&[("PULUMI_STAND_IN_LIMITS", &log_path)]).await;
    stack
        .platform_admin("acme")
        .put(
            "/factory/capacity/quotas/shop",
            json!({ "concurrentRuns": 5, "concurrentSandboxes": 5, "cpuPerAttempt": 0.5,
                    "memoryGbPerAttempt": 1.5, "executionMinutesPerDay": 600 }),
        )
        .await
        .expect(200);
    let api = stack.operator("acme");
    let repo = Repository::new();
    let commit = repo.commit(&program(json!({})));
    pulumi_environment(&api, "dev", "non-production", &state).await;
    declare(&api, "dev", &repo.program_ref(), &commit).await;
    let id = api.plan_run("dev", "baseline").await;
    api.wait_state(&id, "Applied").await;

    let recorded = std::fs::read_to_string(limits_log.path()).expect("limits log");
    let commands: Vec<Value> = recorded
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect();
    let of = |name: &str| {
        commands
            .iter()
            .filter(|c| c["command"][0] == name)
            .collect::<Vec<_>>()
    };
    // The plan's preview and the apply's update, at least; every one under the limits.
    assert!(
        !of("preview").is_empty() && !of("up").is_empty(),
        "{recorded}"
    );
    for c in of("preview").into_iter().chain(of("up")) {
        assert_eq!(c["dataLimit"], json!(3u64 << 29), "1.5 GiB: {c}");
        assert_eq!(c["cpus"], json!([0]), "0.5 CPU rounds up to one: {c}");
    }
}

/// A plan that no longer matches the stack when it is applied fails instead of applying
/// something else: here the bucket was deleted out of band after the plan was approved.
#[tokio::test]
async fn a_plan_that_no_longer_matches_fails_at_apply() {
    // The stack's processes live until the end of the test.
    let (_stack, state, api, repo, _) = declared("prod", "production", program(json!({}))).await;
    let id = api.plan_run("prod", "baseline").await;
    api.wait_state(&id, "AwaitingApproval").await;
    api.decide(&id, "approve").await.expect(202);
    api.wait_state(&id, "Applied").await;

    // The next plan changes the bucket; before it is approved, someone deletes the bucket.
    let next = repo.commit(&program(json!({ "acl": "public-read" })));
    declare(&api, "prod", &repo.program_ref(), &next).await;
    let id = api.plan_run("prod", "promotion").await;
    api.wait_state(&id, "AwaitingApproval").await;
    let file = state.join("acme__shop__prod.json");
    let mut saved: Value =
        serde_json::from_str(&std::fs::read_to_string(&file).expect("state")).expect("json");
    saved["resources"] = json!({});
    std::fs::write(&file, saved.to_string()).expect("write state");
    api.decide(&id, "approve").await.expect(202);
    let run = api.wait_state(&id, "Failed").await;
    assert!(
        text(&run["applyReceipt"]["reason"]).contains("violates plan"),
        "{run}"
    );
}

/// The stack's state as the stand-in keeps it.
fn saved(state: &Path, env: &str) -> Value {
    let file = state.join(format!("acme__shop__{env}.json"));
    std::fs::read_to_string(file)
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok())
        .unwrap_or(Value::Null)
}

/// A worker SIGKILLed while `pulumi up` runs: the CLI dies with it, the retried apply on the
/// next worker finds the run's update unfinished in the stack's history, cancels it (the lock
/// it left) and applies the approved plan once.
#[tokio::test]
async fn worker_killed_mid_pulumi_apply_applies_once() {
    let (mut stack, state, api, _repo, _) = declared(
        "dev",
        "non-production",
        program(json!({ "applySeconds": 3 })),
    )
    .await;
    let id = api.plan_run("dev", "baseline").await;
    crate::common::eventually(60, "the update to start", || async {
        (saved(&state, "dev")["history"][0]["result"] == "in-progress").then_some(())
    })
    .await;
    stack.kill_worker();
    stack.start_worker();
    let run = api.wait_state(&id, "Applied").await;
    assert_eq!(run["applyReceipt"]["result"], "succeeded", "{run}");
    let saved = saved(&state, "dev");
    let tag = format!("runtime-cloud run {id}");
    let updates: Vec<&Value> = saved["history"]
        .as_array()
        .map(|h| h.iter().filter(|u| u["message"] == tag.as_str()).collect())
        .unwrap_or_default();
    let finished: Vec<&&Value> = updates
        .iter()
        .filter(|u| u["result"] == "succeeded")
        .collect();
    assert_eq!(finished.len(), 1, "applied once: {saved}");
    assert_eq!(
        finished[0]["resourceChanges"],
        json!({ "create": 1 }),
        "{saved}"
    );
    assert_eq!(saved["lock"], Value::Null, "no lock left: {saved}");
    // The killed worker's CLI died with it: its update never finished.
    assert_eq!(updates.len(), 2, "{saved}");
    assert_eq!(updates[1]["result"], "in-progress", "{saved}");
}

/// Configuration and secret references (and the stack's `passphraseRef`) resolve at plan and
/// apply time only: the program gets
/// them as stack config (the secret as secret config, on the CLI's stdin), the outputs show the
/// configuration and redact the secret, and the secret's value is nowhere in the product: not
/// in the read DB, the events, the workflow history or the logs. A reference that does not
/// resolve fails the plan with the reference, never a value.
#[tokio::test]
async fn references_resolve_at_apply_time_and_the_secret_is_nowhere() {
    const SECRET: &str = "pa55-Only-The-Runner-Sees";
    const PASSPHRASE: &str = "stack-Passphrase-Only-The-Runner-Sees";
    let (stack, state) = stack().await;
    let secrets = stack.data_dir.path().join("secrets.toml");
    std::fs::write(
        &secrets,
        format!("[db]\npassword = \"{SECRET}\"\n[pulumi]\npassphrase = \"{PASSPHRASE}\"\n"),
    )
    .expect("secrets file");
    let api = stack.operator("acme");
    let repo = Repository::new();
    let mut prog = program(json!({ "printConfig": "dbPassword" }));
    prog["outputs"] = json!({
        "region": { "fn::config": "region" },
        "dbPassword": { "fn::secret": { "fn::config": "dbPassword" } },
    });
    let commit = repo.commit(&prog);
    let passphrase_ref = format!("file://{}#pulumi.passphrase", secrets.display());
    let extra = json!({ "passphraseRef": passphrase_ref });
    pulumi_environment_with(&api, "dev", "non-production", &state, extra).await;
    let secret_ref = format!("file://{}#db.password", secrets.display());
    let spec = |config: &str| {
        json!({ "environmentId": "dev", "kind": "environment", "programRef": repo.program_ref(),
                "programVersion": commit, "configRefs": { "region": config },
                "secretRefs": { "dbPassword": secret_ref }, "workloads": [] })
    };
    // HOME is set for every process: its value is the configuration.
    api.post("/factory/provisioning/specifications", spec("env://HOME"))
        .await
        .expect(201);
    let id = api.plan_run("dev", "baseline").await;
    let run = api.wait_state(&id, "Applied").await;
    let outputs = &run["applyReceipt"]["outputs"];
    assert_eq!(outputs["dbPassword"], "[secret]", "{run}");
    assert_eq!(
        outputs["region"],
        std::env::var("HOME").unwrap_or_default().as_str()
    );

    let db = String::from_utf8_lossy(&stack.read_db_bytes()).into_owned();
    assert!(
        db.contains(&secret_ref),
        "the check reads where the rows are"
    );
    assert!(!db.contains(SECRET), "the secret reached the read DB");
    assert!(
        !db.contains(PASSPHRASE),
        "the passphrase reached the read DB"
    );
    assert!(
        !stack.logs().contains(PASSPHRASE),
        "the passphrase reached the logs"
    );
    // The stack was created with the passphrase, and every later command opened it.
    let created = saved(&state, "dev");
    assert!(created["passphraseSha"].is_string(), "{created}");
    assert!(
        !stack.logs().contains(SECRET),
        "the secret reached the logs"
    );
    // The logs: every command and what it printed, the secret the program printed redacted.
    let logs = api
        .get(&format!("/factory/provisioning/runs/{id}/logs"))
        .await;
    assert_eq!(logs.status, 200, "{:?}", logs.body);
    let logs = text(&logs.body);
    assert!(
        logs.contains("pulumi preview") && logs.contains("pulumi up"),
        "{logs}"
    );
    assert!(logs.contains("dbPassword is [secret]"), "{logs}");
    assert!(
        !logs.contains(SECRET) && !logs.contains(PASSPHRASE),
        "{logs}"
    );
    let apply = text(
        &api.get(&format!("/factory/provisioning/runs/{id}/logs?phase=apply"))
            .await
            .expect(200),
    );
    assert!(
        apply.contains("pulumi up") && !apply.contains("pulumi preview"),
        "{apply}"
    );
    assert_eq!(
        run["logsRef"],
        format!("/factory/provisioning/runs/{id}/logs")
    );
    let artifacts = std::fs::read_dir(stack.data_dir.path().join("artifacts/runs"))
        .map(|d| d.count())
        .unwrap_or_default();
    assert_eq!(artifacts, 1, "one tenant's logs");
    let history = stack.history_payloads(&format!("provisioning-run/{id}"));
    assert!(
        history.contains(&secret_ref),
        "the history carries the reference"
    );
    assert!(
        !history.contains(SECRET),
        "the secret reached the workflow history"
    );

    // A reference that does not resolve: the plan fails naming it.
    api.post(
        "/factory/provisioning/specifications",
        spec("env://RUNTIME_CLOUD_NO_SUCH_VARIABLE"),
    )
    .await
    .expect(201);
    let id = api.plan_run("dev", "reconciliation").await;
    let run = api.wait_state(&id, "Failed").await;
    let reason = text(&run["reason"]);
    assert!(
        reason.contains("env://RUNTIME_CLOUD_NO_SUCH_VARIABLE") && reason.contains("region"),
        "{run}"
    );
}

/// An apply that outlives `ApplyTimeoutMinutes` is stopped: its CLI is killed, the stack is
/// unlocked with `pulumi cancel`, and the run fails with the reason, never retried.
#[tokio::test]
async fn an_apply_past_its_timeout_is_cancelled_and_leaves_the_stack_unlocked() {
    let (stack, state) =
        stack_with(&[("RuntimeCloud__Provisioning__ApplyTimeoutMinutes", "0.2")]).await;
    let api = stack.operator("acme");
    let repo = Repository::new();
    let commit = repo.commit(&program(json!({ "applySeconds": 120 })));
    pulumi_environment(&api, "dev", "non-production", &state).await;
    declare(&api, "dev", &repo.program_ref(), &commit).await;
    let id = api.plan_run("dev", "baseline").await;
    let run = api.wait_state(&id, "Failed").await;
    let reason = text(&run["applyReceipt"]["reason"]);
    assert!(reason.contains("ApplyTimeoutMinutes"), "{run}");
    let saved = saved(&state, "dev");
    assert_eq!(
        saved["lock"],
        Value::Null,
        "the stack is not left locked: {saved}"
    );
    assert_eq!(
        saved["history"][0]["result"], "in-progress",
        "stopped, not finished: {saved}"
    );
    assert_eq!(
        saved["history"].as_array().map(Vec::len),
        Some(1),
        "not retried: {saved}"
    );
    let logs = text(
        &api.get(&format!("/factory/provisioning/runs/{id}/logs?phase=apply"))
            .await
            .expect(200),
    );
    assert!(
        logs.contains("pulumi cancel --yes") && logs.contains("ApplyTimeoutMinutes"),
        "{logs}"
    );
}

/// A `secretbroker://` reference is resolved by the Secret Broker (the stand-in under
/// `tests/common`, speaking the documented contract) at plan and apply time; the value reaches
/// the program and nowhere else, and a reference the broker does not know fails the plan.
#[tokio::test]
async fn a_secret_broker_reference_reaches_the_program_and_nowhere_else() {
    use crate::common::secret_broker_stand_in::{SecretBrokerStandIn, TOKEN};
    const VALUE: &str = "broker-Held-Api-Key-Value";
    let broker = SecretBrokerStandIn::start().await;
    broker.hold("secretbroker://shop/api-key", VALUE);
    let stack = Stack::with(StackOptions {
        env: vec![
            ("RUNTIME_CLOUD_PULUMI_BINARY".into(), stand_in()),
            ("RUNTIME_CLOUD_SECRET_BROKER_URL".into(), broker.url.clone()),
            ("RUNTIME_CLOUD_SECRET_BROKER_TOKEN".into(), TOKEN.into()),
        ],
        ..Default::default()
    })
    .await;
    let state = stack.data_dir.path().join("pulumi-state");
    let api = stack.operator("acme");
    let repo = Repository::new();
    let mut prog = program(json!({ "printConfig": "apiKey" }));
    prog["outputs"] = json!({ "apiKey": { "fn::secret": { "fn::config": "apiKey" } } });
    let commit = repo.commit(&prog);
    pulumi_environment(&api, "dev", "non-production", &state).await;
    let spec = |reference: &str| {
        json!({ "environmentId": "dev", "kind": "environment", "programRef": repo.program_ref(),
                "programVersion": commit, "configRefs": {},
                "secretRefs": { "apiKey": reference }, "workloads": [] })
    };
    api.post(
        "/factory/provisioning/specifications",
        spec("secretbroker://shop/api-key"),
    )
    .await
    .expect(201);
    let id = api.plan_run("dev", "baseline").await;
    let run = api.wait_state(&id, "Applied").await;
    assert_eq!(
        run["applyReceipt"]["outputs"]["apiKey"], "[secret]",
        "{run}"
    );
    // Asked at plan and at apply.
    assert_eq!(broker.asked(), ["secretbroker://shop/api-key"; 2]);
    let logs = text(
        &api.get(&format!("/factory/provisioning/runs/{id}/logs"))
            .await
            .expect(200),
    );
    assert!(
        logs.contains("apiKey is [secret]") && !logs.contains(VALUE),
        "{logs}"
    );
    let db = String::from_utf8_lossy(&stack.read_db_bytes()).into_owned();
    assert!(!db.contains(VALUE) && !stack.logs().contains(VALUE));
    assert!(
        !stack
            .history_payloads(&format!("provisioning-run/{id}"))
            .contains(VALUE)
    );

    api.post(
        "/factory/provisioning/specifications",
        spec("secretbroker://shop/unknown"),
    )
    .await
    .expect(201);
    let id = api.plan_run("dev", "reconciliation").await;
    let run = api.wait_state(&id, "Failed").await;
    assert!(
        text(&run["reason"]).contains("secretbroker://shop/unknown"),
        "{run}"
    );
}

/// A long update reports how far it is: the apply activity's heartbeat carries the engine
/// events' count of finished resources against the plan's, visible to `temporal workflow
/// describe` while `pulumi up` still runs.
#[tokio::test]
async fn a_long_update_heartbeats_its_progress_in_resources() {
    let prog = json!({
        "name": "shop", "runtime": "yaml",
        "resources": {
            "docs": { "type": "aws:s3/bucket:Bucket", "properties": { "acl": "private" } },
            "media": { "type": "aws:s3/bucket:Bucket",
                       "properties": { "acl": "private", "applySeconds": 12 } }
        },
        "outputs": {}
    });
    let (stack, _state, api, _repo, _) = declared("dev", "non-production", prog).await;
    let id = api.plan_run("dev", "baseline").await;
    let workflow = runtime_cloud_workflows::ids::run_workflow_id(&id);
    crate::common::eventually(60, "a heartbeat of 1 of 2 resources done", || {
        let described = stack.describe(&workflow).unwrap_or_default();
        // The CLI shows JSON payloads decoded; base64 `data` is decoded too, either way.
        let pending = &described["pendingActivities"];
        let beat = format!("{pending} {}", crate::common::decoded_payloads(pending));
        let seen = beat.contains("\"resourcesDone\":1") && beat.contains("\"resourcesTotal\":2");
        async move { seen.then_some(()) }
    })
    .await;
    let run = api.wait_state(&id, "Applied").await;
    assert_eq!(run["applyReceipt"]["result"], "succeeded", "{run}");
}

/// A private program repository: the Git server (the real `git http-backend` behind Basic
/// authentication) serves the runner with the credential the target's
/// `repositoryCredentialRef` names (resolved from a file); the token is nowhere in the product.
/// Another tenant naming the same repository and commit without a credential is refused by the
/// server: the commit the first tenant fetched is not served to it from a cache.
#[tokio::test]
async fn a_private_repository_is_fetched_with_the_credential_its_reference_names() {
    let (stack, state) = stack().await;
    let api = stack.operator("acme");
    let repo = Repository::new();
    let commit = repo.commit(&program(json!({})));
    let token = "glpat-private-7f3a9c";
    let server =
        crate::common::git_http::serve(repo.dir.path().to_path_buf(), "ci-bot", token).await;
    let program_ref = format!("{}//shop", server.url);

    let secrets = tempfile::tempdir().expect("secrets dir");
    let file = secrets.path().join("git.toml");
    std::fs::write(&file, format!("infra = \"ci-bot:{token}\"\n")).expect("secrets file");
    let credential = format!("file://{}#infra", file.display());
    pulumi_environment_with(
        &api,
        "dev",
        "non-production",
        &state,
        json!({ "repositoryCredentialRef": credential }),
    )
    .await;
    declare(&api, "dev", &program_ref, &commit).await;
    let id = api.plan_run("dev", "baseline").await;
    let run = api.wait_state(&id, "Applied").await;
    assert_eq!(run["planReceipt"]["programVersion"], commit.as_str());
    let shown = api.get("/factory/environments/dev").await.expect(200);
    assert_eq!(
        shown["target"]["runner"]["repositoryCredentialRef"],
        credential.as_str(),
        "{shown}"
    );

    let other = stack.operator("globex");
    pulumi_environment(&other, "dev", "non-production", &state).await;
    declare(&other, "dev", &program_ref, &commit).await;
    let refused = other.plan_run("dev", "baseline").await;
    // Its plan's log says why (the plan is retried: a credential may yet be added).
    crate::common::eventually(60, "the refused plan's log", || {
        let other = other.clone();
        let path = format!("/factory/provisioning/runs/{refused}/logs?phase=plan");
        async move {
            let got = other.get(&path).await;
            let logs = text(&got.body);
            (got.status == 200 && logs.contains("Authentication failed")).then_some(())
        }
    })
    .await;
    let run = other
        .get(&format!("/factory/provisioning/runs/{refused}"))
        .await
        .expect(200);
    assert!(run["planReceipt"].is_null(), "nothing planned: {run}");

    let db = String::from_utf8_lossy(&stack.read_db_bytes()).into_owned();
    let history = stack.history_payloads(&runtime_cloud_workflows::ids::run_workflow_id(&id));
    let logs = text(
        &api.get(&format!("/factory/provisioning/runs/{id}/logs"))
            .await
            .expect(200),
    );
    for (what, text) in [
        ("the read DB", &db),
        ("the run's history", &history),
        ("the logs", &logs),
    ] {
        assert!(!text.contains(token), "the token reached {what}");
    }
    let mirrors = stack.data_path().join("programs/mirrors");
    let config = std::fs::read_dir(&mirrors)
        .expect("mirrors")
        .filter_map(|m| std::fs::read_to_string(m.ok()?.path().join("config")).ok())
        .collect::<String>();
    assert!(config.contains(&server.url), "{config}");
    assert!(
        !config.contains(token),
        "the token in a mirror's config: {config}"
    );
}

/// The observer reads a Pulumi stack's drift with `pulumi refresh --preview-only`: a resource
/// changed out of band is a `configuration` finding, one deleted out of band `missing`, each
/// with its URN as the resource; nothing of the stack changed by looking; the accepted proposal
/// re-applies the program against the refreshed cloud, and both findings resolve.
#[tokio::test]
async fn the_observer_finds_resources_changed_or_deleted_out_of_band() {
    // Each observation here is asked for (the watches are tests/kubernetes_watch.rs's).
    let (stack, state) = stack_with(&[
        (
            "RuntimeCloud__Inventory__AutoAcceptNonDestructiveOutsideProduction",
            "false",
        ),
        ("RUNTIME_CLOUD_KUBERNETES_WATCH", "false"),
    ])
    .await;
    let api = stack.operator("acme");
    let repo = Repository::new();
    let prog = json!({
        "name": "shop", "runtime": "yaml",
        "resources": {
            "docs": { "type": "aws:s3/bucket:Bucket", "properties": { "acl": "private" } },
            "logs": { "type": "aws:s3/bucket:Bucket", "properties": { "acl": "private" } }
        },
        "outputs": {}
    });
    let commit = repo.commit(&prog);
    pulumi_environment(&api, "dev", "non-production", &state).await;
    declare(&api, "dev", &repo.program_ref(), &commit).await;
    let id = api.plan_run("dev", "baseline").await;
    api.wait_state(&id, "Applied").await;

    let urn = |name: &str| format!("urn:pulumi:dev::shop::aws:s3/bucket:Bucket::{name}");
    let file = state.join("acme__shop__dev.json");
    let mut saved: Value =
        serde_json::from_str(&std::fs::read_to_string(&file).expect("state")).expect("json");
    saved["cloud"] = json!({ urn("docs"): { "acl": "public-read" }, urn("logs"): null });
    std::fs::write(&file, saved.to_string()).expect("write state");

    stack.trigger_schedule("observation-sweep");
    let open = crate::common::eventually(60, "the sweep to find the stack's drift", || {
        let api = api.clone();
        async move {
            let open = api.drift("dev", Some("open")).await;
            (open.len() == 2).then_some(open)
        }
    })
    .await;
    let found = |kind: &str| {
        open.iter()
            .find(|f| f["kind"] == kind)
            .unwrap_or_else(|| panic!("a {kind} finding in {open:?}"))
            .clone()
    };
    assert_eq!(found("configuration")["resource"], urn("docs").as_str());
    assert_eq!(found("missing")["resource"], urn("logs").as_str());
    let proposal = crate::common::eventually(60, "the proposal", || {
        let api = api.clone();
        async move { api.proposals("dev").await.into_iter().next() }
    })
    .await;
    assert_eq!(proposal["direction"], "apply-declared", "{proposal}");
    assert_eq!(proposal["destructive"], false, "{proposal}");
    // Looking changed nothing: the stack still records both buckets as applied.
    let now: Value =
        serde_json::from_str(&std::fs::read_to_string(&file).expect("state")).expect("json");
    assert_eq!(now["resources"], saved["resources"]);
    assert_eq!(now["history"], saved["history"]);

    // Accepted, the reconciliation plans against the cloud as it is (`--refresh`): the ACL
    // is set back and the deleted bucket created again; the next observation resolves both.
    let id = text(&proposal["proposalId"]);
    api.post(
        &format!("/factory/reconciliation/proposals/{id}/decide"),
        json!({ "decision": "accept" }),
    )
    .await
    .expect(202);
    let accepted = api.wait_proposal("dev", &id, "Accepted").await;
    let run_id = text(&accepted["provisioningRunId"]);
    let run = api.wait_state(&run_id, "Applied").await;
    assert_eq!(
        run["planReceipt"]["adds"],
        json!([{ "name": "logs", "kind": "aws:s3/bucket:Bucket" }]),
        "{run}"
    );
    assert_eq!(run["planReceipt"]["changes"][0]["name"], "docs", "{run}");
    api.wait_observed_after(&stack, &run_id).await;
    assert!(api.drift("dev", Some("open")).await.is_empty());
    assert_eq!(api.drift("dev", Some("resolved")).await.len(), 2);
}

/// Kubernetes drift of every kind, found by the Kubernetes observer with who made it, proposed,
/// accepted and reconciled by a Pulumi run, then resolved by the observation after it: the
/// program's Deployments are applied server-side to the cluster (the stand-in API server) with
/// the product's field manager; `kubectl set image`, `kubectl scale`, two `kubectl edit`s and
/// `kubectl delete` are planned back (`pulumi preview --refresh`) and applied with ownership
/// taken back; an undeclared Deployment created by hand is adopted into the specification.
#[tokio::test]
async fn kubernetes_drift_of_every_kind_is_reconciled_by_a_pulumi_run() {
    use crate::common::kube_stand_in::KubeStandIn;
    use crate::kubernetes::{change_by_hand, declared, deployment, kubeconfig};
    use runtime_cloud_models::observation::FIELD_MANAGER;
    let cluster = KubeStandIn::start().await;
    let (_kubeconfig_dir, kubeconfig_ref) = kubeconfig(&cluster);
    // Each observation here is asked for (the watches are tests/kubernetes_watch.rs's).
    let (stack, state) = stack_with(&[
        (
            "RuntimeCloud__Inventory__AutoAcceptNonDestructiveOutsideProduction",
            "false",
        ),
        ("RUNTIME_CLOUD_KUBERNETES_WATCH", "false"),
    ])
    .await;
    let api = stack.operator("acme");
    let names = ["api", "web", "worker", "billing", "cron"];
    // The program: each workload a Deployment, as `kubectl get -o json` would show its spec,
    // annotated with the product's field manager.
    let resources: serde_json::Map<String, Value> = names
        .iter()
        .map(|name| {
            let mut object = deployment(name, &format!("registry.example.com/shop/{name}:1.0.0"), 2, 2);
            object["metadata"] = json!({ "name": name, "namespace": "shop", "labels": { "app": name },
                                         "annotations": { "pulumi.com/patchFieldManager": FIELD_MANAGER } });
            let properties = json!({ "metadata": object["metadata"], "spec": object["spec"] });
            (name.to_string(), json!({ "type": "kubernetes:apps/v1:Deployment", "properties": properties }))
        })
        .collect();
    let repo = Repository::new();
    let commit = repo.commit(&json!({ "name": "shop", "runtime": "yaml",
                                      "resources": resources, "outputs": {} }));
    crate::kubernetes::register_pulumi_run(&api, "non-production", &state, &kubeconfig_ref).await;
    let declare = |workloads: Vec<Value>| {
        let api = api.clone();
        let (program_ref, commit, kubeconfig_ref) =
            (repo.program_ref(), commit.clone(), kubeconfig_ref.clone());
        async move {
            api.post(
                "/factory/provisioning/specifications",
                json!({ "environmentId": "k8s", "kind": "environment", "programRef": program_ref,
                        "programVersion": commit, "configRefs": {},
                        "secretRefs": { "kubernetes:kubeconfig": kubeconfig_ref },
                        "workloads": workloads }),
            )
            .await
            .expect(201);
        }
    };
    declare(names.iter().map(|n| declared(n, "1.0.0", 2)).collect()).await;
    let baseline = api.plan_run("k8s", "baseline").await;
    api.wait_state(&baseline, "Applied").await;
    api.wait_observed_after(&stack, &baseline).await;
    assert!(
        api.drift("k8s", Some("open")).await.is_empty(),
        "as applied"
    );
    let live = cluster.get("shop", "deployments", "api");
    let appliers: Vec<(&str, &str)> = live["metadata"]["managedFields"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|e| Some((e["manager"].as_str()?, e["operation"].as_str()?)))
                .collect()
        })
        .unwrap_or_default();
    assert!(appliers.contains(&(FIELD_MANAGER, "Apply")), "{appliers:?}");

    // What people with cluster access do.
    change_by_hand(&cluster);

    let outcome = api.observe(&stack, "k8s").await;
    let inventory = api
        .get("/factory/environments/k8s/inventory")
        .await
        .expect(200);
    assert_eq!(
        outcome["newFindings"], 5,
        "{outcome} {}",
        inventory["lastError"]
    );
    let open = api.drift("k8s", Some("open")).await;
    let manager = |kind: &str| {
        open.iter()
            .find(|f| f["kind"] == kind)
            .map(|f| f["changedBy"]["manager"].clone())
            .unwrap_or_else(|| panic!("a {kind} finding in {open:?}"))
    };
    assert_eq!(manager("version"), "kubectl-set");
    assert_eq!(manager("replica"), "kubectl");
    assert_eq!(manager("configuration"), "kubectl-edit");
    assert_eq!(manager("secret-binding"), "kubectl-edit");
    assert_eq!(manager("missing"), Value::Null);
    let proposal = text(&outcome["newProposal"]["proposalId"]);
    let proposed = api.wait_proposal("k8s", &proposal, "Proposed").await;
    assert_eq!(proposed["direction"], "apply-declared", "{proposed}");
    assert_eq!(proposed["destructive"], false, "{proposed}");
    assert_eq!(
        proposed["planSummary"]["changedBy"]
            .as_array()
            .map(Vec::len),
        Some(4),
        "who made each difference, the deleted one aside: {proposed}"
    );
    api.post(
        &format!("/factory/reconciliation/proposals/{proposal}/decide"),
        json!({ "decision": "accept" }),
    )
    .await
    .expect(202);
    let accepted = api.wait_proposal("k8s", &proposal, "Accepted").await;
    let run = text(&accepted["provisioningRunId"]);
    let applied = api.wait_state(&run, "Applied").await;
    let plan = &applied["planReceipt"];
    assert_eq!(
        plan["adds"],
        json!([{ "name": "cron", "kind": "kubernetes:apps/v1:Deployment" }]),
        "cron is created again: {applied}"
    );
    assert_eq!(
        plan["changes"].as_array().map(Vec::len),
        Some(4),
        "api, web, worker, billing are applied again: {applied}"
    );
    api.wait_observed_after(&stack, &run).await;
    api.wait_proposal("k8s", &proposal, "Applied").await;
    assert!(
        api.drift("k8s", Some("open")).await.is_empty(),
        "every difference reconciled: {:?}",
        api.drift("k8s", Some("open")).await
    );
    assert_eq!(api.drift("k8s", Some("resolved")).await.len(), 5);
    // The product took its fields back: `kubectl scale` owns nothing any more.
    let web = cluster.get("shop", "deployments", "web");
    assert_eq!(web["spec"]["replicas"], 2);
    let owners: Vec<&str> = web["metadata"]["managedFields"]
        .as_array()
        .map(|a| a.iter().filter_map(|e| e["manager"].as_str()).collect())
        .unwrap_or_default();
    assert!(!owners.contains(&"kubectl"), "{owners:?}");

    // An undeclared Deployment created by hand: adopted into the specification, not deleted.
    cluster.create(
        "shop",
        deployment("debug", "busybox:1.36", 1, 1),
        "kubectl-create",
    );
    let outcome = api.observe(&stack, "k8s").await;
    let adopt = text(&outcome["newProposal"]["proposalId"]);
    let proposed = api.wait_proposal("k8s", &adopt, "Proposed").await;
    assert_eq!(proposed["direction"], "adopt-observed", "{proposed}");
    assert_eq!(
        proposed["planSummary"]["changedBy"][0]["manager"],
        "kubectl-create"
    );
    api.post(
        &format!("/factory/reconciliation/proposals/{adopt}/decide"),
        json!({ "decision": "accept" }),
    )
    .await
    .expect(202);
    let accepted = api.wait_proposal("k8s", &adopt, "Accepted").await;
    let run = text(&accepted["provisioningRunId"]);
    api.wait_state(&run, "Applied").await;
    api.wait_observed_after(&stack, &run).await;
    assert!(api.drift("k8s", Some("open")).await.is_empty());
    assert_eq!(
        cluster.get("shop", "deployments", "debug")["metadata"]["name"],
        "debug",
        "adopted, not deleted"
    );
}

/// A decommission of a Pulumi environment previews the destroy as its plan (every resource
/// deleted), runs `pulumi destroy` tagged with the run, and retires the environment: the
/// stack holds nothing and its history shows the destroy.
#[tokio::test]
async fn a_decommission_destroys_the_stack_and_retires_the_environment() {
    let (stack, state, api, _repo, _commit) =
        declared("preview", "non-production", program(json!({}))).await;
    let id = api.plan_run("preview", "baseline").await;
    api.wait_state(&id, "Applied").await;
    api.wait_observed_after(&stack, &id).await;
    assert_eq!(
        saved(&state, "preview")["resources"]
            .as_object()
            .map(|r| r.len()),
        Some(1)
    );

    api.post(
        "/factory/environments/preview/decommission",
        json!({ "reason": "done" }),
    )
    .await
    .expect(202);
    let env = crate::common::eventually(120, "the environment to be retired", || async {
        let e = api.get("/factory/environments/preview").await.expect(200);
        (e["state"] == "retired").then_some(e)
    })
    .await;
    assert!(env["retiredAt"].is_string(), "{env}");
    let runs = api
        .list_runs("?environmentId=preview&kind=decommission")
        .await;
    let run = &runs["items"][0];
    assert_eq!(run["state"], "Applied", "{run}");
    assert_eq!(
        run["planReceipt"]["deletes"].as_array().map(Vec::len),
        Some(1),
        "{run}"
    );
    let after = saved(&state, "preview");
    assert_eq!(after["resources"], json!({}), "{after}");
    let destroy = &after["history"][0];
    assert_eq!(destroy["kind"], "destroy", "{after}");
    assert_eq!(destroy["result"], "succeeded", "{after}");
    let tag = format!(
        "runtime-cloud run {}",
        run["provisioningRunId"].as_str().unwrap()
    );
    assert_eq!(destroy["message"], tag.as_str(), "{after}");
}
