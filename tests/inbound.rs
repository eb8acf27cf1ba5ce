//! Inbound events end to end, on a real NATS JetStream server of the test's own: each event has
//! its effect once under redelivery and while the API is down; a malformed one lands on the
//! dead-letter subject with the reason; `PromotionApproved` plans a promotion run that spends
//! the promotion's approval; `ApprovalDecided` approves the production run that waits for it.
//! Approvals are proven by their sender's signature (keys under `tests/fixtures/inbound/`):
//! a forged one never declares, plans or applies.

use crate::common::nats::Nats;
use crate::common::{Api, Stack, StackOptions, eventually, text};
use futures::StreamExt;
use runtime_cloud_api::inbound::sign::{SigningKey, signed_event};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};

const PROMOTIONS: &str = "https://promotions.test";
const RUN_CONTROL: &str = "https://run-control.test";
const PROMOTION_APPROVED: &str = "promotion.promotions.v1.promotion-approved";
const APPROVAL_DECIDED: &str = "runcontrol.approvals.v1.approval-decided";

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/inbound")
        .join(name)
}

/// A source's private key from the fixtures.
fn key(name: &str, kid: Option<&str>) -> SigningKey {
    let pem = std::fs::read(fixture(name)).expect("key fixture");
    SigningKey::from_pem(&pem, kid.map(str::to_owned)).expect("a private key")
}

/// A stack consuming NATS whose sources are the promotion service (ES256, for tenant `acme`
/// only) and RunControlService (EdDSA), keys from PEM files.
async fn stack(nats: &Nats) -> Stack {
    stack_with(nats, &[]).await
}

async fn stack_with(nats: &Nats, env: &[(&str, &str)]) -> Stack {
    let suffix = uuid::Uuid::new_v4().simple().to_string()[..8].to_owned();
    let dir = tempfile::tempdir().expect("dir").keep();
    let sources = dir.join("inbound-sources.toml");
    let acme = format!("acme-{suffix}");
    std::fs::write(
        &sources,
        format!(
            r#"clock_skew_seconds = 5

[[source]]
name = "promotions"
issuer = "{PROMOTIONS}"
pem_files = ["{}", "{}"]
tenants = ["{acme}"]
events = ["{PROMOTION_APPROVED}"]

[[source]]
name = "run-control"
issuer = "{RUN_CONTROL}"
pem_files = ["{}"]
tenants = ["{acme}"]
events = ["{APPROVAL_DECIDED}"]
"#,
            fixture("promotions-2026.pem").display(),
            fixture("promotions-rsa.pem").display(),
            fixture("run-control-2026.pem").display(),
        ),
    )
    .expect("sources file");
    let mut all = vec![
        ("NATS_URL".to_owned(), nats.url()),
        (
            "RUNTIME_CLOUD_INBOUND_SOURCES".to_owned(),
            sources.display().to_string(),
        ),
    ];
    all.extend(env.iter().map(|(k, v)| (k.to_string(), v.to_string())));
    Stack::with(StackOptions {
        env: all,
        suffix: Some(suffix),
        ..Default::default()
    })
    .await
}

/// `data` signed by the promotion service, as a CloudEvent.
fn promotion_signed(data: &Value, key: &SigningKey) -> Value {
    let expires = chrono::Utc::now().timestamp() + 3600;
    signed_event(
        PROMOTION_APPROVED,
        data.clone(),
        key,
        PROMOTIONS,
        "runtime-cloud",
        expires,
        "promotions",
    )
    .expect("signs")
}

/// Publishes a whole envelope (its `id` is JetStream's dedupe id).
async fn publish_event(nats: &Nats, event: &Value) {
    let id = text(&event["id"]);
    publish_raw(
        nats,
        &text(&event["type"]),
        event.to_string().into_bytes(),
        &id,
    )
    .await;
}

/// A subscription to every dead letter, taken before anything is published.
async fn dead_letters(nats: &Nats) -> async_nats::Subscriber {
    let client = async_nats::connect(nats.url()).await.expect("connect NATS");
    client
        .subscribe("runtime-cloud.dead-letter.>")
        .await
        .expect("subscribe")
}

/// The next `n` dead letters' reasons.
async fn dead_reasons(dead: &mut async_nats::Subscriber, n: usize) -> Vec<String> {
    let mut reasons = Vec::new();
    for _ in 0..n {
        let message = tokio::time::timeout(std::time::Duration::from_secs(60), dead.next())
            .await
            .expect("a dead letter in time")
            .expect("a message");
        reasons.push(
            message
                .headers
                .as_ref()
                .and_then(|h| h.get("Runtime-Cloud-Reason"))
                .map(|v| v.to_string())
                .unwrap_or_default(),
        );
    }
    reasons
}

/// Publishes a CloudEvents 1.0 envelope of `event_type` with `data` (JetStream's dedupe id:
/// `msg_id`, so a producer's re-publish is a second message when it differs).
async fn publish(nats: &Nats, event_id: &str, event_type: &str, data: Value, msg_id: &str) {
    let body = json!({ "specversion": "1.0", "id": event_id, "source": "test-producer",
                       "type": event_type, "time": chrono::Utc::now().to_rfc3339(),
                       "datacontenttype": "application/json", "data": data });
    publish_raw(nats, event_type, body.to_string().into_bytes(), msg_id).await;
}

async fn publish_raw(nats: &Nats, subject: &str, body: Vec<u8>, msg_id: &str) {
    let client = async_nats::connect(nats.url()).await.expect("connect NATS");
    let js = async_nats::jetstream::new(client);
    // The consumer creates the stream; a producer's deployment retries until the stream takes the
    // message. Right after the stream is created its subjects can still answer "no responders",
    // so the acknowledged publish (not the stream's info) is what says it is ready. The same
    // `Nats-Msg-Id` makes a retry after a lost acknowledgement one message.
    let mut headers = async_nats::HeaderMap::new();
    headers.insert("Nats-Msg-Id", msg_id);
    eventually(30, "the inbound stream to take the message", || {
        let (js, headers, body) = (js.clone(), headers.clone(), body.clone());
        async move {
            js.publish_with_headers(subject.to_owned(), headers, body.into())
                .await
                .ok()?
                .await
                .ok()
                .map(|_| ())
        }
    })
    .await;
}

fn desired(version: &str) -> Value {
    json!({ "programRef": "git://infra//shop", "programVersion": "a1b2c3d4e5",
            "workloads": [{ "name": "api", "kind": "deployment", "version": version, "replicas": 2,
                            "configRefs": {}, "secretRefs": {} }] })
}

/// The environment's runs, once there are `n`.
async fn runs_of(api: &Api, env: &str, n: usize) -> Vec<Value> {
    eventually(60, "the runs the events planned", || {
        let api = api.clone();
        let env = env.to_owned();
        async move {
            let page = api.list_runs(&format!("?environmentId={env}")).await;
            let items = page["items"].as_array().cloned().unwrap_or_default();
            (items.len() >= n).then_some(items)
        }
    })
    .await
}

#[tokio::test]
async fn an_inbound_event_has_its_effect_once_under_redelivery_and_while_the_api_is_down() {
    let nats = Nats::start();
    let mut stack = stack(&nats).await;
    let tenant = stack.tenant("acme");
    let created = json!({ "tenantId": tenant, "environmentId": "dev-eu", "projectId": "shop",
                          "class": "non-production", "specification": desired("1.0.0") });
    // The producer publishes the same event twice (two messages, one event id).
    publish(
        &nats,
        "evt-1",
        "environment.environments.v1.environment-created",
        created.clone(),
        "m1",
    )
    .await;
    publish(
        &nats,
        "evt-1",
        "environment.environments.v1.environment-created",
        created,
        "m2",
    )
    .await;
    let api = stack.operator("acme");
    let runs = runs_of(&api, "dev-eu", 1).await;
    let run = text(&runs[0]["provisioningRunId"]);
    let applied = api.wait_state(&run, "Applied").await;
    assert_eq!(applied["kind"], "baseline");
    // Both messages handled (the lag back to 0) and still one environment, one version, one run.
    let lag = eventually(30, "both messages handled", || {
        let stack = &stack;
        async move {
            let text = stack.scrape().await;
            text.contains(
                "connectsoft_factory_runtime_inbox_lag{consumer=\"runtime-cloud-inbox\"} 0",
            )
            .then_some(text)
        }
    })
    .await;
    assert!(
        lag.lines().any(|l| l
            .strip_prefix("connectsoft_factory_fleet_host_inbox_lag{module=\"inventory\"} ")
            .and_then(|age| age.parse::<f64>().ok())
            == Some(0.0)),
        "nothing waits, so the oldest waiting event has no age: {lag}"
    );
    assert_eq!(
        stack
            .count_where("inbox_events", "event_id = 'evt-1'")
            .await,
        1
    );
    assert_eq!(
        stack
            .count_where("provisioning_runs", "environment_id = 'dev-eu'")
            .await,
        1
    );
    assert_eq!(
        stack
            .count_where("deployment_specifications", "environment_id = 'dev-eu'")
            .await,
        1
    );
    assert_eq!(
        stack
            .count_where("environments", "environment_id = 'dev-eu'")
            .await,
        1
    );

    // With the API down the event waits in the durable consumer and is handled once it is back.
    stack.api = None;
    let promoted = json!({ "promotionId": "promo-7", "tenantId": tenant, "environmentId": "dev-eu",
                           "specification": desired("1.1.0"),
                           "approval": { "grantedBy": "release-manager", "grantedByRoles": ["Operator"] } });
    publish(
        &nats,
        "evt-2",
        "promotion.promotions.v1.promotion-approved",
        promoted,
        "m3",
    )
    .await;
    stack.start_api();
    let api = stack.operator("acme");
    let runs = runs_of(&api, "dev-eu", 2).await;
    let promotion = runs
        .iter()
        .find(|r| r["kind"] == "promotion")
        .unwrap_or_else(|| panic!("a promotion run: {runs:?}"));
    assert_eq!(promotion["promotionId"], "promo-7");
    api.wait_state(&text(&promotion["provisioningRunId"]), "Applied")
        .await;
}

#[tokio::test]
async fn a_malformed_event_lands_on_the_dead_letter_subject_with_the_reason() {
    let nats = Nats::start();
    let stack = stack(&nats).await;
    let mut dead = dead_letters(&nats).await;
    publish_raw(
        &nats,
        "environment.environments.v1.environment-created",
        b"{not json".to_vec(),
        "bad-1",
    )
    .await;
    let broken = json!({ "tenantId": stack.tenant("acme"), "environmentId": "has spaces",
                         "class": "staging" });
    publish(
        &nats,
        "evt-bad",
        "environment.environments.v1.environment-created",
        broken,
        "bad-2",
    )
    .await;
    let mut reasons = Vec::new();
    for _ in 0..2 {
        let message = tokio::time::timeout(std::time::Duration::from_secs(60), dead.next())
            .await
            .expect("a dead letter in time")
            .expect("a message");
        assert_eq!(
            message.subject.as_str(),
            "runtime-cloud.dead-letter.environment.environments.v1.environment-created"
        );
        let reason = message
            .headers
            .as_ref()
            .and_then(|h| h.get("Runtime-Cloud-Reason"))
            .map(|v| v.to_string())
            .unwrap_or_default();
        reasons.push(reason);
    }
    assert!(
        reasons[0].contains("not a CloudEvents JSON envelope"),
        "{reasons:?}"
    );
    assert!(
        reasons[1]
            .contains("does not match the environment.environments.v1.environment-created schema"),
        "{reasons:?}"
    );
    assert!(
        reasons[1].contains("/environmentId") && reasons[1].contains("projectId"),
        "{reasons:?}"
    );
    assert_eq!(stack.count("environments").await, 0, "nothing half-written");
}

#[tokio::test]
async fn a_decision_from_run_control_approves_the_production_run_that_waits() {
    let nats = Nats::start();
    let stack = stack(&nats).await;
    let api = stack.operator("acme");
    api.environment("prod", "production").await;
    api.declare("prod", &[("api", "1.0.0", 2)]).await;
    let run = api.plan_run("prod", "baseline").await;
    let waiting = api.wait_state(&run, "AwaitingApproval").await;
    let mut dead = dead_letters(&nats).await;
    let decided = json!({ "tenantId": stack.tenant("acme"), "provisioningRunId": run,
                          "decision": "approve", "decidedBy": "cab-chair", "decidedByRoles": ["Operator"],
                          "reason": "CHG-1234", "inputsHash": waiting["planReceipt"]["inputsHash"] });
    // Unsigned, the decision proves nothing: the run keeps waiting.
    publish(&nats, "evt-8", APPROVAL_DECIDED, decided.clone(), "d0").await;
    let reasons = dead_reasons(&mut dead, 1).await;
    assert!(reasons[0].contains("(unsigned)"), "{reasons:?}");
    assert_eq!(
        api.get(&format!("/factory/provisioning/runs/{run}"))
            .await
            .expect(200)["state"],
        "AwaitingApproval"
    );
    // Signed by RunControlService's Ed25519 key, it approves.
    let expires = chrono::Utc::now().timestamp() + 600;
    let signed = signed_event(
        APPROVAL_DECIDED,
        decided,
        &key("run-control-2026.key", Some("run-control-2026")),
        RUN_CONTROL,
        "runtime-cloud",
        expires,
        "run-control",
    )
    .expect("signs");
    publish_event(&nats, &signed).await;
    let applied = api.wait_state(&run, "Applied").await;
    assert_eq!(
        applied["approval"]["decision"]["approver"], "cab-chair",
        "{applied}"
    );
    assert!(
        applied["approval"]["approvalId"].is_string(),
        "recorded and spent: {applied}"
    );
}

/// In production the promotion's approval, signed by the promotion service, opens the gate of
/// its run only if the Approvals port verifies it: granted by an Operator it is spent and the
/// run applies; granted by someone without the role it is refused and the run waits for a
/// person.
#[tokio::test]
async fn a_production_promotion_spends_the_promotions_approval_only_when_it_verifies() {
    let nats = Nats::start();
    let stack = stack(&nats).await;
    let api = stack.operator("acme");
    api.environment("prod", "production").await;
    let tenant = stack.tenant("acme");
    let promoted = |id: &str, roles: Value| {
        json!({ "promotionId": id, "tenantId": tenant, "environmentId": "prod",
                "specification": desired("2.0.0"),
                "approval": { "grantedBy": "release-manager", "grantedByRoles": roles,
                              "reason": "release 2.0" } })
    };
    let promotions = key("promotions-2026.key", None);
    publish_event(
        &nats,
        &promotion_signed(&promoted("promo-1", json!(["Operator"])), &promotions),
    )
    .await;
    let runs = runs_of(&api, "prod", 1).await;
    let run = text(&runs[0]["provisioningRunId"]);
    let applied = api.wait_state(&run, "Applied").await;
    assert_eq!(applied["promotionId"], "promo-1");
    assert_eq!(
        applied["approval"]["decision"]["approver"], "release-manager",
        "{applied}"
    );

    publish_event(
        &nats,
        &promotion_signed(&promoted("promo-2", json!([])), &promotions),
    )
    .await;
    let runs = runs_of(&api, "prod", 2).await;
    let second = runs
        .iter()
        .find(|r| r["promotionId"] == "promo-2")
        .map(|r| text(&r["provisioningRunId"]))
        .unwrap_or_else(|| panic!("the second promotion's run: {runs:?}"));
    let waiting = api.wait_state(&second, "AwaitingApproval").await;
    assert_eq!(
        waiting["refusedApprovals"][0]["why"], "grantor-not-allowed",
        "a grantor without the role does not open the gate: {waiting}"
    );
}

/// The forged event of the report, and every way to forge one: unsigned, signed by a key the
/// source does not hold (with and without naming it), validly signed for another tenant,
/// expired, signed for another specification, and replayed. None declares, plans or applies;
/// each lands in the dead letters with its reason and is counted by reason. The event as its
/// source signed it applies, exactly once.
#[tokio::test]
async fn a_forged_approval_never_applies_and_a_signed_one_applies_once() {
    let nats = Nats::start();
    let stack = stack(&nats).await;
    let mut dead = dead_letters(&nats).await;
    let acme = stack.operator("acme");
    acme.environment("prod", "production").await;
    let globex = stack.operator("globex");
    globex.environment("prod", "production").await;
    let promotions = key("promotions-2026.key", None);
    let approved = |tenant: &str, id: &str, version: &str, by: &str| {
        json!({ "promotionId": id, "tenantId": stack.tenant(tenant), "environmentId": "prod",
                "specification": desired(version),
                "approval": { "grantedBy": by, "grantedByRoles": ["Operator"] } })
    };

    let mut forged = Vec::new();
    // 1. The report's event: no credential at all.
    forged.push(
        json!({ "specversion": "1.0", "id": "forged-1", "source": "mallory",
                        "type": PROMOTION_APPROVED,
                        "data": approved("globex", "evil-1", "6.6.6-evil", "mallory") }),
    );
    // 2. Signed by a key the promotion service does not hold, claiming its issuer.
    forged.push(promotion_signed(
        &approved("acme", "evil-2", "6.6.6-evil", "mallory"),
        &key("mallory.key", None),
    ));
    // 3. The same, naming a key id the source has no key for.
    forged.push(promotion_signed(
        &approved("acme", "evil-3", "6.6.6-evil", "mallory"),
        &key("mallory.key", Some("mallory")),
    ));
    // 4. Validly signed, but for a tenant the promotion service may not act for.
    forged.push(promotion_signed(
        &approved("globex", "evil-4", "6.6.6-evil", "release-manager"),
        &promotions,
    ));
    // 5. Expired an hour ago (the skew allowed is five seconds).
    let mut stale = approved("acme", "evil-5", "6.6.6-evil", "release-manager");
    stale["approval"]["expiresAt"] =
        json!((chrono::Utc::now() - chrono::Duration::hours(1)).to_rfc3339());
    forged.push(promotion_signed(&stale, &promotions));
    // 6. Signed for one specification, sent with another.
    let mut swapped = promotion_signed(
        &approved("acme", "evil-6", "1.0.0", "release-manager"),
        &promotions,
    );
    swapped["data"]["specification"] = desired("6.6.6-evil");
    forged.push(swapped);
    for event in &forged {
        publish_event(&nats, event).await;
    }
    let reasons = dead_reasons(&mut dead, forged.len()).await;
    for (i, reason) in [
        "unsigned",
        "bad-signature",
        "unknown-key",
        "wrong-tenant",
        "expired",
        "mismatch",
    ]
    .iter()
    .enumerate()
    {
        assert!(
            reasons[i].contains(&format!("({reason})")),
            "event {} should be refused as {reason}: {reasons:?}",
            i + 1
        );
    }

    // The event as the promotion service signed it (RS256 this time, through the CLI an
    // operator checks a set-up with) applies, with the signed grantor as the approver.
    let data = stack.data_path().join("promotion.json");
    std::fs::write(
        &data,
        approved("acme", "promo-1", "2.0.0", "release-manager").to_string(),
    )
    .expect("data file");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_runtime-cloud"))
        .args([
            "inbound",
            "sign",
            "--type",
            PROMOTION_APPROVED,
            "--issuer",
            PROMOTIONS,
        ])
        .arg("--key")
        .arg(fixture("promotions-rsa.key"))
        .args(["--kid", "promotions-rsa"])
        .arg(&data)
        .output()
        .expect("runtime-cloud inbound sign");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let signed: Value = serde_json::from_slice(&out.stdout).expect("a CloudEvent");
    publish_event(&nats, &signed).await;
    let runs = runs_of(&acme, "prod", 1).await;
    let run = text(&runs[0]["provisioningRunId"]);
    let applied = acme.wait_state(&run, "Applied").await;
    assert_eq!(
        applied["approval"]["decision"]["approver"], "release-manager",
        "{applied}"
    );
    // 7. Replayed: the same signed approval under a new event id.
    let mut replay = signed.clone();
    replay["id"] = json!("replay-1");
    publish_event(&nats, &replay).await;
    let reasons = dead_reasons(&mut dead, 1).await;
    assert!(reasons[0].contains("(replayed)"), "{reasons:?}");

    // Nothing of the forgeries was declared, planned or applied, in either tenant.
    assert_eq!(stack.count("provisioning_runs").await, 1);
    assert_eq!(
        stack
            .count_where("deployment_specifications", "1 = 1")
            .await,
        1
    );
    assert_eq!(
        stack
            .count_where("approvals", "granted_by = 'mallory'")
            .await,
        0
    );
    assert!(
        stack.sandbox("globex", "prod").is_null(),
        "nothing applied to globex"
    );
    let sandbox = stack.sandbox("acme", "prod").to_string();
    assert!(!sandbox.contains("6.6.6-evil"), "{sandbox}");
    let metrics = stack.scrape().await;
    for reason in [
        "unsigned",
        "bad-signature",
        "unknown-key",
        "wrong-tenant",
        "expired",
        "mismatch",
        "replayed",
    ] {
        let line = format!(
            "connectsoft_factory_runtime_inbound_refused_total{{type=\"{PROMOTION_APPROVED}\",reason=\"{reason}\"}} 1\n"
        );
        assert!(metrics.contains(&line), "{line} in {metrics}");
    }
}

/// `RUNTIME_CLOUD_INBOUND_ACCEPT_UNSIGNED` is for `runtime-cloud dev` only: the API and the
/// worker refuse to start with it, naming it.
#[tokio::test]
async fn the_production_commands_refuse_to_take_unsigned_approvals() {
    for command in ["api", "worker"] {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_runtime-cloud"))
            .arg(command)
            .env("RUNTIME_CLOUD_INBOUND_ACCEPT_UNSIGNED", "true")
            .env(
                "RUNTIME_CLOUD_DATA_DIR",
                tempfile::tempdir().expect("dir").path(),
            )
            .stdin(std::process::Stdio::null())
            .output()
            .expect("runtime-cloud");
        assert!(!out.status.success(), "{command} started");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            stderr.contains("RUNTIME_CLOUD_INBOUND_ACCEPT_UNSIGNED"),
            "{command}: {stderr}"
        );
    }
}

/// RunControlService's keys published as a JWKS (the OIDC provider stand-in serves one): a
/// decision it signed with a key of that set approves the waiting run. Where RunControlService
/// is configured, an unsigned approval that names its `approvalId` is claimed there instead,
/// and the run applies with the grantor RunControlService holds.
#[tokio::test]
async fn a_decision_is_proven_by_a_jwks_key_or_claimed_at_run_control() {
    use crate::common::oidc_provider_stand_in::OidcProviderStandIn;
    use crate::common::run_control_stand_in::{RunControlStandIn, TOKEN};
    let nats = Nats::start();
    let keys = OidcProviderStandIn::start(&["ec-2026-a"]).await;
    let rc = RunControlStandIn::start().await;
    let suffix = uuid::Uuid::new_v4().simple().to_string()[..8].to_owned();
    let dir = tempfile::tempdir().expect("dir");
    let sources = dir.path().join("sources.toml");
    std::fs::write(
        &sources,
        format!(
            "[[source]]\nname = \"run-control\"\nissuer = \"{RUN_CONTROL}\"\n\
             jwks_url = \"{}/protocol/openid-connect/certs\"\ntenants = [\"acme-{suffix}\"]\n\
             events = [\"{APPROVAL_DECIDED}\"]\n",
            keys.issuer
        ),
    )
    .expect("sources file");
    let stack = Stack::with(StackOptions {
        env: vec![
            ("NATS_URL".into(), nats.url()),
            (
                "RUNTIME_CLOUD_INBOUND_SOURCES".into(),
                sources.display().to_string(),
            ),
            ("RUNTIME_CLOUD_RUN_CONTROL_URL".into(), rc.url.clone()),
            ("RUNTIME_CLOUD_RUN_CONTROL_TOKEN".into(), TOKEN.into()),
        ],
        suffix: Some(suffix),
        ..Default::default()
    })
    .await;
    let api = stack.operator("acme");
    api.environment("prod", "production").await;
    api.declare("prod", &[("api", "1.0.0", 2)]).await;
    let decided = |run: &str, waiting: &Value| {
        json!({ "tenantId": stack.tenant("acme"), "provisioningRunId": run,
                "decision": "approve", "decidedBy": "cab-chair", "decidedByRoles": ["Operator"],
                "reason": "CHG-77", "inputsHash": waiting["planReceipt"]["inputsHash"] })
    };

    // Signed with the JWKS's key.
    let run = api.plan_run("prod", "baseline").await;
    let waiting = api.wait_state(&run, "AwaitingApproval").await;
    let mut data = decided(&run, &waiting);
    let expires = chrono::Utc::now().timestamp() + 600;
    let claims = runtime_cloud_api::inbound::sign::claims(
        APPROVAL_DECIDED,
        &data,
        RUN_CONTROL,
        "runtime-cloud",
        expires,
    )
    .expect("claims");
    data["signature"] = json!(keys.sign("ec-2026-a", &claims));
    publish(&nats, "jwks-1", APPROVAL_DECIDED, data, "j1").await;
    let applied = api.wait_state(&run, "Applied").await;
    assert_eq!(
        applied["approval"]["decision"]["approver"], "cab-chair",
        "{applied}"
    );

    // RunControlService's own approval, by id.
    let run = api.plan_run("prod", "promotion").await;
    let waiting = api.wait_state(&run, "AwaitingApproval").await;
    let approval_id = uuid::Uuid::new_v4().to_string();
    rc.hold(json!({
        "approvalId": approval_id, "tenantId": stack.tenant("acme"), "environmentId": "prod",
        "class": "production", "decision": "approve", "grantedBy": "change-board",
        "grantedByRoles": ["Operator"], "reason": "CAB-78", "source": "run-control",
        "decidedAt": chrono::Utc::now(),
        "expiresAt": chrono::Utc::now() + chrono::Duration::hours(1),
    }));
    let mut data = decided(&run, &waiting);
    data["approvalId"] = json!(approval_id);
    publish(&nats, "rc-1", APPROVAL_DECIDED, data, "r1").await;
    let applied = api.wait_state(&run, "Applied").await;
    assert_eq!(
        applied["approval"]["decision"]["approver"], "change-board",
        "the grantor RunControlService holds: {applied}"
    );
    assert_eq!(rc.claims()[0]["body"]["runId"], run.as_str());
}

/// An `EnvironmentCreated` with a `ttl` registers an ephemeral environment as the API does:
/// its expiry recorded and its lifetime running; a production one with a `ttl` is refused to
/// the dead-letter subject with the reason, and nothing is registered.
#[tokio::test]
async fn an_environment_created_with_a_ttl_is_ephemeral_and_production_is_refused() {
    let nats = Nats::start();
    let stack = stack(&nats).await;
    let mut dead = dead_letters(&nats).await;
    let tenant = stack.tenant("acme");
    let before = chrono::Utc::now();
    publish(
        &nats,
        "evt-preview",
        "environment.environments.v1.environment-created",
        json!({ "tenantId": tenant, "environmentId": "preview-7", "projectId": "shop",
                "class": "non-production", "ttl": "2h" }),
        "ttl-1",
    )
    .await;
    publish(
        &nats,
        "evt-prod",
        "environment.environments.v1.environment-created",
        json!({ "tenantId": tenant, "environmentId": "prod-eu", "projectId": "shop",
                "class": "production", "ttl": "2h" }),
        "ttl-2",
    )
    .await;
    let api = stack.operator("acme");
    let env = eventually(60, "the ephemeral environment registered", || async {
        let res = api.get("/factory/environments/preview-7").await;
        (res.status == 200).then(|| res.expect(200))
    })
    .await;
    let expires: chrono::DateTime<chrono::Utc> =
        text(&env["expiresAt"]).parse().expect("expiresAt");
    let ttl = expires - before;
    assert!(
        ttl > chrono::Duration::minutes(119) && ttl <= chrono::Duration::minutes(121),
        "{env}"
    );
    let lifetime = runtime_cloud_workflows::ids::environment_lifetime_id(&tenant, "preview-7");
    let described = stack.described_workflow(&lifetime).await;
    assert_eq!(
        described["workflowExecutionInfo"]["status"], "WORKFLOW_EXECUTION_STATUS_RUNNING",
        "{described}"
    );
    let reasons = dead_reasons(&mut dead, 1).await;
    assert!(reasons[0].contains("cannot be ephemeral"), "{reasons:?}");
    api.get("/factory/environments/prod-eu")
        .await
        .expect_problem(404);
}
