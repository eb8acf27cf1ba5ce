//! The operator CLI end to end: `runtime-cloud runs|envs|proposals|specs|rollouts|fleet|login`
//! against a real stack, answers read back from `-o json` / `-o yaml`, and the exit codes
//! scripts rely on (0 ok, 1 refused, 2 bad usage, 3 not found, 4 not signed in, 5
//! unavailable).

use crate::common::{Api, OPERATOR_SCOPES, Stack, StackOptions, eventually, text};
use serde_json::{Value, json};
use std::io::Write;
use std::process::{Command, Stdio};

/// What one CLI invocation did.
pub(crate) struct Ran {
    code: i32,
    stdout: String,
    stderr: String,
}

impl Ran {
    /// Asserts the exit code; returns stdout.
    #[track_caller]
    pub(crate) fn expect(&self, code: i32) -> &str {
        assert_eq!(
            self.code, code,
            "exit code; stdout: {}\nstderr: {}",
            self.stdout, self.stderr
        );
        &self.stdout
    }

    /// Asserts success and parses stdout as JSON.
    #[track_caller]
    pub(crate) fn json(&self) -> Value {
        let out = self.expect(0);
        serde_json::from_str(out).unwrap_or_else(|e| panic!("not JSON ({e}): {out}"))
    }
}

/// The CLI as an operator of the stack runs it: the token in `RUNTIME_CLOUD_TOKEN` (unless
/// `token` is None), `--server` the stack's API, no saved login unless `config` names one;
/// `stdin` typed in.
pub(crate) struct Cli<'a> {
    server: &'a str,
    token: Option<String>,
    config: std::path::PathBuf,
}

impl Cli<'_> {
    fn run_with(&self, args: &[&str], stdin: &str) -> Ran {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_runtime-cloud"));
        cmd.args(args)
            .env("RUNTIME_CLOUD_SERVER", self.server)
            .env("RUNTIME_CLOUD_CLI_CONFIG", &self.config)
            .env_remove("RUNTIME_CLOUD_TOKEN")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        if let Some(t) = &self.token {
            cmd.env("RUNTIME_CLOUD_TOKEN", t);
        }
        let mut child = cmd.spawn().expect("run the CLI");
        child
            .stdin
            .take()
            .expect("stdin")
            .write_all(stdin.as_bytes())
            .expect("type");
        let out = child.wait_with_output().expect("CLI output");
        Ran {
            code: out.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    }

    pub(crate) fn run(&self, args: &[&str]) -> Ran {
        self.run_with(args, "")
    }
}

pub(crate) fn cli<'a>(stack: &'a Stack, token: Option<String>) -> Cli<'a> {
    Cli {
        server: &stack.base_url,
        token,
        config: stack.data_path().join("cli.toml"),
    }
}

pub(crate) fn operator_token(stack: &Stack) -> String {
    stack.token("acme", OPERATOR_SCOPES)
}

#[tokio::test]
async fn runs_specs_and_environments_from_the_cli_with_exit_codes_scripts_can_use() {
    let stack = Stack::start().await;
    let api = stack.operator("acme");
    api.environment("prod", "production").await;
    let op = cli(&stack, Some(operator_token(&stack)));

    // `specs declare -f` takes YAML with the API's fields.
    let spec = stack.data_path().join("spec.yaml");
    std::fs::write(
        &spec,
        "environmentId: prod\nkind: environment\nprogramRef: git://infra//shop\n\
         programVersion: a1b2c3d4e5\nconfigRefs: {}\nsecretRefs: {}\nworkloads:\n  \
         - name: api\n    kind: deployment\n    version: 1.0.0\n    replicas: 2\n    \
         configRefs: {}\n    secretRefs: {}\n",
    )
    .expect("write spec");
    let declared = op
        .run(&[
            "specs",
            "declare",
            "-f",
            spec.to_str().unwrap(),
            "-o",
            "json",
        ])
        .json();
    assert_eq!(declared["version"], 1, "{declared}");
    let specs = op
        .run(&["specs", "list", "--env", "prod", "-o", "json"])
        .json();
    assert_eq!(specs["items"][0]["version"], 1, "{specs}");

    // Plan; the production run waits for approval.
    let planned = op
        .run(&["runs", "plan", "--env", "prod", "-o", "json"])
        .json();
    let id = text(&planned["provisioningRunId"]);
    let run = api.wait_state(&id, "AwaitingApproval").await;
    let hash = text(&run["planReceipt"]["inputsHash"]);

    let waiting = op
        .run(&["runs", "list", "--state", "AwaitingApproval", "-o", "json"])
        .json();
    assert_eq!(waiting["items"][0]["provisioningRunId"], id.as_str());
    let table = op.run(&["runs", "list"]).expect(0).to_owned();
    let header = table.lines().next().unwrap_or_default();
    assert!(
        header.starts_with("ID") && header.contains("STATE"),
        "{table}"
    );
    assert!(
        table
            .lines()
            .any(|l| l.starts_with(&id) && l.contains("AwaitingApproval")),
        "{table}"
    );
    let page = op.run(&["runs", "get", &id]).expect(0).to_owned();
    assert!(page.contains(&format!("plan {hash}")), "{page}");
    assert!(
        page.contains("+ deployment api"),
        "the plan as a diff: {page}"
    );

    // A reader cannot approve (403: refused), and neither can a "no" at the prompt.
    let reader = cli(
        &stack,
        Some(stack.token("acme", &["factory.provisioning.read"])),
    );
    let refused = reader.run(&["runs", "approve", &id, "--yes"]);
    refused.expect(1);
    assert!(refused.stderr.contains("403"), "{}", refused.stderr);
    let declined = op.run_with(&["runs", "approve", &id], "n\n");
    declined.expect(1);
    assert!(
        declined.stderr.contains("+ deployment api"),
        "approve shows the plan before asking: {}",
        declined.stderr
    );
    assert_eq!(api.run(&id).await["state"], "AwaitingApproval");

    // Yes: approved with the plan's hash; `logs --follow` prints until the run ends.
    let approved = op.run_with(
        &["runs", "approve", &id, "--reason", "CAB-7", "-o", "json"],
        "y\n",
    );
    assert_eq!(approved.json()["decision"], "approve");
    let logs = op.run(&["runs", "logs", &id, "--follow"]);
    assert!(!logs.expect(0).is_empty(), "{}", logs.stderr);
    let done: Value =
        yaml_serde::from_str(op.run(&["runs", "get", &id, "-o", "yaml"]).expect(0)).expect("YAML");
    assert_eq!(
        done["state"], "Applied",
        "logs --follow returned at the end"
    );
    assert_eq!(
        (
            &done["approval"]["decision"]["approver"],
            &done["approval"]["decision"]["reason"]
        ),
        (&json!("tester"), &json!("CAB-7")),
        "{done}"
    );
    let plan_logs = op
        .run(&["runs", "logs", &id, "--phase", "plan"])
        .expect(0)
        .to_owned();
    assert!(
        logs.stdout.starts_with(&format!("=== plan\n{plan_logs}"))
            && logs.stdout.contains("=== apply\n"),
        "--follow printed the plan's log, then the apply's: {}",
        logs.stdout
    );

    // Reject and cancel.
    let second = text(
        &op.run(&["runs", "plan", "--env", "prod", "-o", "json"])
            .json()["provisioningRunId"],
    );
    api.wait_state(&second, "AwaitingApproval").await;
    op.run(&["runs", "reject", &second, "--reason", "not today"])
        .expect(0);
    api.wait_state(&second, "Rejected").await;
    let third = text(
        &op.run(&["runs", "plan", "--env", "prod", "-o", "json"])
            .json()["provisioningRunId"],
    );
    api.wait_state(&third, "AwaitingApproval").await;
    op.run(&["runs", "cancel", &third, "--reason", "superseded"])
        .expect(0);
    api.wait_state(&third, "Cancelled").await;
    // An applied run cannot be approved again or cancelled: refused.
    op.run(&["runs", "approve", &id, "--yes"]).expect(1);
    op.run(&["runs", "cancel", &id]).expect(1);

    // Environments.
    let envs = op.run(&["envs", "list", "-o", "json"]).json();
    assert_eq!(envs["items"][0]["environmentId"], "prod", "{envs}");
    let one = op.run(&["envs", "get", "prod"]).expect(0).to_owned();
    assert!(one.contains("production"), "{one}");
    op.run(&["envs", "observe", "prod"]).expect(0);
    let inventory = op.run(&["envs", "inventory", "prod", "-o", "json"]).json();
    assert_eq!(inventory["workloads"][0]["name"], "api", "{inventory}");
    let table = op.run(&["envs", "inventory", "prod"]).expect(0).to_owned();
    assert!(
        table
            .lines()
            .any(|l| l.starts_with("api") && l.contains("1.0.0")),
        "{table}"
    );
    let drift = op.run(&["envs", "drift", "prod", "-o", "json"]).json();
    assert_eq!(drift["items"], json!([]), "{drift}");

    // Exit codes: not found 3, bad usage 2, not signed in 4, unavailable 5.
    op.run(&["runs", "get", "01a00000-0000-7000-8000-000000000000"])
        .expect(3);
    op.run(&["envs", "get", "nowhere"]).expect(3);
    op.run(&["runs", "plan"]).expect(2);
    op.run(&["runs", "list", "-o", "xml"]).expect(2);
    op.run(&["specs", "declare", "-f", "/nonexistent/spec.yaml"])
        .expect(2);
    op.run(&["runs", "list", "--state", "Sleeping"]).expect(2);
    cli(&stack, None).run(&["runs", "list"]).expect(4);
    cli(&stack, Some("not-a-token".into()))
        .run(&["runs", "list"])
        .expect(4);
    let down = Cli {
        server: "http://127.0.0.1:9",
        token: Some(operator_token(&stack)),
        config: stack.data_path().join("cli.toml"),
    };
    down.run(&["runs", "list"]).expect(5);
}

#[tokio::test]
async fn drift_and_proposals_from_the_cli() {
    let stack = Stack::with(StackOptions::proposals_wait_for_a_decision()).await;
    let api = stack.operator("acme");
    api.applied(&stack, "dev", &[("api", "1.0.0", 2)]).await;
    let op = cli(&stack, Some(operator_token(&stack)));
    stack.sandbox_cli(
        "acme",
        "dev",
        &["scale", "--workload", "api", "--replicas", "7"],
    );
    op.run(&["envs", "observe", "dev"]).expect(0);
    let proposal = eventually(60, "a proposal", || {
        let op = cli(&stack, Some(operator_token(&stack)));
        async move {
            let page = op
                .run(&["proposals", "list", "--env", "dev", "-o", "json"])
                .json();
            (page["items"][0]["state"] == "Proposed").then(|| text(&page["items"][0]["proposalId"]))
        }
    })
    .await;
    let open = op
        .run(&["envs", "drift", "dev", "--state", "open", "-o", "json"])
        .json();
    assert_eq!(open["items"][0]["proposalId"], proposal.as_str(), "{open}");
    let table = op.run(&["proposals", "list"]).expect(0).to_owned();
    assert!(
        table.contains(&proposal) && table.contains("Proposed"),
        "{table}"
    );

    op.run(&["proposals", "accept", &proposal, "--reason", "INC-9"])
        .expect(0);
    api.wait_proposal("dev", &proposal, "Applied").await;
    let resolved = op
        .run(&["envs", "drift", "dev", "--state", "resolved", "-o", "json"])
        .json();
    assert_eq!(
        resolved["items"][0]["proposalId"],
        proposal.as_str(),
        "{resolved}"
    );
    // Decided already: refused.
    op.run(&["proposals", "reject", &proposal, "--reason", "late"])
        .expect(1);

    // New drift, a new proposal; rejected from the CLI.
    stack.sandbox_cli(
        "acme",
        "dev",
        &["scale", "--workload", "api", "--replicas", "5"],
    );
    op.run(&["envs", "observe", "dev"]).expect(0);
    let second = eventually(60, "a second proposal", || {
        let op = cli(&stack, Some(operator_token(&stack)));
        let first = proposal.clone();
        async move {
            let page = op
                .run(&[
                    "proposals",
                    "list",
                    "--env",
                    "dev",
                    "--state",
                    "Proposed",
                    "-o",
                    "json",
                ])
                .json();
            let id = text(&page["items"][0]["proposalId"]);
            (!id.is_empty() && id != first).then_some(id)
        }
    })
    .await;
    op.run(&[
        "proposals",
        "reject",
        &second,
        "--reason",
        "scaled on purpose",
    ])
    .expect(0);
    let rejected = api.wait_proposal("dev", &second, "Rejected").await;
    assert_eq!(
        rejected["decisionReason"], "scaled on purpose",
        "{rejected}"
    );
    op.run(&[
        "proposals",
        "accept",
        "01a00000-0000-7000-8000-000000000000",
    ])
    .expect(3);
}

#[tokio::test]
async fn rollouts_and_the_fleet_from_the_cli() {
    let stack = Stack::start().await;
    let api = stack.operator("acme");
    for env in ["shop-00", "shop-01"] {
        api.applied(&stack, env, &[("api", "1.0.0", 1)]).await;
    }
    let op = cli(&stack, Some(operator_token(&stack)));
    let summary = op.run(&["fleet", "summary", "-o", "json"]).json();
    assert_eq!(
        summary["instancesByClass"]["non-production"], 2,
        "{summary}"
    );
    let instances = op.run(&["fleet", "instances"]).expect(0).to_owned();
    assert!(
        instances.contains("shop-00") && instances.contains("shop-01"),
        "{instances}"
    );

    let file = stack.data_path().join("rollout.yaml");
    std::fs::write(
        &file,
        "productId: shop\nversions:\n  api: 2.0.0\nbakeSeconds: 600\nconvergeDeadlineSeconds: 60\n",
    )
    .expect("write rollout");
    let started = op
        .run(&[
            "rollouts",
            "start",
            "-f",
            file.to_str().unwrap(),
            "-o",
            "json",
        ])
        .json();
    let id = text(&started["rolloutId"]);
    let listed = op.run(&["rollouts", "list", "-o", "json"]).json();
    assert_eq!(listed["items"][0]["rolloutId"], id.as_str(), "{listed}");

    // Only a halted rollout resumes: refused while it runs. An abort ends it.
    wait_rollout(&stack, &id, "the canary to converge", |r| {
        r["status"]["instances"][0]["converged"] == true
    })
    .await;
    let refused = op.run(&["rollouts", "resume", &id]);
    refused.expect(1);
    assert!(refused.stderr.contains("not Halted"), "{}", refused.stderr);
    // A breach reported during the canary's bake halts it; resumed from the CLI, it runs
    // again; halted again, the CLI aborts it.
    breach_until_halted(&stack, &api, &id).await;
    op.run(&["rollouts", "resume", &id]).expect(0);
    wait_rollout(&stack, &id, "the rollout to run again", |r| {
        r["state"] != "Halted"
    })
    .await;
    breach_until_halted(&stack, &api, &id).await;
    op.run(&["rollouts", "abort", &id]).expect(0);
    wait_rollout(&stack, &id, "the rollout to abort", |r| {
        r["state"] == "Aborted"
    })
    .await;
    op.run(&["rollouts", "resume", &id]).expect(1);
    op.run(&["rollouts", "get", "no-such-rollout"]).expect(3);
}

/// Waits until `rollouts get id -o json` answers a rollout for which `done` holds.
async fn wait_rollout(stack: &Stack, id: &str, what: &str, done: fn(&Value) -> bool) {
    eventually(60, what, || {
        let op = cli(stack, Some(operator_token(stack)));
        let id = id.to_owned();
        async move {
            let r = op.run(&["rollouts", "get", &id, "-o", "json"]).json();
            done(&r).then_some(())
        }
    })
    .await;
}

/// Reports an SLO breach and waits until the rollout is `Halted`.
async fn breach_until_halted(stack: &Stack, api: &Api, id: &str) {
    api.post(
        &format!("/fleet/rollouts/{id}/breach"),
        json!({ "reason": "p99 over 2 s" }),
    )
    .await
    .expect(202);
    wait_rollout(stack, id, "the rollout to halt", |r| r["state"] == "Halted").await;
}

#[tokio::test]
async fn login_saves_the_server_and_token_for_the_other_commands() {
    let stack = Stack::start().await;
    stack
        .operator("acme")
        .environment("prod", "production")
        .await;
    let saved = stack.data_path().join("login").join("cli.toml");
    let nobody = Cli {
        server: "http://127.0.0.1:9",
        token: None,
        config: saved.clone(),
    };
    // A token the API does not take is not saved.
    let refused = nobody.run_with(&["login", "--server", &stack.base_url], "forged\n");
    refused.expect(4);
    assert!(!saved.exists(), "a refused login saved nothing");

    let token = operator_token(&stack);
    nobody
        .run_with(
            &["login", "--server", &stack.base_url],
            &format!("{token}\n"),
        )
        .expect(0);
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&saved)
            .expect("saved")
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600, "only its owner reads the token");
    }
    // Without a token or a server of their own, commands use the login (the variable's
    // server is a dead port; the saved one wins only without it, so unset it here).
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_runtime-cloud"));
    let out = cmd
        .args(["envs", "list", "-o", "json"])
        .env("RUNTIME_CLOUD_CLI_CONFIG", &saved)
        .env_remove("RUNTIME_CLOUD_SERVER")
        .env_remove("RUNTIME_CLOUD_TOKEN")
        .output()
        .expect("run the CLI");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let envs: Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(envs["items"][0]["environmentId"], "prod");
}

/// An ephemeral environment's expiry is moved and an environment decommissioned from the CLI,
/// with the exit codes of a usage error and of a refusal.
#[tokio::test]
async fn environments_are_extended_and_decommissioned_from_the_cli() {
    let stack = Stack::start().await;
    let api = stack.operator("acme");
    let registered = api
        .post(
            "/factory/environments",
            json!({ "environmentId": "preview", "projectId": "shop",
                    "class": "non-production", "ttl": "1h" }),
        )
        .await
        .expect(201);
    let at = |v: &Value| -> chrono::DateTime<chrono::Utc> {
        text(&v["expiresAt"]).parse().expect("expiresAt")
    };
    let op = cli(&stack, Some(operator_token(&stack)));
    let extended = op
        .run(&["envs", "extend", "preview", "--ttl", "3h", "-o", "json"])
        .json();
    assert!(
        at(&extended) > at(&registered) + chrono::Duration::minutes(100),
        "{extended}"
    );
    let table = op.run(&["envs", "list"]).expect(0).to_owned();
    let header = table.lines().next().unwrap_or_default();
    assert!(
        header.contains("STATE") && header.contains("EXPIRES"),
        "{table}"
    );
    assert!(table.contains("active"), "{table}");
    // Neither --ttl nor --until: a usage error.
    op.run(&["envs", "extend", "preview"]).expect(2);

    let asked = op
        .run(&[
            "envs",
            "decommission",
            "preview",
            "--reason",
            "PR merged",
            "-o",
            "json",
        ])
        .json();
    assert_eq!(asked["decommissionRequested"], true, "{asked}");
    eventually(60, "the environment to be retired", || async {
        let e = api.get("/factory/environments/preview").await.expect(200);
        (e["state"] == "retired").then_some(())
    })
    .await;
    let again = op.run(&["envs", "decommission", "preview"]);
    again.expect(1);
    assert!(again.stderr.contains("409"), "{}", again.stderr);
}

/// `quarantines place|list|lift` and `runs plan --override-quarantine`: a quarantined version
/// is refused with the reason (exit 1), run by an Operator who says why, and lifted.
#[tokio::test]
async fn versions_are_quarantined_overridden_and_lifted_from_the_cli() {
    let stack = Stack::start().await;
    let api = stack.operator("acme");
    api.applied(&stack, "dev", &[("api", "1.0.0", 1)]).await;
    let op = cli(&stack, Some(operator_token(&stack)));
    let placed = op
        .run(&[
            "quarantines",
            "place",
            "--workload",
            "api",
            "--version",
            "2.0.0",
            "--reason",
            "leaks memory",
            "-o",
            "json",
        ])
        .json();
    assert_eq!(placed["state"], "in-force", "{placed}");
    let table = op
        .run(&["quarantines", "list", "--state", "in-force"])
        .expect(0)
        .to_owned();
    let header = table.lines().next().unwrap_or_default();
    assert!(
        header.contains("WORKLOAD") && header.contains("REASON"),
        "{table}"
    );
    assert!(
        table.contains("2.0.0") && table.contains("leaks memory"),
        "{table}"
    );

    api.declare("dev", &[("api", "2.0.0", 1)]).await;
    let refused = op.run(&["runs", "plan", "--env", "dev", "--kind", "promotion"]);
    refused.expect(1);
    assert!(
        refused.stderr.contains("version 2.0.0 is quarantined"),
        "{}",
        refused.stderr
    );
    let run = op
        .run(&[
            "runs",
            "plan",
            "--env",
            "dev",
            "--kind",
            "promotion",
            "--override-quarantine",
            "the hotfix is only in 2.0.0",
            "-o",
            "json",
        ])
        .json();
    assert_eq!(
        run["quarantineOverride"]["reason"], "the hotfix is only in 2.0.0",
        "{run}"
    );
    api.wait_state(&text(&run["provisioningRunId"]), "Applied")
        .await;

    let lifted = op
        .run(&[
            "quarantines",
            "lift",
            &text(&placed["quarantineId"]),
            "--reason",
            "fixed",
            "-o",
            "json",
        ])
        .json();
    assert_eq!(lifted["state"], "lifted", "{lifted}");
}

/// `fleet offboard|orders|archive`: an instance ordered off-boarded from the CLI, its order
/// listed, and its archive written to a file only with the export scope.
#[tokio::test]
async fn an_instance_is_offboarded_and_its_archive_downloaded_from_the_cli() {
    let stack = Stack::start().await;
    let api = stack.operator("acme");
    api.applied(&stack, "shop-00", &[("api", "1.0.0", 1)]).await;
    let op = cli(&stack, Some(operator_token(&stack)));
    let order = op
        .run(&[
            "fleet",
            "offboard",
            "shop-00",
            "--reason",
            "contract ended",
            "-o",
            "json",
        ])
        .json();
    let id = text(&order["orderId"]);
    let done = eventually(120, "the order to complete", || async {
        let o = api
            .get(&format!("/fleet/offboarding-orders/{id}"))
            .await
            .expect(200);
        (o["state"] == "completed").then_some(o)
    })
    .await;
    let table = op.run(&["fleet", "orders"]).expect(0).to_owned();
    assert!(
        table.contains(&id) && table.contains("completed"),
        "{table}"
    );

    let dir = tempfile::tempdir().expect("a temp dir");
    let file = dir.path().join("shop-00.tar");
    let to = file.display().to_string();
    // The operator's token has no export scope.
    let refused = op.run(&["fleet", "archive", &id, "--to", &to]);
    refused.expect(1);
    assert!(
        refused.stderr.contains("factory.fleet.export"),
        "{}",
        refused.stderr
    );
    let exporter = cli(&stack, Some(stack.token("acme", &["factory.fleet.export"])));
    exporter
        .run(&["fleet", "archive", &id, "--to", &to])
        .expect(0);
    let bytes = std::fs::read(&file).expect("the archive written");
    assert_eq!(
        runtime_cloud_models::offboarding::checksum(&bytes),
        text(&done["archiveSha256"])
    );
}
