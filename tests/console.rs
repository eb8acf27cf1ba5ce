//! The web console (`/console`): its files as the API serves them, and browser tests in real
//! headless Chromium (Debian's `chromium`, driven by `playwright-core` from
//! `tests/console/`). Each browser test sets its state up through the API, runs one scenario
//! script (`node tests/console/<scenario>.mjs`) against the real stack, and checks through the
//! API what the clicks did. Screenshots of every page land in
//! `$CARGO_TARGET_DIR/console-screenshots/<scenario>/`; the script prints their paths.

use crate::common::dev::Dev;
use crate::common::oidc_provider_stand_in::{self, AUDIENCE, OidcProviderStandIn};
use crate::common::{Api, OPERATOR_SCOPES, Stack, StackOptions, text};
use serde_json::{Value, json};
use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

/// Only the read scopes.
const READER: &[&str] = &[
    "factory.provisioning.read",
    "factory.runtime.read",
    "factory.meta.read",
];

/// Where the screenshots go: under the target directory, which outlives the test.
fn screenshots() -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            // target/debug/runtime-cloud → target
            let bin = PathBuf::from(env!("CARGO_BIN_EXE_runtime-cloud"));
            bin.ancestors().nth(2).map(PathBuf::from).unwrap_or(bin)
        });
    target.join("console-screenshots")
}

/// Runs `tests/console/<name>.mjs` against the API at `api` with `vars`, and fails the test
/// with the script's output when the scenario fails (or takes longer than four minutes).
pub(crate) async fn scenario(name: &str, api: &str, vars: &[(&str, &str)]) {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/console");
    assert!(
        dir.join("node_modules/playwright-core").is_dir(),
        "playwright-core is not installed in {}: run scripts/install-tools (npm ci there)",
        dir.display()
    );
    let mut cmd = tokio::process::Command::new("node");
    cmd.arg(format!("{name}.mjs"))
        .current_dir(&dir)
        .env("RC_API", api)
        .env("RC_SCREENSHOTS", screenshots())
        .stdin(Stdio::null())
        .kill_on_drop(true);
    for (k, v) in vars {
        cmd.env(k, v);
    }
    let run = tokio::time::timeout(Duration::from_secs(240), cmd.output()).await;
    let out = run
        .unwrap_or_else(|_| panic!("scenario {name} did not finish in 240 s"))
        .expect("run node (is Node.js installed?)");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    println!("{stdout}");
    assert!(
        out.status.success(),
        "scenario {name} failed ({}):\n{stdout}\n{stderr}",
        out.status
    );
}

/// The console's files: the page at each of its routes with its security headers and
/// revalidation, each asset with its type, nothing else under `/console`, and the sign-in
/// routes of a stack that is not `runtime-cloud dev`. None of it is in the OpenAPI document.
#[tokio::test]
async fn console_files_are_served_with_their_types_and_a_content_security_policy() {
    let stack = Stack::start().await;
    let http = reqwest::Client::new();
    let get = |path: &str| http.get(format!("{}{path}", stack.base_url)).send();

    for path in ["/console", "/console/", "/console/callback?code=x&state=y"] {
        let res = get(path).await.expect("GET the page");
        assert_eq!(res.status(), 200, "{path}");
        let h = res.headers();
        assert_eq!(h["content-type"], "text/html; charset=utf-8", "{path}");
        let csp = h["content-security-policy"].to_str().expect("CSP");
        assert!(csp.starts_with("default-src 'self';"), "{path}: {csp}");
        assert!(csp.contains("connect-src 'self';"), "{path}: {csp}");
        assert_eq!(h["x-content-type-options"], "nosniff");
        assert_eq!(h["referrer-policy"], "no-referrer");
        assert_eq!(h["cache-control"], "no-cache");
        let body = res.text().await.expect("body");
        assert!(
            body.contains(r#"<script type="module" src="/console/app.js">"#),
            "{body}"
        );
    }

    // Revalidation: the same ETag answers 304 without a body.
    let page = get("/console").await.expect("GET /console");
    let etag = page.headers()["etag"].clone();
    let again = http
        .get(format!("{}/console/app.js", stack.base_url))
        .header("if-none-match", etag.clone())
        .send()
        .await
        .expect("GET app.js");
    assert_eq!(again.status(), 200, "another file has another ETag");
    let unchanged = http
        .get(format!("{}/console", stack.base_url))
        .header("if-none-match", etag)
        .send()
        .await
        .expect("GET /console again");
    assert_eq!(unchanged.status(), 304);

    for (file, kind) in [
        ("app.js", "text/javascript; charset=utf-8"),
        ("run.js", "text/javascript; charset=utf-8"),
        ("style.css", "text/css; charset=utf-8"),
        ("favicon.svg", "image/svg+xml"),
    ] {
        let res = get(&format!("/console/{file}")).await.expect("GET asset");
        assert_eq!(res.status(), 200, "{file}");
        assert_eq!(res.headers()["content-type"], kind, "{file}");
    }
    let anonymous = stack.anonymous();
    for missing in [
        "/console/secrets.txt",
        "/console/..%2FCargo.toml",
        "/console/a/b.js",
    ] {
        anonymous.get(missing).await.expect_problem(404);
    }

    let sign_in = anonymous.get("/console/sign-in").await.expect(200);
    assert_eq!(sign_in, json!({ "dev": false, "oidc": null }));
    let minted = anonymous
        .post(
            "/console/dev-sign-in",
            json!({ "tenantId": "acme", "roles": ["Operator"], "readOnly": false }),
        )
        .await;
    minted.expect_problem(404);

    let doc = anonymous.get("/openapi.json").await.expect(200);
    let paths: Vec<&String> = doc["paths"].as_object().expect("paths").keys().collect();
    assert!(
        paths.iter().all(|p| !p.starts_with("/console")),
        "the console is not part of the API's document: {paths:?}"
    );
}

/// An operator signs in with a pasted token, approves a production run on its page, and the
/// page shows it Applied without a reload; the API recorded that operator's approval of
/// exactly the plan the page showed.
#[tokio::test]
async fn console_an_operator_approves_a_production_run_and_sees_it_applied() {
    let stack = Stack::start().await;
    let api = stack.operator("acme");
    let (id, waiting) = api.awaiting_approval("prod", 2).await;
    let hash = text(&waiting["planReceipt"]["inputsHash"]);

    let token = stack.token("acme", OPERATOR_SCOPES);
    scenario(
        "approve",
        &stack.base_url,
        &[("RC_TOKEN", &token), ("RC_ENV", "prod"), ("RC_RUN_ID", &id)],
    )
    .await;

    let run = api.run(&id).await;
    assert_eq!(run["state"], "Applied", "{run}");
    let decision = &run["approval"]["decision"];
    assert_eq!(decision["approver"], "tester", "{run}");
    assert_eq!(decision["reason"], "CAB-1234 from the console", "{run}");
    assert_eq!(
        decision["inputsHash"],
        hash.as_str(),
        "the plan the page showed"
    );
    assert_eq!(run["refusedApprovals"], json!([]), "{run}");
}

/// An operator extends an ephemeral environment's expiry on its page and decommissions it
/// there; the API shows the new expiry, who extended it, and the environment retired.
#[tokio::test]
async fn console_an_operator_extends_and_decommissions_an_ephemeral_environment() {
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

    let token = stack.token("acme", OPERATOR_SCOPES);
    scenario(
        "lifetime",
        &stack.base_url,
        &[("RC_TOKEN", &token), ("RC_ENV", "preview")],
    )
    .await;

    let env = api.get("/factory/environments/preview").await.expect(200);
    assert_eq!(env["state"], "retired", "{env}");
    let at = |v: &Value| -> chrono::DateTime<chrono::Utc> {
        text(&v["expiresAt"]).parse().expect("expiresAt")
    };
    assert!(
        at(&env) > at(&registered) + chrono::Duration::minutes(100),
        "{env}"
    );
    let extended = stack.events("EnvironmentExpiryExtended").await;
    assert_eq!(extended.len(), 1, "{extended:?}");
    assert_eq!(
        extended[0]["payload"]["extendedBy"], "tester",
        "{extended:?}"
    );
}

/// An Operator quarantines a version on the Quarantines page and lifts it there; the API
/// shows both, by the token's subject, with the reasons typed.
#[tokio::test]
async fn console_an_operator_quarantines_a_version_and_lifts_it() {
    let stack = Stack::start().await;
    let token = stack.token("acme", OPERATOR_SCOPES);
    scenario("quarantines", &stack.base_url, &[("RC_TOKEN", &token)]).await;

    let api = stack.operator("acme");
    let listed = api.get("/factory/quarantines").await.expect(200);
    let q = &listed["items"][0];
    assert_eq!(q["workload"], "api", "{listed}");
    assert_eq!(q["version"], "2.0.0", "{listed}");
    assert_eq!(q["reason"], "leaks memory, from the console", "{listed}");
    assert_eq!(q["state"], "lifted", "{listed}");
    assert_eq!(q["liftReason"], "fixed in 2.0.1", "{listed}");
    assert_eq!(q["liftedBy"], "tester", "{listed}");
    assert_eq!(stack.events("VersionQuarantined").await.len(), 1);
    assert_eq!(stack.events("QuarantineLifted").await.len(), 1);
}

/// An Operator orders an instance off-boarded on its page; the API shows the order completed
/// by that operator with the reason typed, and the instance off-boarded.
#[tokio::test]
async fn console_an_operator_offboards_an_instance() {
    let stack = Stack::start().await;
    let api = stack.operator("acme");
    api.applied(&stack, "shop-00", &[("api", "1.0.0", 1)]).await;
    let token = stack.token("acme", OPERATOR_SCOPES);
    scenario(
        "offboard",
        &stack.base_url,
        &[("RC_TOKEN", &token), ("RC_ENV", "shop-00")],
    )
    .await;

    let orders = api.get("/fleet/offboarding-orders").await.expect(200);
    let order = &orders["items"][0];
    assert_eq!(order["state"], "completed", "{orders}");
    assert_eq!(order["requestedBy"], "tester", "{orders}");
    assert_eq!(
        order["reason"], "contract ended, from the console",
        "{orders}"
    );
    let env = api.get("/factory/environments/shop-00").await.expect(200);
    assert_eq!(env["state"], "offboarded", "{env}");
}

/// An environment applied, then drifted out of band (api scaled to 7) and observed, with a
/// proposal waiting for a decision; returns the operator and the proposal's id.
async fn drifted(stack: &Stack, env: &str) -> (Api, String) {
    let api = stack.operator("acme");
    api.applied(stack, env, &[("api", "1.0.0", 2)]).await;
    stack.sandbox_cli(
        "acme",
        env,
        &["scale", "--workload", "api", "--replicas", "7"],
    );
    let outcome = api.observe(stack, env).await;
    let proposal = text(&outcome["newProposal"]["proposalId"]);
    assert!(
        !proposal.is_empty(),
        "the drift raised a proposal: {outcome}"
    );
    api.wait_proposal(env, &proposal, "Proposed").await;
    (api, proposal)
}

/// An operator accepts a proposal on the environment's page and sees its finding resolved
/// there; the API shows the proposal applied with that operator's reason and nothing open.
#[tokio::test]
async fn console_an_operator_accepts_a_proposal_and_sees_the_finding_resolved() {
    let stack = Stack::with(StackOptions::proposals_wait_for_a_decision()).await;
    let (api, proposal) = drifted(&stack, "dev").await;

    let token = stack.token("acme", OPERATOR_SCOPES);
    scenario(
        "proposal",
        &stack.base_url,
        &[
            ("RC_TOKEN", &token),
            ("RC_ENV", "dev"),
            ("RC_PROPOSAL_ID", &proposal),
            ("RC_RESOURCE", "deployment/api"),
        ],
    )
    .await;

    let decided = api.wait_proposal("dev", &proposal, "Applied").await;
    assert_eq!(decided["decidedBy"], "tester", "{decided}");
    assert_eq!(decided["decisionReason"], "INC-42 from the console");
    assert!(api.drift("dev", Some("open")).await.is_empty());
    let resolved = api.drift("dev", Some("resolved")).await;
    assert!(
        resolved.iter().any(|f| f["resource"] == "deployment/api"),
        "{resolved:?}"
    );
    assert_eq!(stack.sandbox("acme", "dev")["workloads"][0]["replicas"], 2);
}

/// A user with only the read scopes sees the approval, the decision, observe and plan
/// disabled with the scope each needs, and requests forged from the page with that token are
/// refused with 403: nothing was approved or decided.
#[tokio::test]
async fn console_a_read_only_user_sees_actions_disabled_and_forged_requests_are_refused() {
    let stack = Stack::with(StackOptions::proposals_wait_for_a_decision()).await;
    let (api, proposal) = drifted(&stack, "dev").await;
    let (run_id, _) = api.awaiting_approval("prod", 1).await;

    let token = stack.token("acme", READER);
    scenario(
        "read_only",
        &stack.base_url,
        &[
            ("RC_TOKEN", &token),
            ("RC_ENV", "dev"),
            ("RC_PROPOSAL_ID", &proposal),
            ("RC_RUN_ID", &run_id),
        ],
    )
    .await;

    let run = api.run(&run_id).await;
    assert_eq!(run["state"], "AwaitingApproval", "{run}");
    assert_eq!(
        run["refusedApprovals"],
        json!([]),
        "no approval reached the run"
    );
    let approvals = api
        .get("/factory/approvals?environmentId=prod")
        .await
        .expect(200);
    assert_eq!(approvals["items"], json!([]), "no approval was recorded");
    let still = api.proposals("dev").await;
    assert!(
        still
            .iter()
            .any(|p| p["proposalId"] == proposal.as_str() && p["state"] == "Proposed"),
        "{still:?}"
    );
}

/// The scopes of a token, read from its payload.
fn scopes_of(token: &str) -> Vec<String> {
    use base64::Engine;
    let payload = token.split('.').nth(1).expect("a JWT");
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(payload)
        .expect("base64url payload");
    let claims: Value = serde_json::from_slice(&bytes).expect("JSON claims");
    text(&claims["scope"])
        .split_whitespace()
        .map(str::to_owned)
        .collect()
}

/// Under `runtime-cloud dev` the console offers a one-click sign-in: an Operator's token with
/// every scope, a read-only one, or one without a role; the API takes the first's writes and
/// refuses the second's, and the third's approval of a production run.
#[tokio::test]
async fn console_dev_sign_in_is_one_click_under_runtime_cloud_dev() {
    let data = tempfile::tempdir().expect("temp dir");
    let dev = Dev::start_anywhere(data.path());
    let operator = Api::with_token(&dev.api, &dev.token);
    operator.environment("dev-1", "non-production").await;
    let (run_id, _) = operator.awaiting_approval("prod-1", 1).await;

    let anonymous = Api::with_token(&dev.api, "");
    let sign_in = anonymous.get("/console/sign-in").await.expect(200);
    assert_eq!(sign_in, json!({ "dev": true, "oidc": null }));
    for (read_only, subject) in [(false, "dev-operator"), (true, "dev-reader")] {
        let minted = anonymous
            .post(
                "/console/dev-sign-in",
                json!({ "tenantId": "dev", "roles": ["Operator"], "readOnly": read_only }),
            )
            .await
            .expect(200);
        let token = text(&minted["accessToken"]);
        let scopes = scopes_of(&token);
        assert_eq!(
            scopes.iter().all(|s| s.ends_with(".read")),
            read_only,
            "{subject}: {scopes:?}"
        );
        let me = Api::with_token(&dev.api, &token);
        me.get("/factory/environments/dev-1").await.expect(200);
        let observe = me
            .post("/factory/environments/dev-1/observe", json!({}))
            .await;
        assert_eq!(observe.status.as_u16(), if read_only { 403 } else { 202 });
    }
    for bad in [
        json!({ "tenantId": "no spaces allowed" }),
        json!({ "tenantId": "dev", "roles": ["Root"] }),
        json!({ "tenantId": "dev", "scopes": ["factory.provisioning.apply"] }),
    ] {
        anonymous
            .post("/console/dev-sign-in", bad)
            .await
            .expect_problem(422);
    }

    scenario(
        "dev_sign_in",
        &dev.api,
        &[("RC_ENV", "dev-1"), ("RC_RUN_ID", &run_id)],
    )
    .await;
    let run = operator.run(&run_id).await;
    assert_eq!(run["state"], "AwaitingApproval", "{run}");
}

/// With an OpenID provider configured (a stand-in on loopback), the console offers it and
/// signs in with the authorization-code flow and PKCE (S256), `state` and `nonce`, under a
/// policy that lets the page reach the token endpoint and nothing else; the API accepts the
/// provider's access token; a forged callback is refused. No dev sign-in beside it.
// Multi-threaded: the provider (in this process) must answer while the API starts.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn console_oidc_sign_in_is_the_authorization_code_flow_with_pkce() {
    let (client_id, scope, subject) = (
        "runtime-cloud-console",
        "openid runtime-cloud",
        "oidc-operator",
    );
    let provider = OidcProviderStandIn::start(&["rsa-2026-a"]).await;
    let now = oidc_provider_stand_in::now();
    provider.sign_in_as(
        client_id,
        json!({ "iss": provider.issuer, "aud": AUDIENCE, "sub": subject, "iat": now,
                "exp": now + 3600, "tenant_id": "oidc-console", "roles": ["Operator"],
                "scope": "factory.provisioning.read factory.runtime.read" }),
    );
    let stack = Stack::with(StackOptions {
        env: [
            ("RUNTIME_CLOUD_OIDC_ISSUER", provider.issuer.as_str()),
            ("RUNTIME_CLOUD_OIDC_AUDIENCE", AUDIENCE),
            ("RUNTIME_CLOUD_OIDC_CONSOLE_CLIENT_ID", client_id),
            ("RUNTIME_CLOUD_OIDC_CONSOLE_SCOPE", scope),
        ]
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .into(),
        ..Default::default()
    })
    .await;

    let sign_in = stack.anonymous().get("/console/sign-in").await.expect(200);
    assert_eq!(sign_in["dev"], false, "{sign_in}");
    assert_eq!(
        sign_in["oidc"]["issuer"],
        provider.issuer.as_str(),
        "{sign_in}"
    );
    assert_eq!(
        sign_in["oidc"]["tokenEndpoint"],
        format!("{}/protocol/openid-connect/token", provider.issuer),
        "{sign_in}"
    );
    let page = reqwest::get(format!("{}/console", stack.base_url))
        .await
        .expect("GET /console");
    let csp = page.headers()["content-security-policy"]
        .to_str()
        .expect("CSP")
        .to_owned();
    let origin = provider
        .issuer
        .trim_end_matches(oidc_provider_stand_in::REALM)
        .to_owned();
    assert!(
        csp.contains(&format!("connect-src 'self' {origin};")),
        "the policy names the token endpoint's origin: {csp}"
    );

    scenario(
        "oidc",
        &stack.base_url,
        &[
            ("RC_OIDC_ISSUER", &provider.issuer),
            ("RC_ALSO_ALLOWED", &provider.issuer),
            ("RC_OIDC_CLIENT_ID", client_id),
            ("RC_OIDC_SCOPE", scope),
            ("RC_SUBJECT", subject),
        ],
    )
    .await;
}
